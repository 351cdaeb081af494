"""Load run: 200 concurrent streaming requests against a fast scripted engine.

The engine answers instantly from a script (Qwen3 tokenizer, `qwen3` format, one id
per delta: the most per-token work for the server), so every microsecond measured is
the server's own: HTTP, validation, prompt rendering with isolation, the structural
tag, the parser, chunk mapping and SSE. The server runs in its own process; the
clients run here.

    .venv/bin/python -m bench.load_server [--concurrency 200] [--tokens 64]

Reports, as JSON: failures (must be 0), per-request latency p50/p99 under load, the
server process's CPU time per request and per token, and the same per-request and
per-token figures for requests sent one at a time (no queueing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from tests.data import tokenizer_for

from toolwire.backends.base import Delta, Generation
from toolwire.tokenizer import Tokenizer

MODEL = "scripted"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
ANSWER = (
    "<think>\nThe user wants the weather; I will call the tool.\n</think>\n\n"
    "Let me check the weather in Paris for you, it will only take a moment. "
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
)


class ScriptedEngine:
    """Answers every request with the same ids, one per delta, without waiting."""

    def __init__(self, tokenizer: Tokenizer, tokens: int) -> None:
        self.model = MODEL
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        self.format = "qwen3"
        self.template: str | None = None
        self.max_prompt_tokens: int | None = None
        self.context_length: int | None = None
        self.constrains = True
        self.logprobs = False
        self.warnings: list[str] = []
        ids = tokenizer.encode(ANSWER)
        self._ids = (ids * (tokens // len(ids) + 1))[:tokens] if tokens > len(ids) else ids
        self._end = tokenizer.added_tokens["<|im_end|>"]

    async def stream(self, generation: Generation) -> AsyncIterator[Delta]:
        for token in self._ids[: generation.max_tokens]:
            yield Delta([token])
            await asyncio.sleep(0)  # a real engine yields to the loop between deltas
        yield Delta([self._end], "stop")

    async def close(self) -> None:
        return None


def serve(port: int, tokens: int) -> None:
    import uvicorn

    from toolwire.server.app import create_app

    engine = ScriptedEngine(tokenizer_for("qwen3"), tokens)
    app = create_app(engine)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _body(max_tokens: int) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": TOOLS,
        "stream": True,
        "max_tokens": max_tokens,
        "stream_options": {"include_usage": True},
    }


async def _one(client: httpx.AsyncClient, max_tokens: int) -> tuple[float, int, bool]:
    """(seconds, completion tokens, ok) for one streamed request."""
    started = time.perf_counter()
    tokens = 0
    done = False
    calls = 0
    async with client.stream("POST", "/v1/chat/completions", json=_body(max_tokens)) as r:
        if r.status_code != 200:
            return time.perf_counter() - started, 0, False
        async for line in r.aiter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    return time.perf_counter() - started, 0, False
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
                for choice in chunk.get("choices", []):
                    calls += len(choice["delta"].get("tool_calls") or [])
    return time.perf_counter() - started, tokens, done and tokens > 0 and calls > 0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _load(url: str, pid: int, concurrency: int, tokens: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        await _one(client, tokens)  # warm-up: grammar and template caches
        cpu0 = _cpu_seconds(pid)
        t0 = time.perf_counter()
        results = await asyncio.gather(*(_one(client, tokens) for _ in range(concurrency)))
        wall = time.perf_counter() - t0
        cpu = _cpu_seconds(pid) - cpu0
        sequential = [await _one(client, tokens) for _ in range(50)]
    latencies = [s for s, _, _ in results]
    produced = sum(n for _, n, _ in results)
    one = [s for s, _, _ in sequential]
    per_token = [s / n for s, n, _ in sequential if n]
    return {
        "concurrency": concurrency,
        "tokens_per_request": tokens,
        "failures": sum(not ok for _, _, ok in results) + sum(not ok for _, _, ok in sequential),
        "wall_seconds": round(wall, 3),
        "tokens_per_second": round(produced / wall),
        "loaded_latency_ms": {
            "p50": round(_pct(latencies, 0.5) * 1e3, 1),
            "p99": round(_pct(latencies, 0.99) * 1e3, 1),
        },
        "server_cpu_us_per_token": round(cpu / produced * 1e6, 1),
        "server_cpu_ms_per_request": round(cpu / concurrency * 1e3, 2),
        "unloaded_request_ms": {
            "p50": round(statistics.median(one) * 1e3, 2),
            "p99": round(_pct(one, 0.99) * 1e3, 2),
        },
        "unloaded_us_per_token": {
            "p50": round(statistics.median(per_token) * 1e6, 1),
            "p99": round(_pct(per_token, 0.99) * 1e6, 1),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.tokens)
        return 0
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "bench.load_server", "--serve", str(port)]
    server = subprocess.Popen([*command, "--tokens", str(args.tokens)])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
            time.sleep(0.1)
        report = asyncio.run(_load(url, server.pid, args.concurrency, args.tokens))
    finally:
        server.terminate()
        server.wait(timeout=20)
    print(json.dumps(report, indent=2))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
