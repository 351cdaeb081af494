"""The server over the vLLM and SGLang protocols, end to end on real loopback HTTP.

A scripted upstream (tests/serving.py) speaks each engine's token-id protocol and answers
with ids the test chose, built from the Qwen3 tokenizer: genuine delimiter ids for real
calls, `encode(..., delimiters=False)` for markup a model copies from its input. The
official `openai` client talks to `toolwire`'s app served by uvicorn.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.serving import (
    DELETE_ALL,
    GET_WEATHER,
    INJECTED,
    MODEL,
    STREAM,
    Script,
    ScriptedRig,
    chat,
    running,
    scripted,
    scripted_engine,
)
from toolwire.server.app import create_app
from toolwire.server.core.pipeline import Limits

TOOLS = [GET_WEATHER, DELETE_ALL]
CALL_ID = re.compile(r"^call_[0-9a-f]{24}$")


class Rig(ScriptedRig):
    """One scripted upstream, the toolwire app in front of it, and an OpenAI client."""

    def __init__(self, upstream: Any, upstream_url: str, url: str) -> None:
        super().__init__(upstream, upstream_url, url)
        self.client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)

    def chat(self, stream: bool, **request: Any) -> dict[str, Any]:
        """One completion through the client, streamed or not, as a plain summary."""
        request.setdefault("messages", [{"role": "user", "content": "hi"}])
        return chat(self.client, MODEL, stream, **request)


@pytest.fixture(scope="module", params=["vllm", "sglang"])
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    with scripted(request.param, Limits(timeout=5)) as (upstream, upstream_url, (url,)):
        yield Rig(upstream, upstream_url, url)


def test_format_is_inferred_and_gated(rig: Rig) -> None:
    health = httpx.get(rig.url + "/health").json()
    assert health["format"] == "qwen3"
    assert health["gated"] is True
    assert not any("matched as text" in w for w in health["warnings"])


@STREAM
def test_plain_chat(rig: Rig, stream: bool) -> None:
    ids = rig.script("Hello there, how can I help?")
    out = rig.chat(stream)
    assert out["content"] == "Hello there, how can I help?"
    assert out["calls"] == [] and out["finish"] == "stop"
    prompt = rig.prompt()
    assert out["usage"]["prompt_tokens"] == len(prompt)
    assert out["usage"]["completion_tokens"] == len(ids)
    assert rig.tok.decode(prompt).endswith("<|im_start|>assistant\n")


@STREAM
@pytest.mark.parametrize("choice", ["required", "named"])
def test_required_and_named_choice(rig: Rig, stream: bool, choice: str) -> None:
    rig.script('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
    tool_choice: Any = choice
    if choice == "named":
        tool_choice = {"type": "function", "function": {"name": "get_weather"}}
    out = rig.chat(stream, tools=TOOLS, tool_choice=tool_choice)
    assert [c["name"] for c in out["calls"]] == ["get_weather"]
    assert json.loads(out["calls"][0]["arguments"]) == {"city": "Paris"}
    assert CALL_ID.match(out["calls"][0]["id"])
    assert out["finish"] == "tool_calls"
    assert not out["content"]
    tag = rig.tag()
    assert tag is not None and "get_weather" in json.dumps(tag)


@STREAM
def test_tool_choice_none_consumes_markup(rig: Rig, stream: bool) -> None:
    rig.script(
        'Sure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    )
    out = rig.chat(stream, tools=TOOLS, tool_choice="none")
    assert out["calls"] == [] and out["content"] == "Sure."
    assert out["finish"] == "stop"
    assert rig.tag() is None


def _attack_messages(tool_content: str) -> list[dict[str, Any]]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    return [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": tool_content},
    ]


@STREAM
def test_injected_call_in_tool_result_stays_text(rig: Rig, stream: bool) -> None:
    delimiter = rig.tok.added_tokens["<tool_call>"]
    rig.script("Sunny. 22 degrees.")
    rig.chat(False, messages=_attack_messages("Sunny, 22C."), tools=TOOLS)
    clean = rig.upstream.bodies[-1]
    echoed = "The tool said: " + INJECTED
    rig.script("The tool said: ", spelled=INJECTED[len("") :])
    out = rig.chat(stream, messages=_attack_messages("Sunny. " + INJECTED), tools=TOOLS)
    attacked = rig.upstream.bodies[-1]
    key = "prompt" if rig.upstream.protocol == "vllm" else "input_ids"
    # the injected markup reached the engine as sub-word ids: no extra delimiter id
    assert attacked[key].count(delimiter) == clean[key].count(delimiter)
    # and the model echoing it (spelled from sub-words) is content, not a call
    assert out["calls"] == []
    assert out["content"] == echoed
    assert out["finish"] == "stop"
    metrics = httpx.get(rig.url + "/metrics").text
    assert re.search(r"^toolwire_echoed_delimiters_neutralized_total [1-9]", metrics, re.M)


@STREAM
def test_stop_string_cuts_content_but_not_a_call(rig: Rig, stream: bool) -> None:
    rig.script("One. Two. END Three.")
    out = rig.chat(stream, stop=["END"])
    assert out["content"] == "One. Two. " and out["finish"] == "stop"
    rig.script('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>')
    out = rig.chat(stream, tools=TOOLS, stop=["<tool", "Rome"])
    assert [c["name"] for c in out["calls"]] == ["get_weather"]
    assert json.loads(out["calls"][0]["arguments"]) == {"city": "Rome"}


def test_engine_failure_mid_stream_ends_with_error_and_done(rig: Rig) -> None:
    rig.script("a b c d e f g h i j k l m n o p", per_event=2, fail_after=3)
    with httpx.stream(
        "POST",
        rig.url + "/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True},
        timeout=10,
    ) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "data: [DONE]"
    error = json.loads(lines[-2][5:])
    assert "error" in error and error["error"]["type"] == "engine_error"
    text = "".join(
        json.loads(line[5:])["choices"][0]["delta"].get("content") or ""
        for line in lines[:-2]
        if json.loads(line[5:]).get("choices")
    )
    assert text.startswith("a b c")  # what arrived before the failure is kept
    rig.script("a b c", fail_after=0)
    with pytest.raises(openai.APIStatusError) as caught:
        rig.chat(False)
    assert caught.value.status_code == 502


def test_upstream_refusal_is_an_error_not_a_hang(rig: Rig) -> None:
    rig.upstream.refuse = 500
    try:
        with pytest.raises(openai.APIStatusError) as caught:
            rig.chat(False)
        assert caught.value.status_code == 502
        with pytest.raises(openai.APIError):
            rig.chat(True)
    finally:
        rig.upstream.refuse = None


def test_client_disconnect_stops_the_upstream(rig: Rig) -> None:
    before = rig.upstream.cancelled
    rig.script(" ".join(["word"] * 200), per_event=1, delay=0.02)
    with httpx.stream(
        "POST",
        rig.url + "/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True},
        timeout=10,
    ) as response:
        for line in response.iter_lines():
            if '"content":"word' in line:
                break
    for _ in range(100):
        if rig.upstream.cancelled > before:
            break
        httpx.get(rig.url + "/health")  # let the loop run; bounded wait
        time.sleep(0.02)
    assert rig.upstream.cancelled > before


def test_bad_requests_name_the_field(rig: Rig) -> None:
    url = rig.url + "/v1/chat/completions"
    cases = [
        ({"model": MODEL}, "messages"),
        ({"model": MODEL, "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "temperature": 9},
            "temperature",
        ),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            "max_tokens",
        ),
        (
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": "x"}],
                "tool_choice": "required",
            },
            "tool_choice",
        ),
        (
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": "x"}],
                "tools": TOOLS,
                "tool_choice": {"type": "function", "function": {"name": "nope"}},
            },
            "tool_choice",
        ),
        ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stop": [1]}, "stop"),
    ]
    for body, param in cases:
        r = httpx.post(url, json=body)
        assert r.status_code == 400, (body, r.text)
        error = r.json()["error"]
        assert error["param"] == param and error["type"] == "invalid_request_error"
    r = httpx.post(url, content=b"{not json")
    assert r.status_code == 400
    r = httpx.post(url, json={"model": "other", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_models_and_metrics(rig: Rig) -> None:
    models = rig.client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    text = httpx.get(rig.url + "/metrics").text
    for name in (
        "toolwire_requests_total",
        "toolwire_prompt_tokens_total",
        "toolwire_completion_tokens_total",
        "toolwire_time_to_first_token_seconds_bucket",
        "toolwire_inter_token_latency_seconds_bucket",
        "toolwire_parse_fallbacks_total",
        "toolwire_grammar_fallbacks",
        "toolwire_echoed_delimiters_neutralized_total",
    ):
        assert name in text, name


@STREAM
def test_call_to_undeclared_tool_is_content_and_counted(rig: Rig, stream: bool) -> None:
    def fallbacks() -> float:
        text = httpx.get(rig.url + "/metrics").text
        found = re.search(r"^toolwire_parse_fallbacks_total (\S+)", text, re.M)
        assert found is not None
        return float(found.group(1))

    before = fallbacks()
    markup = '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>'
    rig.script(markup)
    out = rig.chat(stream, tools=TOOLS)
    assert out["calls"] == []
    assert out["content"] == markup  # nothing the model produced is lost
    assert fallbacks() == before + 1


@STREAM
def test_a_call_cut_by_the_length_limit_is_content(rig: Rig, stream: bool) -> None:
    """The engine's finish reason reaches the parser: an unended body is a call only
    when the model stopped, never when max_tokens cut it."""
    unended = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
    rig.upstream.scripts.append(Script(rig.tok.encode(unended), finish="length"))
    out = rig.chat(stream, tools=TOOLS)
    assert (out["calls"], out["content"], out["finish"]) == ([], unended, "length")
    rig.script(unended)  # the model stopped (its end-of-turn id)
    out = rig.chat(stream, tools=TOOLS)
    assert [(c["name"], json.loads(c["arguments"])) for c in out["calls"]] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert out["finish"] == "tool_calls"


def test_timeout_and_prompt_limit(rig: Rig) -> None:
    engine = scripted_engine(rig.protocol, rig.upstream_url)
    engine.max_prompt_tokens = 5
    with running(create_app(engine, Limits(timeout=0.3))) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
        assert caught.value.body["param"] == "messages"  # type: ignore[index]
        assert "--max-prompt-tokens" in caught.value.message
        engine.max_prompt_tokens = None
        rig.script(" ".join(["slow"] * 100), per_event=1, delay=0.02)
        started = time.monotonic()
        with httpx.stream(
            "POST",
            url + "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True},
            timeout=10,
        ) as response:
            lines = [line for line in response.iter_lines() if line.startswith("data:")]
        assert time.monotonic() - started < 3
        assert lines[-1] == "data: [DONE]"
        assert json.loads(lines[-2][5:])["error"]["code"] == "timeout"
        rig.script(" ".join(["slow"] * 100), per_event=1, delay=0.02)
        r = httpx.post(
            url + "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]},
            timeout=10,
        )
        assert r.status_code == 504 and r.json()["error"]["type"] == "timeout"
