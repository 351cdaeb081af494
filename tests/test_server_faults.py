"""The server under faults, on real loopback HTTP: every stream ends, nothing crashes.

Scripted vLLM and SGLang upstreams (tests/serving.py) misbehave on purpose: malformed
events, ids outside the vocabulary, too many ids, stalls, refusals, cut connections;
clients send oversized, too deep or non-Unicode bodies and go away mid-request. Each
case is run streamed and not, and checks the status, the error's shape, `[DONE]`, the
metrics, and that the next request is served at once. Timeouts are short.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.data import tokenizer_for
from tests.serving import (
    CALL,
    GET_WEATHER,
    MODEL,
    STREAM,
    Script,
    ScriptedRig,
    running,
    scripted,
    scripted_engine,
)
from toolwire.backends.base import Delta, Generation
from toolwire.backends.vllm import VllmEngine
from toolwire.server.app import create_app
from toolwire.server.core.pipeline import Limits

TOOLS = [GET_WEATHER]
LIMITS = Limits(timeout=3, max_body_bytes=256 * 1024, max_tools=8, max_nesting=32)
UPSTREAM_TIMEOUT = 0.5  # the engine's wait for a connection or its next event


def _engine(protocol: str, url: str, timeout: float = UPSTREAM_TIMEOUT) -> Any:
    return scripted_engine(protocol, url, timeout=timeout)


@dataclass
class Reply:
    """One response, read whole: status, JSON body or the SSE `data:` payloads."""

    status: int
    body: Any = None
    data: list[str] = field(default_factory=list)

    @property
    def chunks(self) -> list[dict[str, Any]]:
        return [json.loads(d) for d in self.data if d != "[DONE]"]

    @property
    def content(self) -> str:
        if self.body is not None:
            return str(self.body["choices"][0]["message"]["content"] or "")
        return "".join(
            c["choices"][0]["delta"].get("content") or "" for c in self.chunks if c.get("choices")
        )

    @property
    def calls(self) -> list[dict[str, str]]:
        if self.body is not None:
            calls = self.body["choices"][0]["message"].get("tool_calls") or []
            return [c["function"] for c in calls]
        out: dict[int, dict[str, str]] = {}
        for chunk in self.chunks:
            for choice in chunk.get("choices", []):
                for call in choice["delta"].get("tool_calls") or []:
                    entry = out.setdefault(call["index"], {"name": "", "arguments": ""})
                    entry["name"] += call.get("function", {}).get("name") or ""
                    entry["arguments"] += call.get("function", {}).get("arguments") or ""
        return [out[i] for i in sorted(out)]

    @property
    def finish(self) -> str | None:
        if self.body is not None:
            return str(self.body["choices"][0]["finish_reason"])
        reasons = [
            c["choices"][0]["finish_reason"]
            for c in self.chunks
            if c.get("choices") and c["choices"][0]["finish_reason"]
        ]
        return reasons[-1] if reasons else None

    @property
    def error(self) -> dict[str, Any] | None:
        if self.body is not None:
            return self.body.get("error")  # type: ignore[no-any-return]
        errors = [c["error"] for c in self.chunks if "error" in c]
        return errors[-1] if errors else None


def post(url: str, stream: bool, timeout: float = 10, **body: Any) -> Reply:
    body.setdefault("model", MODEL)
    body.setdefault("messages", [{"role": "user", "content": "hi"}])
    body["stream"] = stream
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=timeout) as response:
        if stream and response.status_code == 200:
            data = [line[5:].strip() for line in response.iter_lines() if line.startswith("data:")]
            return Reply(response.status_code, None, data)
        return Reply(response.status_code, json.loads(response.read() or b"null"))


def metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics").text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


class Rig(ScriptedRig):
    #: The scripted answers here end as the test writes them (no `<|im_end|>` added).
    end = False

    def payload(self, ids: list[int], total: list[int], reason: str | None = None) -> Any:
        """A well-formed event carrying `ids` (`total`: all ids so far, for SGLang)."""
        if self.protocol == "vllm":
            choice = {"index": 0, "text": "", "token_ids": ids, "finish_reason": reason}
            return {"choices": [choice]}
        finish = {"type": reason} if reason else None
        meta = {"completion_tokens": len(total), "finish_reason": finish}
        return {"text": "", "output_ids": total, "meta_info": meta}

    def served_quickly(self) -> None:
        """The next request is not delayed by what came before."""
        self.script("Fine.", finish="stop")
        started = time.monotonic()
        reply = post(self.url, False)
        assert reply.status == 200 and reply.content == "Fine."
        assert time.monotonic() - started < 2.0

    def metric(self, name: str) -> float:
        return metric(self.url, name)


@pytest.fixture(scope="module", params=["vllm", "sglang"])
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    with scripted(request.param, LIMITS, timeout=UPSTREAM_TIMEOUT) as (upstream, up_url, (url,)):
        yield Rig(upstream, up_url, url)


@pytest.fixture(autouse=True)
def _fresh_scripts(request: pytest.FixtureRequest) -> None:
    """A failed test leaves no answer queued for the next one."""
    if "rig" in request.fixturenames:
        request.getfixturevalue("rig").upstream.scripts.clear()


# -- bad upstream data: an engine error, never silence, never a cut stream ---------


def _vocab() -> int:
    """The size of the rig's vocabulary (read when a case runs: the data may be absent)."""
    return tokenizer_for("qwen3").vocab_size


