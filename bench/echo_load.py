"""`/health` latency while streams that echo large request fields are running.

The server (its own process) runs on a scripted engine (Qwen3's tokenizer, one id per
delta, `--delay` seconds between deltas, like a real engine's pace); here, `--streams`
streamed Responses requests carry `metadata` at OpenAI's limits (16 pairs, 64-character
keys, 512-character values) and `--instructions-kb` of instructions (none by default),
and `/health` is asked every 20 ms, from a process of its own, until they end.

    .venv/bin/python -m bench.echo_load [--streams 20] [--tokens 400] [--delay 0.005]
                                        [--instructions-kb 64] [--plain]

(`--plain`: the same streams without metadata or instructions, to compare.)

Reports, as JSON: failures (must be 0), the SSE bytes per stream and what of it is the
echoed fields, and `/health`'s latency (p50, p99, max) while the streams ran. A request
with metadata past the limits is refused (400) before any work: checked once too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from tests.data import tokenizer_for

from bench.load_server import ScriptedEngine
from toolwire.backends.base import Delta, Generation

MODEL = "scripted"
METADATA = {f"key{n:02d}".ljust(64, "k"): chr(0x61 + n) * 512 for n in range(16)}


class PacedEngine(ScriptedEngine):
    """The scripted answer, one id per delta, `delay` seconds apart."""

    def __init__(self, tokens: int, delay: float) -> None:
        super().__init__(tokenizer_for("qwen3"), tokens)
        self._delay = delay

    async def stream(self, generation: Generation) -> AsyncIterator[Delta]:
        for token in self._ids[: generation.max_tokens]:
            yield Delta([token])
            await asyncio.sleep(self._delay)
        yield Delta([self._end], "stop")


def serve(port: int, tokens: int, delay: float) -> None:
    import uvicorn

    from toolwire.server.app import create_app

    app = create_app(PacedEngine(tokens, delay))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _body(instructions: str, metadata: dict[str, str] | None) -> dict[str, Any]:
    body = {
        "model": MODEL,
        "input": "What is the weather in Paris?",
        "stream": True,
        "max_output_tokens": 4096,
    }
    if instructions:
        body["instructions"] = instructions
    if metadata is not None:
        body["metadata"] = metadata
    return body


async def _stream(
    client: httpx.AsyncClient, instructions: str, metadata: dict[str, str] | None
) -> tuple[int, bool]:
    size = 0
    ended = False
    async with client.stream("POST", "/v1/responses", json=_body(instructions, metadata)) as r:
        if r.status_code != 200:
            return 0, False
        async for chunk in r.aiter_bytes():
            size += len(chunk)
            ended = ended or b"response.completed" in chunk
    return size, ended


def _health(url: str, running: Any, out: Any) -> None:
    """In its own process (the streams' client must not delay it): `/health` every
    20 ms while `running` is set; the latencies go to `out`."""
    latencies = []
    with httpx.Client(base_url=url, timeout=30) as client:
        while running.is_set():
            started = time.perf_counter()
            r = client.get("/health")
            assert r.status_code == 200
            latencies.append(time.perf_counter() - started)
            time.sleep(0.02)
    out.put(latencies)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _run(url: str, streams: int, instructions_kb: int, plain: bool) -> dict[str, Any]:
    instructions = ("Answer briefly. " * (instructions_kb * 64))[: instructions_kb * 1024]
    metadata = None if plain else METADATA
    instructions = "" if plain else instructions
    echoed = len(json.dumps({"metadata": metadata, "instructions": instructions}))
    limits = httpx.Limits(max_connections=streams + 2)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        await _stream(client, instructions, metadata)  # warm-up
        over = dict(METADATA, extra="x")
        refused = await client.post("/v1/responses", json=_body("", over))
        running, out = multiprocessing.Event(), multiprocessing.Queue()
        running.set()
        probe = multiprocessing.Process(target=_health, args=(url, running, out))
        probe.start()
        results = await asyncio.gather(
            *(_stream(client, instructions, metadata) for _ in range(streams))
        )
        running.clear()
        latencies = out.get(timeout=60)
        probe.join(timeout=10)
    sizes = [size for size, _ in results]
    return {
        "streams": streams,
        "echo": "none" if plain else f"metadata at the limits, {instructions_kb} KB instructions",
        "failures": sum(not ok for _, ok in results) + (refused.status_code != 400),
        "over_the_limits_status": refused.status_code,
        "echoed_bytes": echoed,
        "sse_bytes_per_stream": round(sum(sizes) / len(sizes)),
        "health_samples": len(latencies),
        "health_ms": {
            "p50": round(_pct(latencies, 0.5) * 1e3, 1),
            "p99": round(_pct(latencies, 0.99) * 1e3, 1),
            "max": round(max(latencies) * 1e3, 1),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--delay", type=float, default=0.005)
    parser.add_argument("--instructions-kb", type=int, default=0)
    parser.add_argument("--plain", action="store_true", help="no metadata, no instructions")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.tokens, args.delay)
        return 0
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "bench.echo_load", "--serve", str(port)]
    command += ["--tokens", str(args.tokens), "--delay", str(args.delay)]
    server = subprocess.Popen(command)
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
        report = asyncio.run(_run(url, args.streams, args.instructions_kb, args.plain))
    finally:
        server.terminate()
        server.wait(timeout=20)
    print(json.dumps(report, indent=2))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
