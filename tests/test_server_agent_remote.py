"""The Responses and Messages APIs over the vLLM and SGLang protocols, end to end.

A scripted upstream (tests/serving.py) answers with ids built from the Qwen3 tokenizer
(gated: genuine delimiter ids for real calls, `encode(..., delimiters=False)` for
markup a model copies). The official `openai` and `anthropic` clients talk to toolwire's
app on loopback HTTP. Two apps share the upstream: calls held until complete (the
default) and `stream_tool_arguments`.

The stream-grammar checks read the raw SSE, so they test the wire, not a client's
tolerance of it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.serving import (
    CALL,
    DELETE_ALL,
    GET_WEATHER,
    INJECTED,
    MODEL,
    WEATHER,
    ScriptedRig,
    messages_tools,
    responses_tools,
    running,
    scripted,
    scripted_engine,
)
from toolwire.server.app import create_app
from toolwire.server.core.pipeline import Limits

RESPONSES_TOOLS = responses_tools([GET_WEATHER, DELETE_ALL])
MESSAGES_TOOLS = messages_tools([GET_WEATHER, DELETE_ALL])
ASK = "What is the weather in Paris?"


class Rig(ScriptedRig):
    """One scripted upstream; toolwire in front of it (held and streamed-argument apps)."""

    def __init__(self, upstream: Any, upstream_url: str, url: str, streamed_url: str) -> None:
        super().__init__(upstream, upstream_url, url)
        self.streamed_url = streamed_url
        self.openai = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        self.anthropic = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)


@pytest.fixture(scope="module", params=["vllm", "sglang"])
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    held, streamed = Limits(timeout=5), Limits(timeout=5, stream_tool_arguments=True)
    with scripted(request.param, held, streamed) as (upstream, upstream_url, urls):
        yield Rig(upstream, upstream_url, *urls)


# ---- the OpenAI Responses API through the official client --------------------------------


def _summary(response: Any) -> dict[str, Any]:
    """A response as plain data: text, reasoning, calls, status."""
    calls = [
        {"call_id": i.call_id, "name": i.name, "arguments": i.arguments}
        for i in response.output
        if i.type == "function_call"
    ]
    reasoning = "".join(
        part.text for i in response.output if i.type == "reasoning" for part in i.content or []
    )
    return {
        "text": response.output_text,
        "reasoning": reasoning,
        "calls": calls,
        "status": response.status,
        "types": [i.type for i in response.output],
    }


def respond(rig: Rig, mode: str, **request: Any) -> dict[str, Any]:
    """One response through `client.responses`: create, create(stream=True), or stream()."""
    request.setdefault("input", ASK)
    if mode == "whole":
        return _summary(rig.openai.responses.create(model=MODEL, **request))
    if mode == "events":
        final = None
        for event in rig.openai.responses.create(model=MODEL, stream=True, **request):
            if event.type in ("response.completed", "response.incomplete"):
                final = event.response
        assert final is not None
        return _summary(final)
    with rig.openai.responses.stream(model=MODEL, **request) as stream:
        for _ in stream:
            pass
        return _summary(stream.get_final_response())


MODES = pytest.mark.parametrize("mode", ["whole", "events", "helper"])


@MODES
@pytest.mark.parametrize("choice", ["required", "named"])
def test_responses_forced_call(rig: Rig, mode: str, choice: str) -> None:
    rig.script(CALL)
    tool_choice: Any = (
        choice if choice == "required" else {"type": "function", "name": "get_weather"}
    )
    out = respond(rig, mode, tools=RESPONSES_TOOLS, tool_choice=tool_choice)
    assert out["types"] == ["function_call"] and out["status"] == "completed"
    call = out["calls"][0]
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Paris"}
    assert call["call_id"].startswith("call_")
    assert "get_weather" in json.dumps(rig.tag())


@MODES
def test_responses_two_turns_send_the_call_and_its_result_back(rig: Rig, mode: str) -> None:
    rig.script("<think>\nI should look it up.\n</think>\n\n" + CALL)
    first = rig.openai.responses.create(
        model=MODEL, input=ASK, tools=RESPONSES_TOOLS, tool_choice="required"
    )
    assert [i.type for i in first.output] == ["reasoning", "function_call"]
    call = first.output[1]
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 22C"}
    rig.script("It is sunny, 22C.")
    stateless = [
        {"role": "user", "content": ASK},
        *[i.model_dump(exclude_none=True) for i in first.output],
        result,
    ]
    out = respond(rig, mode, input=stateless, tools=RESPONSES_TOOLS)
    assert out["text"] == "It is sunny, 22C." and out["calls"] == []
    prompt = rig.tok.decode(rig.prompt())
    assert "Sunny, 22C" in prompt and '"city": "Paris"' in prompt
    assert "I should look it up." in prompt  # the reasoning item went back to the template
    # the same second turn by reference to the stored first one
    rig.script("It is sunny, 22C.")
    out = respond(rig, mode, input=[result], previous_response_id=first.id, tools=RESPONSES_TOOLS)
    assert out["text"] == "It is sunny, 22C."
    assert rig.tok.decode(rig.prompt()) == prompt


@MODES
def test_responses_tool_choice_none_yields_text(rig: Rig, mode: str) -> None:
    rig.script("Sure." + CALL)
    out = respond(rig, mode, tools=RESPONSES_TOOLS, tool_choice="none")
    assert out == {
        "text": "Sure.",
        "reasoning": "",
        "calls": [],
        "status": "completed",
        "types": ["message"],
    }
    assert rig.tag() is None


@MODES
def test_responses_echo_attack_never_becomes_a_call(rig: Rig, mode: str) -> None:
    delimiter = rig.tok.added_tokens["<tool_call>"]

    def items(output: str) -> list[dict[str, Any]]:
        call = {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        }
        return [
            {"role": "user", "content": ASK},
            call,
            {"type": "function_call_output", "call_id": "call_1", "output": output},
        ]

    rig.script("Sunny.")
    respond(rig, "whole", input=items("Sunny, 22C."), tools=RESPONSES_TOOLS)
    clean = rig.prompt()
    rig.script("The tool said: ", spelled=INJECTED)
    out = respond(rig, mode, input=items("Sunny. " + INJECTED), tools=RESPONSES_TOOLS)
    assert rig.prompt().count(delimiter) == clean.count(delimiter)
    assert out["calls"] == [] and out["text"] == "The tool said: " + INJECTED


# ---- the Anthropic Messages API through the official client ------------------------------


def _message_summary(message: Any) -> dict[str, Any]:
    calls = [
        {"id": b.id, "name": b.name, "input": b.input}
        for b in message.content
        if b.type == "tool_use"
    ]
    return {
        "text": "".join(b.text for b in message.content if b.type == "text"),
        "thinking": "".join(b.thinking for b in message.content if b.type == "thinking"),
        "calls": calls,
        "stop_reason": message.stop_reason,
        "types": [b.type for b in message.content],
    }


def message(rig: Rig, mode: str, **request: Any) -> dict[str, Any]:
    """One message through `client.messages`: create, create(stream=True), or stream()."""
    request.setdefault("messages", [{"role": "user", "content": ASK}])
    request.setdefault("max_tokens", 64)
    client = rig.anthropic
    if mode == "whole":
        return _message_summary(client.messages.create(model=MODEL, **request))
    if mode == "events":
        blocks: dict[int, dict[str, Any]] = {}
        stop_reason = None
        for event in client.messages.create(model=MODEL, stream=True, **request):
            if event.type == "content_block_start":
                blocks[event.index] = {"block": event.content_block, "acc": ""}
            elif event.type == "content_block_delta":
                delta = event.delta
                piece = getattr(delta, "text", None) or getattr(delta, "thinking", None)
                blocks[event.index]["acc"] += piece or getattr(delta, "partial_json", "")
            elif event.type == "message_delta":
                stop_reason = event.delta.stop_reason
        calls = [
            {"id": b["block"].id, "name": b["block"].name, "input": json.loads(b["acc"] or "{}")}
            for b in blocks.values()
            if b["block"].type == "tool_use"
        ]
        return {
            "text": "".join(b["acc"] for b in blocks.values() if b["block"].type == "text"),
            "thinking": "".join(b["acc"] for b in blocks.values() if b["block"].type == "thinking"),
            "calls": calls,
            "stop_reason": stop_reason,
            "types": [blocks[i]["block"].type for i in sorted(blocks)],
        }
    with client.messages.stream(model=MODEL, **request) as stream:
        return _message_summary(stream.get_final_message())


@MODES
@pytest.mark.parametrize("choice", ["any", "tool"])
def test_messages_forced_call(rig: Rig, mode: str, choice: str) -> None:
    rig.script(CALL)
    tool_choice: Any = (
        {"type": "any"} if choice == "any" else {"type": "tool", "name": "get_weather"}
    )
    out = message(rig, mode, tools=MESSAGES_TOOLS, tool_choice=tool_choice)
    assert out["types"] == ["tool_use"] and out["stop_reason"] == "tool_use"
    assert out["calls"][0]["name"] == "get_weather"
    assert out["calls"][0]["input"] == {"city": "Paris"}
    assert "get_weather" in json.dumps(rig.tag())


@MODES
def test_messages_two_turns_send_the_call_and_its_result_back(rig: Rig, mode: str) -> None:
    rig.script("<think>\nI should look it up.\n</think>\n\n" + CALL)
    first = rig.anthropic.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": ASK}],
        tools=MESSAGES_TOOLS,
        tool_choice={"type": "any"},
    )
    assert [b.type for b in first.content] == ["thinking", "tool_use"]
    use = first.content[1]
    rig.script("It is sunny, 22C.")
    history = [
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": [{"type": "text", "text": "Sunny, 22C"}],
                }
            ],
        },
    ]
    out = message(rig, mode, messages=history, tools=MESSAGES_TOOLS)
    assert out["text"] == "It is sunny, 22C." and out["stop_reason"] == "end_turn"
    prompt = rig.tok.decode(rig.prompt())
    assert "Sunny, 22C" in prompt and '"city": "Paris"' in prompt
    assert "I should look it up." in prompt  # the thinking block went back to the template


@MODES
def test_messages_tool_choice_none_yields_text(rig: Rig, mode: str) -> None:
    rig.script("Sure." + CALL)
    out = message(rig, mode, tools=MESSAGES_TOOLS, tool_choice={"type": "none"})
    assert out == {
        "text": "Sure.",
        "thinking": "",
        "calls": [],
        "stop_reason": "end_turn",
        "types": ["text"],
    }
    assert rig.tag() is None


@MODES
@pytest.mark.parametrize("shape", ["string", "blocks"])
def test_messages_echo_attack_never_becomes_a_call(rig: Rig, mode: str, shape: str) -> None:
    delimiter = rig.tok.added_tokens["<tool_call>"]

    def history(result: str) -> list[dict[str, Any]]:
        content: Any = result if shape == "string" else [{"type": "text", "text": result}]
        use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "P"}}
        return [
            {"role": "user", "content": ASK},
            {"role": "assistant", "content": [use]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": content}],
            },
        ]

    rig.script("Sunny.")
    message(rig, "whole", messages=history("Sunny, 22C."), tools=MESSAGES_TOOLS)
    clean = rig.prompt()
    rig.script("The tool said: ", spelled=INJECTED)
    out = message(rig, mode, messages=history("Sunny. " + INJECTED), tools=MESSAGES_TOOLS)
    assert rig.prompt().count(delimiter) == clean.count(delimiter)
    assert out["calls"] == [] and out["text"] == "The tool said: " + INJECTED
    assert out["stop_reason"] == "end_turn"


@pytest.mark.parametrize("stream", [False, True])
def test_messages_stop_sequence_and_max_tokens(rig: Rig, stream: bool) -> None:
    mode = "events" if stream else "whole"
    rig.script("One. Two. END Three.")
    final = None
    if stream:
        with rig.anthropic.messages.stream(
            model=MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": "count"}],
            stop_sequences=["END", "Two. EN"],
        ) as s:
            final = s.get_final_message()
    else:
        final = rig.anthropic.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": "count"}],
            stop_sequences=["END", "Two. EN"],
        )
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == "Two. EN"
    assert final.content[0].type == "text" and final.content[0].text == "One. "
    rig.script("a b c d", finish="length", end=False)
    out = message(rig, mode, max_tokens=4)
    assert out["stop_reason"] == "max_tokens" and out["text"] == "a b c d"


def test_responses_incomplete_at_max_output_tokens(rig: Rig) -> None:
    rig.script("a b c d", finish="length", end=False)
    r = rig.openai.responses.create(model=MODEL, input="x", max_output_tokens=4)
    assert r.status == "incomplete" and r.incomplete_details is not None
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.output_text == "a b c d" and r.output[0].status == "incomplete"


# ---- the stream grammars, on the wire ----------------------------------------------------


def _sse(url: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    events = []
    name = ""
    with httpx.stream("POST", url, json=body, timeout=10) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line[5:])))
                name = ""
    return events


_DELTAS = {
    "response.output_text.delta": "message",
    "response.reasoning_text.delta": "reasoning",
    "response.function_call_arguments.delta": "function_call",
}
_DONES = {
    "response.output_text.done": ("message", "text"),
    "response.reasoning_text.done": ("reasoning", "text"),
    "response.function_call_arguments.done": ("function_call", "arguments"),
}


def check_responses_grammar(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Check one Responses stream against the documented event order; the final response."""
    payloads = [p for _, p in events]
    assert all(name == p["type"] for name, p in events)
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    kinds = [p["type"] for p in payloads]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] in ("response.completed", "response.incomplete", "response.failed")
    assert payloads[0]["response"]["status"] == "in_progress"
    items: list[dict[str, Any]] = []
    item: dict[str, Any] | None = None
    text = ""
    part_open = done = False
    for p in payloads[2:-1]:
        kind = p["type"]
        if kind == "response.output_item.added":
            assert item is None and p["output_index"] == len(items)
            item, text, part_open, done = p["item"], "", False, False
            assert item["status"] == "in_progress"
            continue
        assert item is not None, kind
        if kind != "response.output_item.done":
            assert p["item_id"] == item["id"] and p["output_index"] == len(items)
        if kind == "response.content_part.added":
            assert item["type"] in ("message", "reasoning") and not part_open and not text
            part_open = True
        elif kind in _DELTAS:
            assert _DELTAS[kind] == item["type"] and not done
            assert part_open or item["type"] == "function_call"
            assert p["delta"]
            text += p["delta"]
        elif kind in _DONES:
            kind_of, key = _DONES[kind]
            assert kind_of == item["type"] and p[key] == text and not done
            done = True
        elif kind == "response.content_part.done":
            assert part_open and done and p["part"]["text"] == text
            part_open = False
        elif kind == "response.output_item.done":
            assert done and not part_open and p["output_index"] == len(items)
            final = p["item"]
            assert final["id"] == item["id"] and final["type"] == item["type"]
            if final["type"] == "function_call":
                assert final["arguments"] == text and final["call_id"] == item["call_id"]
            else:
                assert [c["text"] for c in final["content"]] == [text]
            items.append(final)
            item = None
        else:
            raise AssertionError(f"unexpected event {kind}")
    assert item is None, "every added item is done"
    response = payloads[-1]["response"]
    assert response["output"] == items
    return dict(response)