def _vllm_bad(ids: Any) -> Callable[[list[int]], Any]:
    return lambda _seen: {"choices": [{"index": 0, "token_ids": ids, "finish_reason": None}]}


def _sglang_bad(ids: Any, **meta: Any) -> Callable[[list[int]], Any]:
    """An SGLang event adding `ids` (cumulative), with `meta` over a consistent meta_info;
    a meta value `...` removes that key."""

    def make(seen: list[int]) -> Any:
        flat = isinstance(ids, list) and all(type(i) is int for i in ids)
        output = seen + ids if flat else ids
        info = {"completion_tokens": len(output) if flat else 1, "finish_reason": None, **meta}
        info = {k: v for k, v in info.items() if v is not ...}
        return {"text": "", "output_ids": output, "meta_info": info}

    return make


BAD: dict[str, dict[str, Callable[[list[int]], Any]]] = {
    "vllm": {
        "token_ids as a string": _vllm_bad("12345"),
        "token_ids as an integer": _vllm_bad(12345),
        "token_ids nested": _vllm_bad([[1, 2], [3]]),
        "a non-integer id": _vllm_bad([1.5]),
        "a boolean id": _vllm_bad([True]),
        "a negative id": _vllm_bad([-1]),
        "an id outside the vocabulary": lambda seen: _vllm_bad([_vocab()])(seen),
        "choices as an object": lambda _seen: {"choices": {"index": 0, "token_ids": [1]}},
        "an unknown finish reason": lambda _seen: {
            "choices": [{"index": 0, "token_ids": [], "finish_reason": {"x": 1}}]
        },
    },
    "sglang": {
        "meta_info as a string": lambda seen: {"output_ids": [*seen, 1], "meta_info": "done"},
        "output_ids as a string": _sglang_bad("12345"),
        "output_ids nested": _sglang_bad([[1, 2]]),
        "a negative id": _sglang_bad([-1]),
        "an id outside the vocabulary": lambda seen: _sglang_bad([_vocab() + 10])(seen),
        "no completion_tokens": _sglang_bad([1], completion_tokens=...),
        "inconsistent completion_tokens": _sglang_bad([1], completion_tokens=99),
        "finish_reason as a string": _sglang_bad([1], finish_reason="stop"),
    },
}


