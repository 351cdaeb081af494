"""`toolwire serve` on the embedded engine (llama.cpp + SmolLM2-135M-Instruct), for real.

The server runs as a subprocess, started exactly as a user starts it, on a free port;
the official `openai` client talks to it. Greedy decoding (temperature 0) keeps the
runs reproducible; max_tokens stays small so the module runs in well under a minute.
The forced-call examples of README.md and docs/server.md, sent as written, answer with
the one call and the finish the pages show.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from tests.apis import EVERY_API, Api
from tests.serving import GET_TIME, GET_WEATHER, schemas, toolwire_serve
from toolwire.backends.bundled import bundled_model, tool_template
from toolwire.backends.gguf import tokenizer_from_gguf
from toolwire.prompt import render_prompt

MODEL = "SmolLM2-135M-Instruct"
TOOLS = [GET_WEATHER, GET_TIME]
SCHEMAS = schemas(TOOLS)
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


class Served:
    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log
        self.client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with toolwire_serve(log, "--max-tokens", "48") as url:
        yield Served(url, log)


def _call(served: Served, **request: Any) -> Any:
    return served.client.chat.completions.create(
        model=MODEL, messages=ASK, temperature=0, **request
    )


def test_startup_warns_that_delimiters_are_matched_as_text(served: Served) -> None:
    assert re.search(r"WARNING .*'hermes'.*matched as text", served.log.read_text())
    health = httpx.get(served.url + "/health").json()
    assert health["gated"] is False and health["format"] == "hermes"
    assert health["constrained"] is True


def test_plain_chat_whole_and_streamed_agree(served: Served) -> None:
    whole = _call(served, max_tokens=16, seed=1)
    text = whole.choices[0].message.content
    assert text and whole.choices[0].finish_reason in ("stop", "length")
    assert not whole.choices[0].message.tool_calls
    pieces = []
    finish = None
    usage = None
    stream = _call(
        served, max_tokens=16, seed=1, stream=True, stream_options={"include_usage": True}
    )
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(pieces) == text  # greedy: the stream spells the same answer
    assert finish == whole.choices[0].finish_reason
    assert usage is not None and usage.model_dump() == whole.usage.model_dump()


def test_usage_counts_prompt_and_output_ids(served: Served) -> None:
    r = _call(served, max_tokens=8)
    path = bundled_model()
    assert path is not None
    prompt = render_prompt(
        ASK, tokenizer_from_gguf(path), format="hermes", template=tool_template()
    )
    assert r.usage.prompt_tokens == len(prompt.ids)
    assert r.usage.completion_tokens == 8 and r.choices[0].finish_reason == "length"
    assert r.usage.total_tokens == len(prompt.ids) + 8


def _valid_call(call: Any, name: str | None = None) -> None:
    assert call.function.name in SCHEMAS
    if name is not None:
        assert call.function.name == name
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_required_yields_a_real_call(served: Served) -> None:
    r = _call(served, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, max_tokens=48)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert len(choice.message.tool_calls) == 1
    _valid_call(choice.message.tool_calls[0])


def test_named_tool_streamed(served: Served) -> None:
    named = {"type": "function", "function": {"name": "get_time"}}
    calls: dict[int, dict[str, str]] = {}
    finish = None
    stream = _call(served, tools=TOOLS, tool_choice=named, max_tokens=48, stream=True)
    for chunk in stream:
        for choice in chunk.choices:
            for d in choice.delta.tool_calls or []:
                entry = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] = d.id or entry["id"]
                if d.function is not None:
                    entry["name"] = d.function.name or entry["name"]
                    entry["arguments"] += d.function.arguments or ""
            finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert [c["name"] for c in calls.values()] == ["get_time"]
    call = calls[0]
    assert re.fullmatch(r"call_[0-9a-f]{24}", call["id"])
    jsonschema.validate(json.loads(call["arguments"]), SCHEMAS["get_time"])


def test_tool_choice_none_returns_text(served: Served) -> None:
    r = _call(served, tools=TOOLS, tool_choice="none", max_tokens=16)
    assert not r.choices[0].message.tool_calls
    assert r.choices[0].message.content
    assert "<tool_call>" not in r.choices[0].message.content


def test_errors_in_openai_shape(served: Served) -> None:
    with pytest.raises(openai.NotFoundError):
        served.client.chat.completions.create(model="gpt-nope", messages=ASK)
    with pytest.raises(openai.BadRequestError) as caught:
        _call(served, max_tokens=-1)
    assert caught.value.body["param"] == "max_tokens"  # type: ignore[index]
    metrics = httpx.get(served.url + "/metrics").text
    assert re.search(
        r'toolwire_requests_total\{route="/v1/chat/completions",status="404"\} 1', metrics
    )


@EVERY_API
def test_a_dropped_request_frees_the_engine(served: Served, api: Api) -> None:
    """A client that leaves a non-streaming request, on any API, stops its generation:
    the next request does not wait for the abandoned one's tokens (about 120 here).

    The bound is the machine's own pace, measured in the same test: the next request
    may take its own time (`short`) and less than half of what the abandoned
    generation takes when it runs to its end (`full`), which is what it would wait for
    if that generation went on."""
    started = time.monotonic()
    _call(served, max_tokens=4)
    short = time.monotonic() - started
    abandoned = _metric(served, "toolwire_abandoned_requests_total")
    count = "Count from 1 to 500, one number per line."
    body = api.body(count, max_tokens=1500, model=MODEL, temperature=0)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(served.url + api.path, json=body, timeout=0.5)
    started = time.monotonic()
    r = _call(served, max_tokens=4)
    took = time.monotonic() - started
    assert r.choices[0].finish_reason == "length"
    assert _metric(served, "toolwire_abandoned_requests_total") == abandoned + 1
    started = time.monotonic()
    whole = httpx.post(served.url + api.path, json=body, timeout=600)
    full = time.monotonic() - started
    assert whole.status_code == 200, whole.text
    assert took < short + (full - short) / 2, (took, short, full)


def _metric(served: Served, name: str) -> float:
    text = httpx.get(served.url + "/metrics").text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_response_format_json_schema(served: Served) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]}},
        "required": ["city"],
        "additionalProperties": False,
    }
    response_format = {"type": "json_schema", "json_schema": {"name": "place", "schema": schema}}
    r = _call(served, max_tokens=40, response_format=response_format)
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)
    r = _call(served, max_tokens=8, response_format={"type": "json_object"})
    assert r.choices[0].message.content.lstrip().startswith("{")


# -- the pages' examples answer as they show -----------------------------------------

_ROOT = Path(__file__).resolve().parent.parent
_EXAMPLE = re.compile(r"curl -s \S*?(/v1/[a-z/]+) .*?-d '(\{.*?\})'", re.DOTALL)
#: A completed call's finish, as each route writes it.
_FINISH = {
    "/v1/chat/completions": ("finish_reason", "tool_calls"),
    "/v1/responses": ("status", "completed"),
    "/v1/messages": ("stop_reason", "tool_use"),
}


def _examples() -> list[tuple[str, str, dict[str, Any], str]]:
    """Each page's curl examples on the bundled model: page, route, body, and the text
    after the body (the answer the page shows)."""
    found = []
    for page in ("README.md", "docs/server.md"):
        text = (_ROOT / page).read_text(encoding="utf-8")
        for match in _EXAMPLE.finditer(text):
            body = json.loads(match[2])
            if body.get("model") == MODEL and body.get("tools"):
                found.append((page, match[1], body, text[match.end() : match.end() + 1200]))
    return found


def _calls(route: str, answer: dict[str, Any]) -> list[tuple[str, Any]]:
    if route == "/v1/chat/completions":
        message = answer["choices"][0]["message"]
        return [
            (c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in message.get("tool_calls") or []
        ]
    if route == "/v1/responses":
        return [
            (o["name"], json.loads(o["arguments"]))
            for o in answer["output"]
            if o["type"] == "function_call"
        ]
    return [(b["name"], b["input"]) for b in answer["content"] if b["type"] == "tool_use"]


def _finish(route: str, answer: dict[str, Any]) -> Any:
    key = _FINISH[route][0]
    return answer["choices"][0][key] if route == "/v1/chat/completions" else answer[key]


def test_every_api_has_an_example_on_the_pages() -> None:
    assert {route for _, route, _, _ in _examples()} == set(_FINISH)


@pytest.mark.parametrize(
    ("page", "route", "body", "shown"),
    [pytest.param(*example, id=f"{example[0]}:{example[1]}") for example in _examples()],
)
def test_the_pages_examples_answer_as_they_show(
    served: Served, page: str, route: str, body: dict[str, Any], shown: str
) -> None:
    """README.md's and docs/server.md's forced-call examples, sent as written: the one
    call the page shows, and the finish it shows."""
    headers = {"anthropic-version": "2023-06-01", "x-api-key": "none"}
    response = httpx.post(served.url + route, json=body, headers=headers, timeout=120)
    assert response.status_code == 200, response.text
    answer = response.json()
    key, done = _FINISH[route]
    assert f'"{key}": "{done}"' in shown, f"{page} shows no {key} {done}"
    assert shown.count('"name": "get_weather"') == 1, f"{page} shows one call"
    assert (_calls(route, answer), _finish(route, answer)) == (
        [("get_weather", {"city": "Paris"})],
        done,
    ), answer
