"""Proxy cost: what `toolwire serve --engine vllm` adds to a stream, against a real vLLM
and a paced scripted upstream.

    python -m bench.proxy [--upstreams scripted vllm] [--streams 1 8 64] [--tokens 128]
                          [--rounds 5] [--pace 0.02] [--tool-choice none|auto]
                          [--vllm-python PATH] [--model-dir DIR] [--toolwire-src PATH]
                          [--vllm-url URL --vllm-pid PID]
                          [--profile DIR] [--json FILE]

Every party runs in its own process, so each one's CPU time is its own: this one (the
clients and the clock), the upstream, and `toolwire serve --engine vllm` in front of it
(this interpreter, `--toolwire-src` first on its path: by default this repository's
`src`).

Upstreams, one at a time:

* `scripted`: tests/serving.py's `ScriptedUpstream` speaking vLLM's `/v1/completions`
  (in its own process), answering every request with the same `--tokens` Qwen3 ids (a
  reasoning block, content, one tool call, `<|im_end|>`), one id per event, `--pace`
  seconds apart, as an engine produces them. direct: its own stream, requested with
  the body toolwire sends.
* `vllm`: vLLM's CPU server (`tests/vllm_rig.py`, run by `--vllm-python`, default
  `.venv-vllm`) on the tiny random-weight Qwen3 (`tests/tiny_qwen3.py`), with vLLM's
  own chat serving: its renderer, `--tool-call-parser hermes`, `--reasoning-parser
  qwen3`. direct: its `/v1/chat/completions` with the very chat request the client
  sends toolwire (same messages, tools, tool_choice, max_tokens, seeds: the seeds
  whose output stays in Qwen3's vocabulary, see `in_vocabulary_seeds`); through:
  toolwire's, which calls vLLM's `/v1/completions`. `--tool-choice` defaults to
  `none` here, so both paths generate unconstrained and alike (with `auto` toolwire
  sends a structural tag, which costs vLLM's engine, not its frontend).

For every stream count S, rounds alternate direct and through toolwire (the order
swapping each round); a run is S concurrent streams (seeds 0..S-1), each read to its
end. Per run: tokens/s (every stream's completion tokens over the batch's wall time),
TTFT per stream (request sent to the first event carrying output text or ids), and
the CPU time (the scheduler's count, thread by thread) of toolwire's process and of
the upstream's (for vLLM its API-server process, not the engine core) per completion
token. Reported:
medians over rounds, through/direct tokens/s, and toolwire's CPU per token beside the
vLLM API server's on the direct runs (vLLM's own frontend serving the same streams).

`--profile DIR`: after the measured rounds on the scripted upstream, one more run
through toolwire per stream count with py-spy sampling toolwire's process
(`--nonblocking`, so it is not stopped); the raw stacks go to DIR, and the top entries
(self time by package and by function) are printed and written to the JSON.

The machine may be shared: absolute figures are noisy; the medians and ratios of
alternating runs are the result.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import psutil
from tests.data import ROOT, data_path

#: The served model name (the rig's, also used for the scripted upstream).
SERVED = "tiny-qwen3"
MESSAGES = [
    {"role": "user", "content": "Write a long story about a lighthouse, then check the weather."}
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
REASONING = (
    "<think>\nThe user wants a story and the weather; I will write, then call.\n</think>\n\n"
)
STORY = (
    "The lighthouse stood on the last rock of the bay, and every night its keeper climbed "
    "the hundred steps to light the lamp that the ships had trusted for a century. "
)
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Brest"}}\n</tool_call>'
#: vLLM's own chat serving for Qwen3: its parsers, not toolwire's.
VLLM_OWN = [
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
    "--reasoning-parser",
    "qwen3",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(
    url: str, process: subprocess.Popen[bytes], what: str, timeout: float = 120
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not become healthy")
        time.sleep(0.2)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


# -- the scripted upstream (its own process) ---------------------------------------


def script_ids(tokens: int) -> list[int]:
    """`tokens` Qwen3 ids: reasoning, story text, one call, `<|im_end|>`."""
    from tests.data import tokenizer_for

    tok = tokenizer_for("qwen3")
    head, call = tok.encode(REASONING), tok.encode(CALL)
    end = [tok.added_tokens["<|im_end|>"]]
    room = tokens - len(head) - len(call) - len(end)
    if room < 1:
        raise SystemExit(f"--tokens must be at least {len(head) + len(call) + 2}")
    story = tok.encode(STORY * (room // 20 + 2))[:room]
    return head + story + call + end


def serve_scripted(port: int, tokens: int, pace: float) -> None:
    import uvicorn
    from tests.serving import Script, ScriptedUpstream

    upstream = ScriptedUpstream("vllm", default=Script(script_ids(tokens), per_event=1, delay=pace))
    uvicorn.run(upstream.app(), host="127.0.0.1", port=port, log_level="warning", access_log=False)


@contextmanager
def scripted_upstream(tokens: int, pace: float) -> Iterator[tuple[str, int]]:
    port = free_port()
    command = [sys.executable, "-m", "bench.proxy", "--serve-scripted", str(port)]
    command += ["--tokens", str(tokens), "--pace", str(pace)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        # no health route: any answer (405 to a GET) means it is listening
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/v1/completions", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.2)
        yield url, process.pid
    finally:
        stop(process)


# -- toolwire serve in front ---------------------------------------------------------


@contextmanager
def toolwire(
    upstream: str, tokenizer: Path, source: str, flags: list[str] | None = None
) -> Iterator[tuple[str, int]]:
    """(URL, pid) of `toolwire serve --engine vllm` in front of `upstream`, with `flags`
    added (e.g. `--guidance off`)."""
    port = free_port()
    command = [sys.executable, "-m", "toolwire.cli", "serve", "--engine", "vllm"]
    command += ["--upstream", upstream, "--tokenizer", str(tokenizer), "--model", SERVED]
    command += ["--port", str(port), "--log-level", "warning", *(flags or [])]
    env = {**os.environ, "PYTHONPATH": source}
    process = subprocess.Popen(command, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(f"{url}/health", process, "toolwire serve")
        yield url, process.pid
    finally:
        stop(process)


# -- the client ----------------------------------------------------------------------


def chat_body(seed: int, tokens: int, tool_choice: str) -> dict[str, Any]:
    return {
        "model": SERVED,
        "messages": MESSAGES,
        "tools": TOOLS,
        "tool_choice": tool_choice,
        "max_tokens": tokens,
        "seed": seed,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def completion_body(prompt: list[int], seed: int, tokens: int) -> dict[str, Any]:
    from toolwire.backends import vllm
    from toolwire.backends.base import Generation

    generation = Generation(prompt_ids=prompt, max_tokens=tokens, seed=seed)
    return vllm.completion_body(generation, SERVED)


def _has_output(event: bytes) -> bool:
    """Whether one SSE event carries output: chat text or calls, completion ids or text."""
    data = event.partition(b"data: ")[2]
    if not data.startswith(b"{"):
        return False
    for choice in json.loads(data).get("choices") or []:
        if choice.get("token_ids") or choice.get("text"):
            return True
        delta = choice.get("delta") or {}
        if any(delta.get(k) for k in ("content", "reasoning_content", "reasoning", "tool_calls")):
            return True
    return False


def _usage(tail: bytes) -> int | None:
    for event in reversed(tail.split(b"\n\n")):
        data = event.partition(b"data: ")[2]
        if b'"usage"' in data and data.startswith(b"{"):
            usage = json.loads(data).get("usage")
            if usage:
                return int(usage["completion_tokens"])
    return None


async def one_stream(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], expected: int
) -> tuple[float, int]:
    """(seconds to the first output, completion tokens) of one streamed request; the
    same work whichever server answers: events are parsed only until the first output,
    then only the tail is kept for the usage."""
    started = time.perf_counter()
    first = 0.0
    pending = b""
    tail = b""
    async with session.post(url, json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"{url}: {response.status} {(await response.text())[:300]}")
        async for chunk in response.content.iter_any():
            if not first:
                pending += chunk
                *events, pending = pending.split(b"\n\n")
                if any(_has_output(e) for e in events):
                    first = time.perf_counter() - started
            tail = (tail + chunk)[-8192:]
    usage = _usage(tail)
    if b"[DONE]" not in tail[-32:]:
        raise RuntimeError(f"{url}: the stream did not end with [DONE]")
    return first, expected if usage is None else usage


@dataclass
class Run:
    """One batch of concurrent streams on one path."""

    upstream: str
    streams: int
    path: str  # "direct" | "toolwire"
    wall: float
    tokens: int
    ttft: list[float]
    #: CPU seconds each measured process spent during the batch.
    cpu: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.tokens / self.wall

    def cpu_us_per_token(self, name: str) -> float:
        return self.cpu[name] / self.tokens * 1e6


def cpu_threads(pid: int) -> dict[str, float]:
    """CPU seconds each thread of a process has run: the scheduler's nanosecond count
    (/proc/PID/task/*/schedstat), or, where there is no /proc, psutil's user + system
    for the whole process (clock ticks of 10 ms: too coarse for a short run of one
    stream)."""
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        times = psutil.Process(pid).cpu_times()
        return {"process": float(times.user + times.system)}
    out: dict[str, float] = {}
    for task in tasks.iterdir():
        try:
            out[task.name] = int((task / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, IndexError, ValueError):
            continue  # the thread ended meanwhile
    return out


def cpu_since(before: dict[str, float], pid: int) -> float:
    """CPU seconds the process has run since `before` (`cpu_threads`), thread by
    thread: a thread started since counts whole; one that ended since is lost (what it
    ran after `before` too: the runs start once the process is idle)."""
    return sum(t - before.get(name, 0.0) for name, t in cpu_threads(pid).items())


def settle(pid: int, timeout: float = 300) -> None:
    """Wait until the process is idle (under 2% of a core over half a second): after the
    warm-up, toolwire measures the compile its upstream will pay once per tag, in a
    thread, and that is not a streamed token's cost."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = cpu_threads(pid)
        time.sleep(0.5)
        if cpu_since(before, pid) < 0.01:
            return


async def batch(
    url: str, bodies: list[dict[str, Any]], expected: int, pids: dict[str, int]
) -> tuple[float, int, list[float], dict[str, float]]:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=1800)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        before = {name: cpu_threads(pid) for name, pid in pids.items()}
        started = time.perf_counter()
        results = await asyncio.gather(*(one_stream(session, url, b, expected) for b in bodies))
        wall = time.perf_counter() - started
        cpu = {name: cpu_since(before[name], pid) for name, pid in pids.items()}
    return wall, sum(n for _, n in results), [t for t, _ in results], cpu


# -- py-spy --------------------------------------------------------------------------


def _package(frame: str) -> str:
    """A frame `function (file:line)` as its package: py-spy names files relative to
    the path entry they were found under, so the first component is the package (a
    toolwire frame: its module), a bare file a standard-library module."""
    match = re.search(r"\((.*?)(?::\d+)?\)$", frame)
    path = match.group(1) if match else frame
    parts = path.removesuffix(".py").split("/")
    if parts[0] == "toolwire":
        return ".".join(parts)
    return parts[0] if len(parts) > 1 else f"{parts[0]} (stdlib)"


def summarize_profile(raw: Path, top: int = 15) -> dict[str, Any]:
    """Self time by package and by function, and time inside each function (the
    frames under nearly every sample, such as the event loop's, left out), as shares
    of all samples (py-spy samples running threads only)."""
    by_package: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[str] = collections.Counter()
    inside: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        by_package[_package(stack.rsplit(";", 1)[-1])] += n
        by_function[frames[-1]] += n
        for name in set(frames):
            inside[name] += n
        total += n

    def share(counter: collections.Counter[str]) -> list[tuple[str, float]]:
        return [(k, round(v / total, 4)) for k, v in counter.most_common(top)]

    nested = collections.Counter({k: v for k, v in inside.items() if v < 0.9 * total})
    return {
        "samples": total,
        "self_by_package": share(by_package),
        "self_by_function": share(by_function),
        "inside_function": share(nested),
    }


def run_profiled(
    url: str, pid: int, bodies: list[dict[str, Any]], expected: int, out: Path
) -> dict[str, Any]:
    command = ["py-spy", "record", "--pid", str(pid), "--rate", "200", "--nonblocking"]
    command += ["--format", "raw", "--output", str(out)]
    spy_bin = Path(sys.executable).with_name("py-spy")
    command[0] = str(spy_bin) if spy_bin.exists() else "py-spy"
    spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached
    for _ in range(3):
        asyncio.run(batch(url, bodies, expected, {}))
    spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    spy.wait(timeout=60)
    return summarize_profile(out)


# -- one upstream --------------------------------------------------------------------


def alternate(
    upstream: str,
    streams: list[int],
    rounds: int,
    direct: tuple[str, Any],
    through: tuple[str, Any],
    expected: int,
    pids: dict[str, int],
) -> list[Run]:
    """`rounds` pairs of runs per stream count, direct and through toolwire alternating
    (the first of each pair swapping every round). `direct`/`through`: (URL, bodies
    for S streams)."""
    runs: list[Run] = []
    for count in streams:
        for r in range(rounds):
            order = [("direct", direct), ("toolwire", through)]
            for path, (url, bodies_for) in order if r % 2 == 0 else order[::-1]:
                wall, tokens, ttft, cpu = asyncio.run(batch(url, bodies_for(count), expected, pids))
                run = Run(upstream, count, path, wall, tokens, ttft, cpu)
                runs.append(run)
                print(
                    f"  {upstream} {count:3d} streams {path:8s} {run.rate:8.1f} tok/s "
                    f"TTFT p50 {statistics.median(ttft) * 1e3:7.1f} ms  "
                    + "  ".join(f"{n} {run.cpu_us_per_token(n):6.0f} µs/tok" for n in cpu),
                    flush=True,
                )
    return runs


def run_scripted(args: argparse.Namespace, report: dict[str, Any]) -> None:
    tokenizer = data_path() / "tokenizers" / "qwen3"
    tool_choice = args.tool_choice or "auto"
    with (
        scripted_upstream(args.tokens, args.pace) as (up_url, up_pid),
        toolwire(up_url, tokenizer, args.toolwire_src) as (tw_url, tw_pid),
    ):
        prompt = scripted_prompt(tokenizer, tool_choice)
        direct = (
            f"{up_url}/v1/completions",
            lambda n: [completion_body(prompt, s, args.tokens) for s in range(n)],
        )
        through = (
            f"{tw_url}/v1/chat/completions",
            lambda n: [chat_body(s, args.tokens, tool_choice) for s in range(n)],
        )
        pids = {"toolwire": tw_pid, "upstream": up_pid}
        for url, bodies in (direct, through):  # warm-up: pools, template, grammar
            asyncio.run(batch(url, bodies(2), args.tokens, {}))
        settle(tw_pid)
        print(
            f"scripted upstream: {args.tokens} ids per stream, one per event, "
            f"{args.pace * 1e3:g} ms apart"
        )
        runs = alternate("scripted", args.streams, args.rounds, direct, through, args.tokens, pids)
        report["runs"] += [asdict(r) for r in runs]
        report["summary"] += summarize(runs, "upstream")
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            for count in args.streams:
                out = args.profile / f"toolwire-scripted-{count}.txt"
                summary = run_profiled(through[0], tw_pid, through[1](count), args.tokens, out)
                report["profiles"][f"scripted-{count}"] = summary
                print_profile(f"scripted upstream, {count} streams", summary)


def scripted_prompt(tokenizer: Path, tool_choice: str) -> list[int]:
    from toolwire import load_tokenizer, render_prompt

    tok = load_tokenizer(tokenizer)
    return list(render_prompt(MESSAGES, tok, tools=TOOLS, format="qwen3", isolate=True).ids)


@contextmanager
def vllm_server(
    args: argparse.Namespace, extra: Sequence[str] = ()
) -> Iterator[tuple[str, int, Path]]:
    """(URL, API-server pid, model folder) of vLLM's CPU server: started here on the
    tiny Qwen3 with `extra` flags and stopped after, or, with `--vllm-url`, one already
    running (the model folder it serves in `--model-dir`, its API-server process
    `--vllm-pid`)."""
    if args.vllm_url:
        if args.vllm_pid is None or args.model_dir is None:
            raise SystemExit("--vllm-url needs --vllm-pid and --model-dir")
        httpx.get(f"{args.vllm_url}/health", timeout=5).raise_for_status()
        yield args.vllm_url.rstrip("/"), args.vllm_pid, args.model_dir
        return
    from tests.vllm_rig import VllmServer

    with tempfile.TemporaryDirectory(prefix="toolwire-bench-") as tmp:
        model = args.model_dir or Path(tmp) / "tiny-qwen3"
        build = [args.vllm_python, "-m", "tests.tiny_qwen3", str(model)]
        subprocess.run(build, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        server = VllmServer.start(
            model, Path(tmp) / "vllm.log", python=args.vllm_python, flags=[*VLLM_OWN, *extra]
        )
        try:
            print(f"vLLM healthy after {server.startup_seconds:.0f} s")
            assert server.process is not None
            yield server.url, server.process.pid, model
        finally:
            server.stop()


def in_vocabulary_seeds(url: str, count: int, tokens: int, tool_choice: str) -> list[int]:
    """`count` seeds whose sampled output stays inside Qwen3's vocabulary: the random
    model also samples the padding ids past it (151669..151935, about one token in
    600), which toolwire refuses as an engine error. Found by asking toolwire, once;
    greedy decoding is no way out (this model then repeats `\\n`, which streams no
    text)."""

    async def answer(session: aiohttp.ClientSession, seed: int) -> bool:
        body = {**chat_body(seed, tokens, tool_choice), "stream": False}
        del body["stream_options"]
        async with session.post(f"{url}/v1/chat/completions", json=body) as response:
            return response.status == 200

    async def screen(candidates: list[int]) -> list[int]:
        timeout = aiohttp.ClientTimeout(total=1800)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            good = await asyncio.gather(*(answer(session, s) for s in candidates))
        return [s for s, ok in zip(candidates, good, strict=True) if ok]

    seeds: list[int] = []
    start = 0
    while len(seeds) < count:
        batch_size = count - len(seeds) + count // 4 + 1
        seeds += asyncio.run(screen(list(range(start, start + batch_size))))
        start += batch_size
    print(f"seeds in the vocabulary: {count} of the first {start}")
    return seeds[:count]


def run_vllm(args: argparse.Namespace, report: dict[str, Any]) -> None:
    tool_choice = args.tool_choice or "none"
    with (
        vllm_server(args) as (url, api_pid, model),
        toolwire(url, model, args.toolwire_src) as (tw_url, tw_pid),
    ):
        seeds = in_vocabulary_seeds(tw_url, max(args.streams), args.tokens, tool_choice)

        def chat(n: int) -> list[dict[str, Any]]:
            return [chat_body(s, args.tokens, tool_choice) for s in seeds[:n]]

        direct = (f"{url}/v1/chat/completions", chat)
        through = (f"{tw_url}/v1/chat/completions", chat)
        pids = {"toolwire": tw_pid, "vllm_api": api_pid}
        for where, bodies in (direct, through):
            asyncio.run(batch(where, bodies(2), args.tokens, {}))
        settle(tw_pid)
        print(f"vLLM upstream: max_tokens {args.tokens}, tool_choice {tool_choice!r}")
        runs = alternate("vllm", args.streams, args.rounds, direct, through, args.tokens, pids)
        report["runs"] += [asdict(r) for r in runs]
        report["summary"] += summarize(runs, "vllm_api")


# -- the report ----------------------------------------------------------------------


def summarize(runs: list[Run], upstream_cpu: str) -> list[dict[str, Any]]:
    rows = []
    for count in sorted({r.streams for r in runs}):
        of = {
            p: [r for r in runs if r.streams == count and r.path == p]
            for p in ("direct", "toolwire")
        }
        med = lambda xs: statistics.median(xs)  # noqa: E731
        direct_rate = med([r.rate for r in of["direct"]])
        through_rate = med([r.rate for r in of["toolwire"]])
        row = {
            "upstream": runs[0].upstream,
            "streams": count,
            "direct_tokens_per_s": round(direct_rate, 1),
            "toolwire_tokens_per_s": round(through_rate, 1),
            "ratio": round(through_rate / direct_rate, 3),
            "direct_ttft_ms": round(med([t for r in of["direct"] for t in r.ttft]) * 1e3, 1),
            "toolwire_ttft_ms": round(med([t for r in of["toolwire"] for t in r.ttft]) * 1e3, 1),
            "toolwire_cpu_us_per_token": round(
                med([r.cpu_us_per_token("toolwire") for r in of["toolwire"]]), 1
            ),
            f"{upstream_cpu}_cpu_us_per_token_direct": round(
                med([r.cpu_us_per_token(upstream_cpu) for r in of["direct"]]), 1
            ),
            f"{upstream_cpu}_cpu_us_per_token_through": round(
                med([r.cpu_us_per_token(upstream_cpu) for r in of["toolwire"]]), 1
            ),
        }
        rows.append(row)
    return rows


def print_summary(rows: list[dict[str, Any]]) -> None:
    print(
        "\nupstream  streams  direct tok/s  toolwire tok/s  ratio  TTFT p50 direct/toolwire ms"
        "  toolwire µs/tok  upstream µs/tok direct/through"
    )
    for row in rows:
        up = "vllm_api" if row["upstream"] == "vllm" else "upstream"
        print(
            f"{row['upstream']:9s} {row['streams']:7d} {row['direct_tokens_per_s']:13.1f} "
            f"{row['toolwire_tokens_per_s']:15.1f} {row['ratio']:6.2f} "
            f"{row['direct_ttft_ms']:12.1f} / {row['toolwire_ttft_ms']:<10.1f} "
            f"{row['toolwire_cpu_us_per_token']:16.1f} "
            f"{row[f'{up}_cpu_us_per_token_direct']:10.1f} / "
            f"{row[f'{up}_cpu_us_per_token_through']:.1f}"
        )


def print_profile(title: str, summary: dict[str, Any]) -> None:
    print(f"\npy-spy, toolwire's process, {title} ({summary['samples']} samples), self time:")
    for name, share in summary["self_by_package"]:
        print(f"  {share * 100:5.1f}%  {name}")
    print("  by function:")
    for name, share in summary["self_by_function"]:
        print(f"  {share * 100:5.1f}%  {name}")
    print("  inside (self and callees):")
    for name, share in summary["inside_function"]:
        print(f"  {share * 100:5.1f}%  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--upstreams", nargs="+", choices=["scripted", "vllm"], default=["scripted", "vllm"]
    )
    parser.add_argument("--streams", nargs="+", type=int, default=[1, 8, 64])
    parser.add_argument("--tokens", type=int, default=128, help="output tokens per stream")
    parser.add_argument(
        "--rounds", type=int, default=5, help="direct/through pairs per stream count"
    )
    parser.add_argument("--pace", type=float, default=0.02, help="seconds between scripted events")
    parser.add_argument(
        "--tool-choice", choices=["none", "auto"], help="default: auto scripted, none vLLM"
    )
    parser.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"))
    parser.add_argument("--model-dir", type=Path, help="where the tiny Qwen3 is built (kept)")
    parser.add_argument("--vllm-url", help="a vLLM server already running (not stopped)")
    parser.add_argument("--vllm-pid", type=int, help="its API-server process, with --vllm-url")
    parser.add_argument("--toolwire-src", default=str(ROOT / "src"), help="toolwire's PYTHONPATH")
    parser.add_argument("--profile", type=Path, help="py-spy the scripted runs, raw stacks here")
    parser.add_argument("--json", type=Path, help="write runs, summary and profiles here")
    parser.add_argument("--serve-scripted", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_scripted:
        serve_scripted(args.serve_scripted, args.tokens, args.pace)
        return 0
    report: dict[str, Any] = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "runs": [],
        "summary": [],
        "profiles": {},
    }
    if "scripted" in args.upstreams:
        run_scripted(args, report)
    if "vllm" in args.upstreams:
        run_vllm(args, report)
    print_summary(report["summary"])
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