def test_bad_upstream_data_is_an_engine_error(rig: Rig) -> None:
    hello = rig.tok.encode("Hello")
    for case, bad in BAD[rig.protocol].items():
        # mid-stream: what came first is kept, then one error event and [DONE]
        errors = rig.metric("toolwire_stream_errors_total")
        tokens = rig.metric("toolwire_completion_tokens_total")
        rig.upstream.scripts.append(Script([], payloads=[rig.payload(hello, hello), bad(hello)]))
        reply = post(rig.url, True)
        assert reply.status == 200, case
        assert reply.data[-1] == "[DONE]", case
        assert reply.content == "Hello", case
        assert reply.error is not None and reply.error["type"] == "engine_error", case
        assert reply.finish is None, case
        assert rig.metric("toolwire_stream_errors_total") == errors + 1, case
        assert rig.metric("toolwire_completion_tokens_total") == tokens + len(hello), case
        # the same, not streamed: an error status in the API's shape
        rig.upstream.scripts.append(Script([], payloads=[rig.payload(hello, hello), bad(hello)]))
        reply = post(rig.url, False)
        assert reply.status == 502, case
        assert reply.error is not None and reply.error["type"] == "engine_error", case
        # bad from the first event: nothing was streamed yet, so a plain 502 either way
        for stream in (False, True):
            rig.upstream.scripts.append(Script([], payloads=[bad([])]))
            reply = post(rig.url, stream)
            assert reply.status == 502 and reply.error is not None, (case, stream)
            assert reply.error["type"] == "engine_error", (case, stream)
    rig.served_quickly()


@STREAM
def test_max_tokens_is_enforced_on_what_is_returned(rig: Rig, stream: bool) -> None:
    text = " ".join(f"w{i}" for i in range(60))
    ids = rig.script(text, per_event=7, delay=0.01)
    tokens = rig.metric("toolwire_completion_tokens_total")
    reply = post(rig.url, stream, max_tokens=10)
    assert reply.status == 200
    assert reply.content == rig.tok.decode(ids[:10])
    assert reply.finish == "length"
    assert rig.metric("toolwire_completion_tokens_total") == tokens + 10
    if not stream:
        assert reply.body["usage"]["completion_tokens"] == 10
    rig.served_quickly()


@pytest.mark.parametrize("rig", ["sglang"], indirect=True)  # SGLang's output modes
def test_sglang_incremental_output_is_read_once(rig: Rig) -> None:
    first, second = rig.tok.encode("Hello"), rig.tok.encode(" world")
    total = first + second
    incremental = [
        {"output_ids": first, "meta_info": {"completion_tokens": len(first)}},
        {
            "output_ids": second,
            "meta_info": {"completion_tokens": len(total), "finish_reason": {"type": "stop"}},
        },
    ]
    for stream in (False, True):
        rig.upstream.scripts.append(Script([], payloads=incremental))
        reply = post(rig.url, stream)
        assert reply.status == 200 and reply.content == "Hello world"


# -- failures before and after the first token ------------------------------------


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@STREAM
def test_no_answer_before_the_first_token_is_a_status(rig: Rig, stream: bool) -> None:
    # refused connection
    with running(create_app(_engine(rig.protocol, _closed_port()), LIMITS)) as url:
        reply = post(url, stream)
        assert reply.status == 502 and reply.error is not None
        assert reply.error["type"] == "engine_error" and not reply.data
    # upstream error status
    rig.upstream.refuse = 500
    try:
        reply = post(rig.url, stream)
        assert reply.status == 502 and reply.error is not None and not reply.data
    finally:
        rig.upstream.refuse = None
    # a stall: the engine's own timeout...
    rig.script("late", stall=UPSTREAM_TIMEOUT * 10)
    started = time.monotonic()
    reply = post(rig.url, stream)
    assert reply.status == 504 and reply.error is not None and not reply.data
    assert time.monotonic() - started < UPSTREAM_TIMEOUT * 8
    rig.served_quickly()
    # ...or the request's
    engine = _engine(rig.protocol, rig.upstream_url, timeout=10)
    with running(create_app(engine, Limits(timeout=0.3))) as url:
        rig.script("late", stall=1.0)
        reply = post(url, stream)
        assert reply.status == 504 and reply.error is not None
        assert reply.error["code"] == "timeout" and not reply.data


