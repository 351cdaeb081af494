"""Forced calls end at the call, a cut call is never prose, and custom (freeform) tools,
in every API, streamed and whole; `allowed_tools` (every tool in the prompt, calls to the
listed ones).

A scripted vLLM or SGLang upstream (tests/serving.py, Qwen3's vocabulary, gated) answers
with more than the request allows: a call and then a second call and text, or a call cut
by the token limit. The server must stop the upstream at the end of the one call a turn
may make (`tool_choice` required/named with parallel calls off), count only the tokens up
to there, and report a cut call in the API's own shape (Chat `invalid_tool_calls` with
`finish_reason: length`, a Responses item `incomplete`, Messages `stop_reason:
max_tokens`), never as text. Each API is read on the raw wire (httpx), so the test sees
exactly what a client gets.

Custom tools: declared the Responses and Chat ways, their calls come back as
`custom_tool_call` items / `type: "custom"` calls with the raw `input`; a tool's Lark or
regex grammar is compiled into the structural tag so the JSON-escaped input is kept to it
(checked with XGrammar's own matcher against a Lark parser as the oracle).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.serving import (
    CALL,
    GET_TIME,
    GET_WEATHER,
    MODEL,
    STREAM,
    ScriptedRig,
    messages_tools,
    responses_tools,
    scripted,
)
from toolwire.server.core.pipeline import Limits

APIS = pytest.mark.parametrize("api", ["chat", "responses", "messages"])
CUT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'
AFTER = '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'
AFTER += "\nAnd now some prose the turn must not show."


class Rig(ScriptedRig):
    #: The answers end as the test writes them.
    end = False


@pytest.fixture(scope="module", params=["vllm", "sglang"])
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    with scripted(request.param, Limits(timeout=120)) as (upstream, up_url, (url,)):
        yield Rig(upstream, up_url, url)


@pytest.fixture(autouse=True)
def _fresh_scripts(rig: Rig) -> None:
    rig.upstream.scripts.clear()


# -- one turn on each API's wire, summarized ----------------------------------------


def _sse(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line.startswith("data:") and line[5:].strip() != "[DONE]":
            yield json.loads(line[5:])


def _post(url: str, path: str, body: dict[str, Any]) -> Any:
    headers = {"anthropic-version": "2023-06-01", "x-api-key": "x"}
    if not body.get("stream"):
        response = httpx.post(url + path, json=body, headers=headers, timeout=20)
        assert response.status_code == 200, response.text
        return response.json()
    with httpx.stream("POST", url + path, json=body, headers=headers, timeout=20) as response:
        assert response.status_code == 200, response.read()
        return list(_sse(response))


def _chat(url: str, stream: bool, request: dict[str, Any]) -> dict[str, Any]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Weather?"}], **request}
    body.update(tools=request.get("tools", [GET_WEATHER]), stream=stream)
    if stream:
        body["stream_options"] = {"include_usage": True}
    data = _post(url, "/v1/chat/completions", body)
    if not stream:
        choice = data["choices"][0]
        calls = choice["message"].get("tool_calls") or []
        text = choice["message"].get("content") or ""
        invalid = choice.get("invalid_tool_calls", [])
        usage, finish = data["usage"], choice["finish_reason"]
    else:
        merged: dict[int, dict[str, Any]] = {}
        text, finish, invalid, usage = "", None, [], None
        for chunk in data:
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices", []):
                text += choice["delta"].get("content") or ""
                finish = choice.get("finish_reason") or finish
                invalid = choice.get("invalid_tool_calls", invalid)
                for call in choice["delta"].get("tool_calls") or []:
                    entry = merged.setdefault(call["index"], {"type": call.get("type")})
                    for key in ("function", "custom"):
                        for field, value in (call.get(key) or {}).items():
                            part = entry.setdefault(key, {})
                            part[field] = part.get(field, "") + value
        calls = [merged[i] for i in sorted(merged)]
    out = []
    for n, call in enumerate(calls):
        if call.get("type") == "custom":
            out.append((call["custom"]["name"], call["custom"]["input"], n not in invalid))
        else:
            fn = call["function"]
            out.append((fn["name"], fn["arguments"], n not in invalid))
    assert usage is not None
    return {"calls": out, "text": text, "finish": finish, "tokens": usage["completion_tokens"]}


def _responses(url: str, stream: bool, request: dict[str, Any]) -> dict[str, Any]:
    tools = request.pop("tools", responses_tools([GET_WEATHER]))
    body = {"model": MODEL, "input": "Weather?", "tools": tools, "stream": stream, **request}
    if "max_tokens" in body:
        body["max_output_tokens"] = body.pop("max_tokens")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and "function" in choice:
        body["tool_choice"] = {"type": "function", "name": choice["function"]["name"]}
    data = _post(url, "/v1/responses", body)
    if stream:
        ends = ("response.completed", "response.incomplete")
        data = next(e["response"] for e in data if e["type"] in ends)
    calls, text = [], ""
    for item in data["output"]:
        if item["type"] == "function_call":
            calls.append((item["name"], item["arguments"], item["status"] == "completed"))
        elif item["type"] == "custom_tool_call":
            calls.append((item["name"], item["input"], item["status"] == "completed"))
        elif item["type"] == "message":
            text += "".join(part["text"] for part in item["content"])
    finish = data["status"]
    return {
        "calls": calls,
        "text": text,
        "finish": finish,
        "tokens": data["usage"]["output_tokens"],
    }


def _messages(url: str, stream: bool, request: dict[str, Any]) -> dict[str, Any]:
    choice = request.pop("tool_choice")
    parallel = request.pop("parallel_tool_calls", True)
    if choice == "required":
        choice = {"type": "any"}
    elif isinstance(choice, dict):
        choice = {"type": "tool", "name": choice["function"]["name"]}
    choice["disable_parallel_tool_use"] = not parallel
    body = {
        "model": MODEL,
        "max_tokens": request.pop("max_tokens", 256),
        "messages": [{"role": "user", "content": "Weather?"}],
        "tools": messages_tools([GET_WEATHER]),
        "tool_choice": choice,
        "stream": stream,
        **request,
    }
    data = _post(url, "/v1/messages", body)
    if stream:
        blocks: list[dict[str, Any]] = []
        stop, tokens = None, None
        for event in data:
            if event["type"] == "content_block_start":
                blocks.append({**event["content_block"], "partial": ""})
            elif event["type"] == "content_block_delta":
                delta = event["delta"]
                blocks[-1]["partial"] += delta.get("partial_json", "") + delta.get("text", "")
            elif event["type"] == "message_delta":
                stop, tokens = event["delta"]["stop_reason"], event["usage"]["output_tokens"]
        for block in blocks:
            if block["type"] == "tool_use":
                try:
                    block["input"] = json.loads(block["partial"] or "{}")
                except ValueError:  # a cut call: its arguments as far as they came
                    block["input"] = {}
            elif block["type"] == "text":
                block["text"] = block["partial"]
        data = {"content": blocks, "stop_reason": stop, "usage": {"output_tokens": tokens}}
    calls = [
        (b["name"], json.dumps(b["input"]), True)
        for b in data["content"]
        if b["type"] == "tool_use"
    ]
    text = "".join(b["text"] for b in data["content"] if b["type"] == "text")
    finish = data["stop_reason"]
    return {
        "calls": calls,
        "text": text,
        "finish": finish,
        "tokens": data["usage"]["output_tokens"],
    }


TURN = {"chat": _chat, "responses": _responses, "messages": _messages}
#: A completed call's finish, and a cut output's, per API.
DONE = {"chat": "tool_calls", "responses": "completed", "messages": "tool_use"}
CUT_OFF = {"chat": "length", "responses": "incomplete", "messages": "max_tokens"}


def turn(rig: Rig, api: str, stream: bool, **request: Any) -> dict[str, Any]:
    return TURN[api](rig.url, stream, request)


# -- forced calls end at the call -----------------------------------------------------


@STREAM
@APIS
@pytest.mark.parametrize("choice", ["required", "named"])
def test_one_forced_call_ends_the_turn_at_the_call(
    rig: Rig, api: str, stream: bool, choice: str
) -> None:
    """Parallel calls off (or a named tool): one call, a completed call's finish, and
    the upstream stopped there: what the model wrote after the call is neither returned
    nor waited for, and only the call's tokens are counted."""
    named = {"type": "function", "function": {"name": "get_weather"}}
    ids = list(rig.script(CALL, per_event=1, delay=0.02))
    rest = rig.script(AFTER, per_event=1, delay=0.02)
    rig.upstream.scripts.pop()
    rig.upstream.scripts[-1].ids += rest
    cancelled = rig.upstream.cancelled
    parallel = choice == "named"  # a named tool is one call even with parallel calls on
    reply = turn(
        rig,
        api,
        stream,
        tool_choice=named if choice == "named" else "required",
        parallel_tool_calls=parallel,
    )
    assert [(name, json.loads(args)) for name, args, _ in reply["calls"]] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert reply["text"] == "" and reply["finish"] == DONE[api]
    assert reply["tokens"] == len(ids)
    deadline = time.monotonic() + 5  # the upstream sees the cancellation a little later
    while rig.upstream.cancelled == cancelled and time.monotonic() < deadline:
        time.sleep(0.02)
    assert rig.upstream.cancelled == cancelled + 1  # stopped, not run to its end


