"""Guidance's cost at the first token: p50 TTFT through `toolwire serve --engine vllm`
with structural tags on (the default) and off (`--guidance off`), on vLLM's CPU server.

    python -m bench.guidance_ttft [--blocks 4] [--batches 2] [--streams 8] [--tools 4]
                                  [--tokens 16] [--vllm-python PATH] [--model-dir DIR]
                                  [--grammar-backend xgrammar|guidance]
                                  [--vllm-url URL --vllm-pid PID] [--json FILE]

One vLLM (bench.proxy's `vllm_server`: the tiny random-weight Qwen3 of
`tests/tiny_qwen3.py` on the `--vllm-python` venv's vLLM CPU build), and in front of it
two `toolwire serve --engine vllm`, one per setting, both idle but for the block being
measured. Every request is the same chat request: one user message, the first
`--tools` distinct BFCL tools (`corpora/bfcl`, the `multiple` category first),
`tool_choice` auto, `--tokens` max tokens, streamed, no seed (vLLM's CPU build fails on
seeded requests). With guidance on, toolwire sends each one with its constraint in
the form of the backend vLLM runs (`--grammar-backend`: vLLM's default, XGrammar, takes
the structural tag and compiles it once, its compiler cache keying on the tag; with
`guidance`, vLLM is started with `--structured-outputs-config.backend guidance` and
toolwire with `--grammar-backend llguidance`, and the constraint is a Lark grammar);
off, with none.

Blocks alternate on, off, on, off, ... (`--blocks` of each); a block is `--batches`
batches of `--streams` concurrent requests, and a request's TTFT runs from sending it to
the first event carrying text, reasoning or a call. After a warm-up on each server (the
template, the tag, vLLM's compile) and once both toolwire processes are idle, the
blocks run. Reported: each block's p50, the median of the blocks' p50 per setting, the
p50 over all of a setting's requests, the ratio on/off of both, and a 95% bootstrap
interval of the block-p50 ratio (`ratio_interval`: equal within noise when it holds 1).
A stream that ends in an error event (the random model sometimes samples a padding id
past Qwen3's vocabulary, which toolwire refuses as an engine error; only with guidance
off, since the tag's mask excludes those ids) still counts if its first output came
before; the counts are printed, and so is how many tags each server built (its metrics), to show the
setting took. The machine may be shared: alternating blocks and medians are the result.

Each request's first output is also classified (`output_kind`): a call, or text. A
call's first event through toolwire comes once its name is whole, some tokens after
vLLM's first token, and a constraint changes how often the random model begins with
one; so the p50 over the requests that began with text, per setting, compares like
with like.

Where guidance's time goes: the same blocks also run `direct on` and `direct off`, the
very `/v1/completions` request toolwire sends vLLM (captured once through a pass-through
proxy between a third `toolwire serve` and vLLM), with and without its
`structured_outputs`, sent to vLLM itself. `direct on / direct off` is vLLM's own cost
of the constraint (its structured-output set-up and per-step masks on CPU); what the
through ratio adds beyond it is toolwire's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from aiohttp import web
from tests.data import data_path

from bench.proxy import ROOT, SERVED, _has_output, free_port, settle, toolwire, vllm_server
from toolwire.check.corpus import bfcl_folder, load_bfcl

ASK = [{"role": "user", "content": "What is the area of a triangle of base 3 and height 4?"}]
SETTINGS = ("on", "off", "direct on", "direct off")
#: `--grammar-backend`: vLLM's flags for it, and toolwire's (the form it sends).
UPSTREAM_BACKENDS = {
    "xgrammar": ([], ["--grammar-backend", "xgrammar"]),
    "guidance": (
        ["--structured-outputs-config.backend", "guidance"],
        ["--grammar-backend", "llguidance"],
    ),
}


def bfcl_tools(count: int) -> list[dict[str, Any]]:
    """The first `count` distinct BFCL tools (by name), `multiple` first."""
    folder = bfcl_folder(None, data_path())
    seen: dict[str, dict[str, Any]] = {}
    for category in ("multiple", "simple_python"):
        for case in load_bfcl(folder, category):
            for tool in case.tools:
                seen.setdefault(tool["function"]["name"], tool)
                if len(seen) == count:
                    return list(seen.values())
    return list(seen.values())


def chat_body(tools: list[dict[str, Any]], tokens: int) -> dict[str, Any]:
    return {
        "model": SERVED,
        "messages": ASK,
        "tools": tools,
        "tool_choice": "auto",
        "max_tokens": tokens,
        "stream": True,
    }


#: Qwen3's `<tool_call>`: a completion whose first token it is begins a call.
CALL_ID = 151657


def output_kind(event: bytes) -> str:
    """What the first output event carries: "call" (a call's first chunk, or a
    completion's `<tool_call>` token), else "text"."""
    data = json.loads(event.partition(b"data: ")[2])
    for choice in data.get("choices") or []:
        ids = choice.get("token_ids") or []
        if (ids and ids[0] == CALL_ID) or (choice.get("delta") or {}).get("tool_calls"):
            return "call"
    return "text"


async def first_output(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any]
) -> tuple[float | None, bool, str]:
    """(seconds to the first output or None, whether the stream carried an error, what
    the first output was: `output_kind`)."""
    started = time.perf_counter()
    first: float | None = None
    kind = ""
    errored = False
    pending = b""
    async with session.post(url, json=body) as response:
        if response.status != 200:
            return None, True, kind
        async for chunk in response.content.iter_any():
            pending += chunk
            *events, pending = pending.split(b"\n\n")
            for event in events:
                if first is None and _has_output(event):
                    first = time.perf_counter() - started
                    kind = output_kind(event)
                errored = errored or event.startswith(b'data: {"error"')
    return first, errored, kind