class BuggyEngine(VllmEngine):
    """A vLLM engine whose stream breaks with an exception no one anticipated."""

    async def stream(self, generation: Generation) -> Any:
        async with contextlib.aclosing(super().stream(generation)) as deltas:
            async for delta in deltas:
                yield Delta(delta.ids)
                raise RuntimeError("a bug in the engine adapter")


@pytest.mark.parametrize("rig", ["vllm"], indirect=True)  # one engine is enough
def test_any_exception_after_the_start_ends_the_stream(rig: Rig) -> None:
    engine = BuggyEngine(rig.upstream_url, model=MODEL, tokenizer=rig.tok, format="qwen3")
    with running(create_app(engine, LIMITS)) as url:
        held = "Hello " + CALL[: CALL.index("Paris")]  # a call the parser still holds
        ids = rig.script(held, per_event=200)
        reply = post(url, True, tools=TOOLS)
        assert reply.status == 200 and reply.data[-1] == "[DONE]"
        assert reply.error is not None and reply.error["type"] == "server_error"
        # the stream broke while the parser held the call: released, as content
        assert reply.content == held and reply.calls == []
        assert metric(url, "toolwire_stream_errors_total") == 1
        assert metric(url, "toolwire_completion_tokens_total") == len(ids)
        rig.script(held)
        reply = post(url, False)
        assert reply.status == 500 and reply.error is not None
        assert reply.error["type"] == "server_error"


# -- clients that go away ---------------------------------------------------------


def _wait_for(condition: Callable[[], bool], seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@STREAM
def test_a_client_going_away_stops_the_upstream(rig: Rig, stream: bool) -> None:
    cancelled = rig.upstream.cancelled
    abandoned = rig.metric("toolwire_abandoned_requests_total")
    tokens = rig.metric("toolwire_completion_tokens_total")
    rig.script(" ".join(["word"] * 300), per_event=1, delay=0.01)
    seen = 0
    if stream:
        with httpx.stream(
            "POST",
            rig.url + "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True},
            timeout=10,
        ) as response:
            for line in response.iter_lines():
                seen += '"content":"word' in line or '"content":" word' in line
                if seen > 5:
                    break
    else:
        with pytest.raises(httpx.ReadTimeout):
            post(rig.url, False, timeout=0.3)
    assert _wait_for(lambda: rig.upstream.cancelled > cancelled)
    assert _wait_for(lambda: rig.metric("toolwire_abandoned_requests_total") == abandoned + 1)
    counted = rig.metric("toolwire_completion_tokens_total") - tokens
    assert counted >= seen and counted < 300  # what was produced, not the full budget
    rig.served_quickly()


# -- what a request may carry -----------------------------------------------------


@STREAM
def test_request_bounds(rig: Rig, stream: bool) -> None:
    url = rig.url + "/v1/chat/completions"
    big = {
        "model": MODEL,
        "stream": stream,
        "messages": [{"role": "user", "content": "x" * 300_000}],
    }
    r = httpx.post(url, json=big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    chunked = httpx.post(url, content=iter([json.dumps(big).encode()]))  # no Content-Length
    assert chunked.status_code == 413
    tools = [
        {"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object"}}}
        for i in range(9)
    ]
    deep: Any = {"type": "string"}
    for _ in range(30):
        deep = {"type": "object", "properties": {"x": deep}}
    deep_tool = {"type": "function", "function": {"name": "f", "parameters": deep}}
    lists: Any = 1
    for _ in range(40):
        lists = [lists]
    cases: list[tuple[Any, str]] = [
        ({"tools": tools}, "tools"),
        ({"tools": [deep_tool]}, "tools[0].function.parameters"),
        ({"chat_template_kwargs": {"a": lists}}, "chat_template_kwargs.a"),
    ]
    for extra, param in cases:
        body = {"model": MODEL, "stream": stream, "messages": [{"role": "user", "content": "x"}]}
        r = httpx.post(url, json={**body, **extra})
        assert r.status_code == 400, (param, r.text)
        error = r.json()["error"]
        assert error["type"] == "invalid_request_error" and error["param"].startswith(param)
    nested = b'{"model": "m", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    r = httpx.post(url, content=nested)
    assert r.status_code == 400 and r.json()["error"]["param"] == "body"
    surrogate = b'{"model": "%s", "messages": [{"role": "user", "content": "a\\ud800b"}]}' % (
        MODEL.encode()
    )
    r = httpx.post(url, content=surrogate)
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages[0].content"
    rig.served_quickly()