@STREAM
@APIS
@pytest.mark.parametrize("per_event", [3, 1000])
def test_a_batch_past_the_call_counts_only_the_call(
    rig: Rig, api: str, stream: bool, per_event: int
) -> None:
    """Ids that arrive together (one event holding several, or several events read as
    one batch) and run past the one call's end: the call ends at the same id as when
    they come one by one, and only the ids up to there are counted."""
    ids = list(rig.script(CALL))
    rest = rig.script(AFTER)
    rig.upstream.scripts.pop()
    rig.upstream.scripts[-1].ids += rest
    rig.upstream.scripts[-1].per_event = per_event
    reply = turn(rig, api, stream, tool_choice="required", parallel_tool_calls=False)
    assert [(name, json.loads(args)) for name, args, _ in reply["calls"]] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert reply["text"] == "" and reply["finish"] == DONE[api]
    assert reply["tokens"] == len(ids)


@STREAM
@APIS
def test_parallel_forced_calls_may_be_several(rig: Rig, api: str, stream: bool) -> None:
    """Parallel calls on: every complete call is returned and the turn ends when the
    model ends it (the grammar lets it end after each call); the prose after is dropped."""
    rig.script(CALL + AFTER, end=True)
    reply = turn(rig, api, stream, tool_choice="required")
    assert [json.loads(args)["city"] for _, args, _ in reply["calls"]] == ["Paris", "Rome"]
    assert reply["text"] == "" and reply["finish"] == DONE[api]