async def batch(
    url: str, body: dict[str, Any], streams: int
) -> list[tuple[float | None, bool, str]]:
    timeout = aiohttp.ClientTimeout(total=900)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        return await asyncio.gather(*(first_output(session, url, body) for _ in range(streams)))


@contextmanager
def capturing(upstream: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(URL, bodies): a pass-through proxy to `upstream` on its own thread, recording
    the JSON body of every POST it forwards."""
    captured: list[dict[str, Any]] = []
    port = free_port()
    loop = asyncio.new_event_loop()
    sessions: list[aiohttp.ClientSession] = []  # one, opened on the proxy's loop

    async def forward(request: web.Request) -> web.StreamResponse:
        data = await request.read()
        if request.method == "POST" and data:
            captured.append(json.loads(data))
        headers = {"content-type": request.headers.get("content-type", "application/json")}
        async with sessions[0].request(
            request.method, upstream + request.path_qs, data=data, headers=headers
        ) as reply:
            out = web.StreamResponse(
                status=reply.status,
                headers={"content-type": reply.headers.get("content-type", "application/json")},
            )
            await out.prepare(request)
            async for chunk in reply.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    async def start() -> web.AppRunner:
        sessions.append(aiohttp.ClientSession())
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        return runner

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield f"http://127.0.0.1:{port}", captured
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        asyncio.run_coroutine_threadsafe(sessions[0].close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def upstream_bodies(
    vllm: str, model: Path, source: str, body: dict[str, Any], flags: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The completion request `toolwire serve` (guidance on, `flags`) sends vLLM for
    `body`, and the same request without its constraint."""
    with (
        capturing(vllm) as (proxy, captured),
        toolwire(proxy, model, source, flags) as (url, _),
    ):
        asyncio.run(batch(f"{url}/v1/chat/completions", body, 1))
    sent = next(b for b in captured if "prompt" in b)
    if "structured_outputs" not in sent:
        raise SystemExit(f"toolwire sent no constraint: {sorted(sent)}")
    bare = {k: v for k, v in sent.items() if k != "structured_outputs"}
    return sent, bare


def tags_measured(url: str) -> float:
    """How many distinct tags the server has built and measured for its upstream (its
    `toolwire_grammar_compile_seconds` count): 1 with guidance on, 0 off."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    counts = re.findall(r"^toolwire_grammar_compile_seconds_count\{[^}]*\} (\S+)$", text, re.M)
    return sum(float(c) for c in counts)


def p50_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1e3, 1)


def ratio_interval(
    on: list[float], off: list[float], resamples: int = 4000, seed: int = 0
) -> tuple[float, float]:
    """The 95% bootstrap interval of median(on) / median(off), `on` and `off` resampled
    with replacement (each setting's block p50s): "equal within noise" is an interval
    holding 1.0."""
    rng = random.Random(seed)
    ratios = sorted(
        statistics.median(rng.choices(on, k=len(on)))
        / statistics.median(rng.choices(off, k=len(off)))
        for _ in range(resamples)
    )
    return round(ratios[int(0.025 * resamples)], 3), round(ratios[int(0.975 * resamples) - 1], 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=4, help="blocks of each setting")
    parser.add_argument("--batches", type=int, default=2, help="batches per block")
    parser.add_argument("--streams", type=int, default=8, help="concurrent requests per batch")
    parser.add_argument("--tools", type=int, default=4, help="BFCL tools per request")
    parser.add_argument("--tokens", type=int, default=16, help="max tokens per request")
    parser.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"))
    parser.add_argument("--model-dir", type=Path, help="where the tiny Qwen3 is built (kept)")
    parser.add_argument("--vllm-url", help="a vLLM server already running (not stopped)")
    parser.add_argument("--vllm-pid", type=int, help="its API-server process, with --vllm-url")
    parser.add_argument("--toolwire-src", default=str(ROOT / "src"), help="toolwire's PYTHONPATH")
    parser.add_argument(
        "--grammar-backend",
        choices=sorted(UPSTREAM_BACKENDS),
        default="xgrammar",
        help="the structured-output backend vLLM runs (toolwire sends its form)",
    )
    parser.add_argument("--json", type=Path, help="write the blocks and the summary here")
    args = parser.parse_args()
    tools = bfcl_tools(args.tools)
    body = chat_body(tools, args.tokens)
    blocks: list[dict[str, Any]] = []
    vllm_flags, tw_flags = UPSTREAM_BACKENDS[args.grammar_backend]
    print(f"vLLM's structured-output backend: {args.grammar_backend}")
    with (
        vllm_server(args, vllm_flags) as (url, _api_pid, model),
        toolwire(url, model, args.toolwire_src, tw_flags) as (on_url, on_pid),
        toolwire(url, model, args.toolwire_src, [*tw_flags, "--guidance", "off"]) as (
            off_url,
            off_pid,
        ),
    ):
        servers = {"on": on_url, "off": off_url}
        constrained, bare = upstream_bodies(url, model, args.toolwire_src, body, tw_flags)
        sent = {k: len(json.dumps(v)) for k, v in constrained["structured_outputs"].items()}
        print(f"toolwire sends vLLM structured_outputs {sent} (characters of each)")
        targets = {
            "on": (f"{on_url}/v1/chat/completions", body),
            "off": (f"{off_url}/v1/chat/completions", body),
            "direct on": (f"{url}/v1/completions", constrained),
            "direct off": (f"{url}/v1/completions", bare),
        }
        for where, sent in targets.values():  # warm-up: template, tag, vLLM's compile
            for _ in range(2):
                asyncio.run(batch(where, sent, 2))
        for setting, where in servers.items():
            policy = httpx.get(f"{where}/health/ready", timeout=10).json()["guidance"]
            print(f"guidance {setting}: {policy}")
        settle(on_pid)
        settle(off_pid)
        names = ", ".join(t["function"]["name"] for t in tools)
        print(f"{args.streams} concurrent, {args.tokens} max tokens, tools: {names}")
        for index in range(args.blocks):
            for setting in SETTINGS:
                results = []
                where, sent = targets[setting]
                for _ in range(args.batches):
                    results += asyncio.run(batch(where, sent, args.streams))
                ttft = [t for t, _, _ in results if t is not None]
                block = {
                    "block": index,
                    "guidance": setting,
                    "ttft_s": ttft,
                    "text_first_s": [t for t, _, k in results if t is not None and k == "text"],
                    "p50_ms": p50_ms(ttft) if ttft else None,
                    "calls_first": sum(k == "call" for _, _, k in results),
                    "no_output": sum(t is None for t, _, _ in results),
                    "errors": sum(e for _, e, _ in results),
                }
                blocks.append(block)
                print(
                    f"  block {index} guidance {setting:10s} TTFT p50 {block['p50_ms']} ms "
                    f"({len(ttft)} requests, {block['calls_first']} beginning with a call, "
                    f"{block['errors']} errors, {block['no_output']} without output)",
                    flush=True,
                )
        for setting, where in servers.items():
            print(f"guidance {setting}: {tags_measured(where):g} tag(s) built")
    summary: dict[str, Any] = {}
    for setting in SETTINGS:
        of = [b for b in blocks if b["guidance"] == setting and b["p50_ms"] is not None]
        text_first = [t for b in of for t in b["text_first_s"]]
        summary[setting] = {
            "median_block_p50_ms": round(statistics.median(b["p50_ms"] for b in of), 1),
            "p50_all_ms": p50_ms([t for b in of for t in b["ttft_s"]]),
            "calls_first": sum(b["calls_first"] for b in of),
            "p50_text_first_ms": p50_ms(text_first) if text_first else None,
        }
    for key in ("median_block_p50_ms", "p50_all_ms"):
        summary[f"ratio_{key}"] = round(summary["on"][key] / summary["off"][key], 3)
        direct = summary["direct on"][key] / summary["direct off"][key]
        summary[f"direct_ratio_{key}"] = round(direct, 3)
    p50s = {
        s: [b["p50_ms"] for b in blocks if b["guidance"] == s and b["p50_ms"]] for s in SETTINGS
    }
    summary["ratio_interval_95"] = ratio_interval(p50s["on"], p50s["off"])
    summary["direct_ratio_interval_95"] = ratio_interval(p50s["direct on"], p50s["direct off"])
    print(
        f"\nguidance on:  median of block p50 {summary['on']['median_block_p50_ms']} ms, "
        f"p50 of all {summary['on']['p50_all_ms']} ms\n"
        f"guidance off: median of block p50 {summary['off']['median_block_p50_ms']} ms, "
        f"p50 of all {summary['off']['p50_all_ms']} ms\n"
        f"on/off: {summary['ratio_median_block_p50_ms']} (block p50s), "
        f"{summary['ratio_p50_all_ms']} (all requests)\n"
        f"direct on:  median of block p50 {summary['direct on']['median_block_p50_ms']} ms, "
        f"p50 of all {summary['direct on']['p50_all_ms']} ms\n"
        f"direct off: median of block p50 {summary['direct off']['median_block_p50_ms']} ms, "
        f"p50 of all {summary['direct off']['p50_all_ms']} ms\n"
        f"direct on/off (vLLM's own cost of the constraint): "
        f"{summary['direct_ratio_median_block_p50_ms']} (block p50s), "
        f"{summary['direct_ratio_p50_all_ms']} (all requests)\n"
        f"95% bootstrap interval of on/off (block p50s): {summary['ratio_interval_95']}; "
        f"direct: {summary['direct_ratio_interval_95']}"
    )
    for setting in SETTINGS:
        got = summary[setting]
        print(
            f"{setting}: {got['calls_first']} requests began with a call; p50 of those "
            f"beginning with text {got['p50_text_first_ms']} ms"
        )
    if args.json:
        report = {"args": {k: str(v) for k, v in vars(args).items()}, "blocks": blocks}
        args.json.write_text(json.dumps(report | {"summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