@STREAM
def test_requests_the_library_refuses_are_400s_never_500s(rig: Rig, stream: bool) -> None:
    """What render_prompt and structural_tag refuse (or normalize) reaches the client as
    a 400 naming the field, or is served: never an internal error."""
    url = rig.url + "/v1/chat/completions"
    nonchars = "".join(chr(c) for c in range(0xFDD0, 0xFDF0)) + "".join(
        chr(p * 0x10000 + 0xFFFE + k) for p in range(17) for k in (0, 1)
    )
    odd_tool = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": [{"type": "string"}], "enum": 5}},
    }
    bodies: list[dict[str, Any]] = [
        {"messages": [{"role": "user", "content": nonchars}]},  # every noncharacter
        {"messages": [{"role": "user", "content": "x"}], "tools": [odd_tool]},
        {
            "messages": [{"role": "user", "content": "x"}],
            "chat_template_kwargs": {"enable_thinking": 10**400},
        },
    ]
    for extra in bodies:
        rig.script("fine", finish="stop")
        body = {"model": MODEL, "stream": stream, **extra}
        r = httpx.post(url, json=body, timeout=10)
        assert r.status_code in (200, 400), (extra, r.status_code, r.text)
        if r.status_code == 400:
            assert r.json()["error"]["type"] == "invalid_request_error"
        rig.upstream.scripts.clear()
    rig.served_quickly()


@pytest.mark.parametrize("rig", ["vllm"], indirect=True)  # one engine is enough
def test_rendering_does_not_block_other_streams(rig: Rig) -> None:
    engine = _engine("vllm", rig.upstream_url)
    with running(create_app(engine, Limits(timeout=10))) as url:
        rig.script(" ".join(["tick"] * 100), per_event=1, delay=0.02)
        arrivals: list[float] = []

        def watch() -> None:
            with httpx.stream(
                "POST",
                url + "/v1/chat/completions",
                json={
                    "model": MODEL,
                    "messages": [{"role": "user", "content": "x"}],
                    "stream": True,
                },
                timeout=20,
            ) as response:
                for line in response.iter_lines():
                    # events that arrived together come as one chunk: each tick counts
                    arrivals.extend([time.monotonic()] * line.count("tick"))

        thread = threading.Thread(target=watch)
        thread.start()
        assert _wait_for(lambda: len(arrivals) > 3)
        rig.script("ok")
        # about a second of rendering (tokenizing 1.25 MB)
        heavy = post(url, False, messages=[{"role": "user", "content": "word " * 250_000}])
        thread.join(timeout=20)
        assert heavy.status == 200
        gaps = [b - a for a, b in itertools.pairwise(arrivals)]
        assert len(arrivals) == 100 and max(gaps) < 0.5, max(gaps)


# -- declared tools, finish reasons, stop strings -----------------------------------