# -- a cut call is never prose --------------------------------------------------------


@STREAM
@APIS
@pytest.mark.parametrize("parallel", [False, True], ids=["one", "parallel"])
def test_a_forced_call_cut_by_the_limit_is_a_cut_call(
    rig: Rig, api: str, stream: bool, parallel: bool
) -> None:
    """The token limit cuts the (second) call: it is reported as a cut call in the API's
    own shape, and no markup reaches the text."""
    text = (CALL + "\n" + CUT) if parallel else CUT
    ids = rig.script(text, finish="length")
    reply = turn(
        rig,
        api,
        stream,
        tool_choice="required",
        parallel_tool_calls=parallel,
        max_tokens=len(ids),
    )
    assert reply["text"] == "" and reply["finish"] == CUT_OFF[api]
    assert "<tool_call>" not in json.dumps(reply)
    if api == "messages":  # the tool_use block, its input what could be read; max_tokens
        assert [name for name, _, _ in reply["calls"]] == ["get_weather"] * (1 + parallel)
        return
    *whole, last = reply["calls"]
    assert [valid for _, _, valid in whole] == ([True] if parallel else [])
    assert last[0] == "get_weather" and last[2] is False
    assert last[1] == '{"city": "Pa'  # the arguments as far as they were written


# -- custom (freeform) tools ----------------------------------------------------------

PATCH_GRAMMAR = r"""
start: begin hunk+ end
begin: "*** Begin Patch" LF
end: "*** End Patch" LF?
hunk: "*** Update File: " PATH LF line+
line: /[ +-][^\r\n]*/ LF
PATH: /[^\r\n]+/
LF: "\n"
"""
PATCH = "*** Begin Patch\n*** Update File: a \"b\".py\n-old\n+new \\ 'é'\n*** End Patch\n"
CUSTOM_RESPONSES = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch",
    "format": {"type": "grammar", "syntax": "lark", "definition": PATCH_GRAMMAR},
}
CUSTOM_CHAT = {
    "type": "custom",
    "custom": {
        "name": "apply_patch",
        "description": "Apply a patch",
        "format": {"type": "grammar", "grammar": {"syntax": "lark", "definition": PATCH_GRAMMAR}},
    },
}


def _custom_call(text: str) -> str:
    arguments = json.dumps({"input": text}, ensure_ascii=False)
    return '<tool_call>\n{"name": "apply_patch", "arguments": ' + arguments + "}\n</tool_call>"