def check_messages_grammar(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Check one Messages stream against the documented event order; the final message."""
    assert all(name == p["type"] for name, p in events)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-1] in ("message_stop", "error")
    message = dict(events[0][1]["message"])
    assert message["content"] == [] and message["stop_reason"] is None
    blocks: list[dict[str, Any]] = []
    block: dict[str, Any] | None = None
    text = ""
    ended = False
    for name, p in events[1:]:
        assert not ended or name in ("message_stop", "ping"), name
        if name == "ping":
            continue
        if name == "content_block_start":
            assert block is None and p["index"] == len(blocks)
            block, text = dict(p["content_block"]), ""
        elif name == "content_block_delta":
            assert block is not None and p["index"] == len(blocks)
            delta = p["delta"]
            key = {"text": "text", "thinking": "thinking", "tool_use": "partial_json"}
            want = {"text": "text_delta", "thinking": "thinking_delta"}
            assert delta["type"] == want.get(block["type"], "input_json_delta")
            text += delta[key[block["type"]]]
        elif name == "content_block_stop":
            assert block is not None and p["index"] == len(blocks)
            if block["type"] == "tool_use":
                block["input"] = json.loads(text or "{}")
            else:
                block[block["type"]] = text
            blocks.append(block)
            block = None
        elif name == "message_delta":
            assert block is None, "every started block is stopped"
            message.update(p["delta"])
            message["usage"] = {**message["usage"], **p["usage"]}
            ended = True
        elif name == "error":
            assert block is None and p["error"]["type"]
            message["error"] = p["error"]
        elif name != "message_stop":
            raise AssertionError(f"unexpected event {name}")
    message["content"] = blocks
    return message


def _ids_removed(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _ids_removed(v)
            for k, v in value.items()
            if k not in ("id", "item_id", "call_id", "created_at")
        }
    if isinstance(value, list):
        return [_ids_removed(v) for v in value]
    return value


RICH = (
    "<think>\nThe user wants weather; two cities.\n</think>\n\nLet me check both."
    + CALL
    + '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
)


@pytest.mark.parametrize("held", [True, False], ids=["held", "streamed-arguments"])
@pytest.mark.parametrize("per_event", [1, 5])
def test_responses_stream_grammar(rig: Rig, held: bool, per_event: int) -> None:
    url = (rig.url if held else rig.streamed_url) + "/v1/responses"
    body = {"model": MODEL, "input": ASK, "tools": RESPONSES_TOOLS}
    rig.script(RICH, per_event=per_event)
    response = check_responses_grammar(_sse(url, {**body, "stream": True}))
    assert [i["type"] for i in response["output"]] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]
    assert response["status"] == "completed"
    rig.script(RICH, per_event=per_event)
    whole = httpx.post(url, json=body, timeout=10).json()
    assert _ids_removed(whole) == _ids_removed(response)
    cities = [json.loads(i["arguments"])["city"] for i in response["output"][2:]]
    assert cities == ["Paris", "Oslo"]
    # cut mid-call: held, the call is text; streamed, it is an incomplete call
    rig.script(RICH[: RICH.index("Oslo") + 2], finish="length", end=False, per_event=per_event)
    cut = check_responses_grammar(_sse(url, {**body, "stream": True}))
    assert cut["status"] == "incomplete"
    assert cut["output"][-1]["type"] == ("message" if held else "function_call")
    assert cut["output"][-1]["status"] == "incomplete"


@pytest.mark.parametrize("held", [True, False], ids=["held", "streamed-arguments"])
@pytest.mark.parametrize("per_event", [1, 5])
def test_messages_stream_grammar(rig: Rig, held: bool, per_event: int) -> None:
    url = (rig.url if held else rig.streamed_url) + "/v1/messages"
    body = {
        "model": MODEL,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": ASK}],
        "tools": MESSAGES_TOOLS,
    }
    rig.script(RICH, per_event=per_event)
    streamed = check_messages_grammar(_sse(url, {**body, "stream": True}))
    assert [b["type"] for b in streamed["content"]] == ["thinking", "text", "tool_use", "tool_use"]
    assert streamed["stop_reason"] == "tool_use"
    rig.script(RICH, per_event=per_event)
    whole = httpx.post(url, json=body, timeout=10).json()
    assert _ids_removed(whole) == _ids_removed(streamed)
    assert [b["input"] for b in whole["content"][2:]] == [{"city": "Paris"}, {"city": "Oslo"}]


def test_failure_mid_stream_closes_what_was_open(rig: Rig) -> None:
    rig.script("a b c d e f g h i j k l m n o p", per_event=2, fail_after=3)
    events = _sse(rig.url + "/v1/responses", {"model": MODEL, "input": "x", "stream": True})
    failed = check_responses_grammar(events)
    assert failed["status"] == "failed" and failed["error"]["code"] == "server_error"
    assert failed["output"][0]["content"][0]["text"].startswith("a b c")
    rig.script("a b c d e f g h i j k l m n o p", per_event=2, fail_after=3)
    body = {"model": MODEL, "max_tokens": 50, "messages": [{"role": "user", "content": "x"}]}
    events = _sse(rig.url + "/v1/messages", {**body, "stream": True})
    ended = check_messages_grammar(events)
    assert events[-1][0] == "error" and ended["error"]["type"] == "api_error"
    assert ended["content"][0]["text"].startswith("a b c")


def test_engine_failure_before_output_is_a_status(rig: Rig) -> None:
    rig.upstream.refuse = 500
    try:
        with pytest.raises(openai.APIStatusError) as caught:
            rig.openai.responses.create(model=MODEL, input="x", stream=True)
        assert caught.value.status_code == 502
        with pytest.raises(anthropic.APIStatusError) as failed:
            rig.anthropic.messages.create(
                model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}], stream=True
            )
        assert failed.value.status_code == 502
        assert failed.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    finally:
        rig.upstream.refuse = None


# ---- store, errors, counting ---------------------------------------------------------------


def test_responses_store_and_retrieve(rig: Rig) -> None:
    rig.script("Stored answer.")
    r = rig.openai.responses.create(model=MODEL, input="x")
    got = rig.openai.responses.retrieve(r.id)
    assert got.output_text == "Stored answer." and got.id == r.id
    rig.script("Not stored.")
    r = rig.openai.responses.create(model=MODEL, input="x", store=False)
    with pytest.raises(openai.NotFoundError):
        rig.openai.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError) as caught:
        rig.openai.responses.create(model=MODEL, input="x", previous_response_id=r.id)
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]


def test_responses_bad_input_names_the_field(rig: Rig) -> None:
    url = rig.url + "/v1/responses"
    ok = {"model": MODEL, "input": "x"}
    cases = [
        ({"model": MODEL}, "input"),
        ({**ok, "input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
        ({**ok, "input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        (
            {**ok, "input": [{"role": "user", "content": [{"type": "input_image"}]}]},
            "input[0].content[0].type",
        ),
        ({**ok, "tools": [{"type": "web_serch"}]}, "tools[0].type"),  # no one hosts it
        ({**ok, "tool_choice": "required"}, "tool_choice"),
        (
            {**ok, "tools": RESPONSES_TOOLS, "tool_choice": {"type": "function", "name": "x"}},
            "tool_choice",
        ),
        ({**ok, "max_output_tokens": 0}, "max_output_tokens"),
        ({**ok, "temperature": 3}, "temperature"),
        ({**ok, "reasoning": {"effort": "extreme"}}, "reasoning.effort"),
        ({**ok, "text": {"format": {"type": "json_schema"}}}, "text.format.schema"),
        (
            {**ok, "tools": RESPONSES_TOOLS, "text": {"format": {"type": "json_object"}}},
            "text.format",
        ),
        ({**ok, "background": True}, "background"),
    ]
    for body, param in cases:
        r = httpx.post(url, json=body)
        assert r.status_code == 400, (body, r.text)
        error = r.json()["error"]
        assert error["param"] == param and error["type"] == "invalid_request_error", error
    r = httpx.post(url, json={**ok, "model": "other"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_messages_bad_input_in_anthropic_shape(rig: Rig) -> None:
    url = rig.url + "/v1/messages"
    ok = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
    cases = [
        ({"model": MODEL, "messages": ok["messages"]}, "max_tokens"),
        ({**ok, "messages": []}, "messages"),
        ({**ok, "messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
        (
            {
                **ok,
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "content": "x"}]}
                ],
            },
            "messages.0.content.0.tool_use_id",
        ),
        (
            {**ok, "messages": [{"role": "user", "content": [{"type": "image"}]}]},
            "messages.0.content.0.type",
        ),
        ({**ok, "tools": [{"name": "f"}]}, "tools.0.input_schema"),
        ({**ok, "tool_choice": {"type": "any"}}, "tool_choice"),
        (
            {**ok, "tools": MESSAGES_TOOLS, "tool_choice": {"type": "tool", "name": "x"}},
            "tool_choice.name",
        ),
        ({**ok, "temperature": 1.5}, "temperature"),
        ({**ok, "top_k": 5}, "top_k"),
        ({**ok, "thinking": {"type": "enabled", "budget_tokens": 100}}, "thinking.budget_tokens"),
        ({**ok, "stop_sequences": "END"}, "stop_sequences"),
    ]
    headers = {"x-api-key": "x", "anthropic-version": "2023-06-01"}
    for body, field in cases:
        r = httpx.post(url, json=body, headers=headers)
        assert r.status_code == 400, (body, r.text)
        payload = r.json()
        assert payload["type"] == "error", payload
        assert payload["error"]["type"] == "invalid_request_error"
        assert payload["error"]["message"].startswith(field + ":"), (field, payload)
    with pytest.raises(anthropic.NotFoundError) as caught:
        rig.anthropic.messages.create(model="claude-x", max_tokens=8, messages=ok["messages"])
    assert caught.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    assert "model" in caught.value.message
    r = httpx.post(url, content=b"{nope", headers=headers)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_messages_count_tokens_is_the_prompt_length(rig: Rig) -> None:
    request: dict[str, Any] = {
        "model": MODEL,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": ASK}],
        "tools": MESSAGES_TOOLS,
    }
    counted = rig.anthropic.messages.count_tokens(**request)
    rig.script("ok")
    rig.anthropic.messages.create(max_tokens=8, **request)
    assert counted.input_tokens == len(rig.prompt())
    assert "Be brief." in rig.tok.decode(rig.prompt())


def test_metrics_count_each_route(rig: Rig) -> None:
    text = httpx.get(rig.url + "/metrics").text
    for route in ("/v1/responses", "/v1/messages", "/v1/messages/count_tokens"):
        assert f'route="{route}",status="200"' in text, route
    assert 'route="/v1/messages",status="400"' in text


def test_reasoning_round_trips_through_a_stateless_client(rig: Rig) -> None:
    rig.script("<think>\nCheck the sky.\n</think>\n\n" + CALL)
    first = rig.openai.responses.create(
        model=MODEL,
        input=ASK,
        tools=RESPONSES_TOOLS,
        store=False,
        include=["reasoning.encrypted_content"],
    )
    reasoning = first.output[0]
    assert reasoning.type == "reasoning" and reasoning.encrypted_content == "Check the sky."
    call = first.output[1]
    # what a stateless client sends back: the reasoning item without its readable content
    sent = {
        "type": "reasoning",
        "id": reasoning.id,
        "summary": [],
        "encrypted_content": "Check the sky.",
    }
    rig.script("Done.")
    rig.openai.responses.create(
        model=MODEL,
        input=[
            {"role": "user", "content": ASK},
            sent,
            call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": "Clear."},
        ],
        tools=RESPONSES_TOOLS,
        store=False,
    )
    assert "Check the sky." in rig.tok.decode(rig.prompt())


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_client_disconnect_stops_the_upstream(rig: Rig, api: str) -> None:
    before = rig.upstream.cancelled
    rig.script(" ".join(["word"] * 200), per_event=1, delay=0.02)
    if api == "responses":
        path, body = "/v1/responses", {"model": MODEL, "input": "x", "stream": True}
    else:
        path = "/v1/messages"
        body = {
            "model": MODEL,
            "max_tokens": 400,
            "messages": [{"role": "user", "content": "x"}],
            "stream": True,
        }
    with httpx.stream("POST", rig.url + path, json=body, timeout=10) as response:
        for line in response.iter_lines():
            if "word" in line:
                break
    for _ in range(100):
        if rig.upstream.cancelled > before:
            break
        httpx.get(rig.url + "/health")  # let the loop run; bounded wait
        time.sleep(0.02)
    assert rig.upstream.cancelled > before


def test_timeout_before_the_first_token_is_a_504_in_each_shape(rig: Rig) -> None:
    app = create_app(scripted_engine(rig.protocol, rig.upstream_url), Limits(timeout=0.2))
    with running(app) as url:
        rig.script("late", stall=1.0)
        r = httpx.post(url + "/v1/responses", json={"model": MODEL, "input": "x", "stream": True})
        assert r.status_code == 504 and r.json()["error"]["code"] == "timeout"
        rig.script("late", stall=1.0)
        body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
        r = httpx.post(url + "/v1/messages", json={**body, "stream": True})
        assert r.status_code == 504 and r.json()["error"]["type"] == "timeout_error"


def test_structured_output_in_each_api(rig: Rig) -> None:
    rig.script('{"city": "Paris"}')
    fmt = {"type": "json_schema", "name": "place", "schema": WEATHER, "strict": True}
    r = rig.openai.responses.create(model=MODEL, input="where?", text={"format": fmt})
    assert json.loads(r.output_text) == {"city": "Paris"}
    assert r.text.format.type == "json_schema"
    assert rig.tag() is not None and "city" in json.dumps(rig.tag())
    rig.script('{"city": "Oslo"}')
    m = rig.anthropic.messages.create(
        model=MODEL,
        max_tokens=32,
        messages=[{"role": "user", "content": "where?"}],
        output_config={"format": {"type": "json_schema", "schema": WEATHER}},
    )
    assert m.content[0].type == "text" and json.loads(m.content[0].text) == {"city": "Oslo"}
    assert rig.tag() is not None and "city" in json.dumps(rig.tag())