@STREAM
@pytest.mark.parametrize("tools", [None, []], ids=["absent", "empty"])
def test_no_tools_declared_no_call_returned(rig: Rig, stream: bool, tools: Any) -> None:
    rig.script(f"Sure. {CALL}")
    extra = {} if tools is None else {"tools": tools}
    reply = post(rig.url, stream, **extra)
    assert reply.status == 200
    assert reply.calls == [] and reply.content == f"Sure. {CALL}"
    assert reply.finish == "stop"


@STREAM
def test_finish_reasons_and_stop_strings(rig: Rig, stream: bool) -> None:
    # a call returned: tool_calls
    rig.script(CALL)
    reply = post(rig.url, stream, tools=TOOLS, stop=["Paris"])
    assert [c["name"] for c in reply.calls] == ["get_weather"] and reply.finish == "tool_calls"
    # a call to an undeclared tool is content: stop
    rig.script(CALL.replace("get_weather", "rm_rf"))
    reply = post(rig.url, stream, tools=TOOLS)
    assert reply.calls == [] and reply.finish == "stop"
    # out of tokens inside a call: length, even though a stop string is in the released text
    cut = CALL[: CALL.index("Paris")]
    rig.script(cut, finish="length")
    reply = post(rig.url, stream, tools=TOOLS, stop=["city"])
    assert reply.calls == [] and reply.finish == "length"
    assert reply.content == cut[: cut.index("city")]
    # a forced call is never cut by a stop string, complete or not
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        rig.script(CALL)
        reply = post(rig.url, stream, tools=TOOLS, tool_choice=choice, stop=["get_", "Paris"])
        assert [c["arguments"] for c in reply.calls] == ['{"city": "Paris"}']
        assert reply.finish == "tool_calls"
        rig.script(cut, finish="length")
        reply = post(rig.url, stream, tools=TOOLS, tool_choice=choice, stop=["city"])
        assert reply.calls == [] and reply.content == cut and reply.finish == "length"


# -- response_format ----------------------------------------------------------------


def _tag(rig: Rig) -> Any:
    body = rig.upstream.bodies[-1]
    if rig.protocol == "vllm":
        tag = (body.get("structured_outputs") or {}).get("structural_tag")
    else:
        tag = body["sampling_params"].get("structural_tag")
    return None if tag is None else json.loads(tag)


@STREAM
def test_response_format_constrains_the_answer(rig: Rig, stream: bool) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    formats = [
        ({"type": "json_object"}, {"type": "object"}),
        ({"type": "json_schema", "json_schema": {"name": "place", "schema": schema}}, schema),
    ]
    for response_format, expected in formats:
        rig.script('{"city": "Paris"}')
        reply = post(rig.url, stream, response_format=response_format)
        assert reply.status == 200 and json.loads(reply.content) == {"city": "Paris"}
        assert reply.finish == "stop"
        tag = _tag(rig)
        assert tag is not None and tag["type"] == "structural_tag"
        values = [e for e in tag["format"]["elements"] if e.get("type") == "json_schema"]
        assert [v["json_schema"] for v in values] == [expected]
    rig.script("plain")
    reply = post(rig.url, stream, response_format={"type": "text"})
    assert reply.status == 200 and reply.content == "plain" and _tag(rig) is None
    bad: list[tuple[Any, str]] = [
        ({"type": "yaml"}, "response_format"),
        (
            {"type": "json_schema", "json_schema": {"name": "x"}},
            "response_format.json_schema.schema",
        ),
        ("json", "response_format"),
    ]
    for response_format, param in bad:
        reply = post(rig.url, stream, response_format=response_format)
        assert reply.status == 400 and reply.error is not None
        assert reply.error["param"] == param
    reply = post(rig.url, stream, response_format={"type": "json_object"}, tools=TOOLS)
    assert reply.status == 400 and reply.error is not None
    assert reply.error["param"] == "response_format"
    rig.script('{"a": 1}')
    reply = post(
        rig.url, stream, response_format={"type": "json_object"}, tools=TOOLS, tool_choice="none"
    )
    assert reply.status == 200 and reply.content == '{"a": 1}'