@STREAM
@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("choice", ["required", "named", "auto"])
def test_a_custom_tool_call_returns_its_raw_input(
    rig: Rig, api: str, stream: bool, choice: str
) -> None:
    tool = CUSTOM_CHAT if api == "chat" else CUSTOM_RESPONSES
    named: Any = {"type": "custom", "custom": {"name": "apply_patch"}}
    if api == "responses":
        named = {"type": "custom", "name": "apply_patch"}
    rig.script(_custom_call(PATCH), end=True)
    reply = turn(
        rig,
        api,
        stream,
        tools=[tool],
        tool_choice=named if choice == "named" else choice,
        parallel_tool_calls=False,
    )
    assert reply["calls"] == [("apply_patch", PATCH, True)]
    assert reply["text"] == ""
    if choice != "auto":  # the grammar the tag carries keeps the input to the tool's
        assert "Begin Patch" in json.dumps(rig.tag())


def test_a_custom_tool_call_item_round_trips_as_history(rig: Rig) -> None:
    rig.script("Done.", end=True)
    items = [
        {"type": "message", "role": "user", "content": "Patch it"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
    ]
    body = {"model": MODEL, "input": items, "tools": [CUSTOM_RESPONSES]}
    reply = _post(rig.url, "/v1/responses", body)
    assert reply["output"][-1]["content"][0]["text"] == "Done."
    prompt = rig.tok.decode(rig.prompt())
    assert json.dumps({"input": PATCH}, ensure_ascii=False)[1:-1] in prompt


def test_custom_tool_errors_name_the_field(rig: Rig) -> None:
    bad = {**CUSTOM_RESPONSES, "format": {"type": "grammar", "syntax": "lark", "definition": "("}}
    body = {"model": MODEL, "input": "x", "tools": [bad]}
    response = httpx.post(rig.url + "/v1/responses", json=body, timeout=20)
    assert response.status_code == 400 and "definition" in response.text
    body = {
        "model": MODEL,
        "input": "x",
        "tools": [CUSTOM_RESPONSES],
        "tool_choice": {"type": "custom", "name": "nope"},
    }
    response = httpx.post(rig.url + "/v1/responses", json=body, timeout=20)
    assert response.status_code == 400 and "tool_choice" in response.text
    tool = {"name": "p", "input_schema": {"type": "object"}, "format": {"type": "text"}}
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
    response = httpx.post(rig.url + "/v1/messages", json={**body, "tools": [tool]}, timeout=20)
    assert response.status_code == 400 and "tools.0.format" in response.text


# -- allowed_tools: every tool in the prompt, calls to the listed ones ---------------


def _allowed(api: str, mode: str, names: list[str]) -> dict[str, Any]:
    if api == "chat":
        refs = [{"type": "function", "function": {"name": n}} for n in names]
        return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": refs}}
    refs = [{"type": "function", "name": n} for n in names]
    return {"type": "allowed_tools", "mode": mode, "tools": refs}


TIME_CALL = '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "UTC"}}\n</tool_call>'


@STREAM
@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("mode", ["required", "auto"])
def test_allowed_tools_keep_every_tool_in_the_prompt_and_calls_to_the_listed(
    rig: Rig, api: str, stream: bool, mode: str
) -> None:
    """Two tools declared, `allowed_tools` lists one: the prompt declares both (as
    OpenAI's: the prompt does not change with the choice), the structural tag sent
    upstream lets a call name the listed tool only, and its call comes back."""
    tools = [GET_WEATHER, GET_TIME]
    rig.script(TIME_CALL, end=True)
    reply = turn(
        rig,
        api,
        stream,
        tools=tools if api == "chat" else responses_tools(tools),
        tool_choice=_allowed(api, mode, ["get_time"]),
        parallel_tool_calls=False,
    )
    assert [(name, json.loads(args)) for name, args, _ in reply["calls"]] == [
        ("get_time", {"timezone": "UTC"})
    ]
    assert reply["text"] == "" and reply["finish"] == DONE[api]
    prompt = rig.tok.decode(rig.prompt())
    assert '"name": "get_weather"' in prompt and '"name": "get_time"' in prompt
    tag = json.dumps(rig.tag())
    assert "get_time" in tag and "get_weather" not in tag


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_call_to_a_tool_allowed_tools_leaves_out_is_no_call(rig: Rig, api: str) -> None:
    """An upstream that ignores the grammar and calls the declared tool the list leaves
    out: that call is not returned as a call."""
    tools = [GET_WEATHER, GET_TIME]
    rig.script(CALL, end=True)
    reply = turn(
        rig,
        api,
        False,
        tools=tools if api == "chat" else responses_tools(tools),
        tool_choice=_allowed(api, "auto", ["get_time"]),
    )
    assert [name for name, _, _ in reply["calls"]] == []
