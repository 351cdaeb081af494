"""What toolwire adds in front of a real vLLM: startup, tokens/s, latency per request and token.

Run in .venv-vllm (`make test-vllm` builds it): `python -m bench.vllm_overhead
[--requests 6] [--tokens 128]`. It builds the tiny random-weight Qwen3
(`tests/tiny_qwen3.py`), starts vLLM's CPU server (`tests/vllm_rig.py`, timing it to
a healthy `/health`), serves `toolwire serve --engine vllm` in front of it (in this
process, on a thread), and times, request by request and alternating between the two:

* direct: vLLM's `/v1/completions` streamed, with exactly the body toolwire sends (the
  rendered prompt ids, `return_token_ids`), the client reading every event;
* toolwire: `/v1/chat/completions` streamed through `toolwire serve --engine vllm`
  (its own process: prompt rendering, the parser per delta, SSE chunks),
  `tool_choice="none"` so both generate free text.

Wall-clock figures on a loaded machine are dominated by vLLM's own speed, so toolwire's
cost is also measured as what it is: the CPU time of the `toolwire serve` process
(`/proc/PID/stat`) per request, at two output lengths, split into a per-request and a
per-token part by a straight line through the two.

`ignore_eos` is not sent; the random model almost never samples its end token, and
every run's token count is printed. Figures from a shared machine vary run to run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from tests.data import ROOT, data_dir
from tests.tiny_qwen3 import build
from tests.vllm_rig import SERVED, VllmServer, free_port

from toolwire import load_tokenizer, render_prompt
from toolwire.backends.base import Generation
from toolwire.backends.vllm import completion_body

MESSAGES = [{"role": "user", "content": "Write a long story about a lighthouse."}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "set_mode",
            "parameters": {
                "type": "object",
                "properties": {"mode": {"type": "string", "enum": ["on", "off"]}},
            },
        },
    }
]


def _stream(client: httpx.Client, url: str, body: dict[str, Any]) -> tuple[float, float, int]:
    """(seconds to the first event with output, total seconds, output tokens)."""
    start = time.perf_counter()
    first = 0.0
    tokens = 0
    with client.stream("POST", url, json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            payload = httpx.Response(200, content=line[5:]).json()
            usage = payload.get("usage")
            if usage:
                tokens = usage["completion_tokens"]
            for choice in payload.get("choices") or []:
                ids = choice.get("token_ids")
                if ids is not None:
                    tokens += len(ids) if "text" in choice else 0
                if not first and (ids or (choice.get("delta") or {}).get("content")):
                    first = time.perf_counter() - start
    return first, time.perf_counter() - start, tokens


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _front(vllm_url: str, model: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "toolwire.cli", "serve", "--engine", "vllm"]
    command += ["--upstream", vllm_url, "--tokenizer", str(model), "--model", SERVED]
    command += ["--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(command, env=env)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("toolwire serve did not start")


def _chat(n: int, tokens: int) -> dict[str, Any]:
    return {
        "model": SERVED,
        "messages": MESSAGES,
        "tools": TOOLS,
        "tool_choice": "none",
        "max_tokens": tokens,
        "seed": n,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolwire-vllm-") as tmp:
        model = build(Path(tmp) / "tiny-qwen3", data_dir() / "tokenizers" / "qwen3")
        server = VllmServer.start(model, Path(tmp) / "vllm.log")
        front, front_url = _front(server.url, model)
        try:
            print(f"vLLM startup (process start to healthy): {server.startup_seconds:.1f} s")
            tok = load_tokenizer(model)
            prompt = render_prompt(MESSAGES, tok, tools=TOOLS, format="qwen3")
            rows: dict[str, list[tuple[float, float, int]]] = {"direct": [], "toolwire": []}
            cpu: dict[int, list[float]] = {16: [], args.tokens: []}
            with httpx.Client(timeout=600) as c:
                for n in range(args.requests + 1):  # the first pair warms both paths up
                    direct = completion_body(
                        Generation(prompt_ids=prompt.ids, max_tokens=args.tokens, seed=n), SERVED
                    )
                    d = _stream(c, f"{server.url}/v1/completions", direct)
                    before = _cpu(front.pid)
                    t = _stream(c, f"{front_url}/v1/chat/completions", _chat(n, args.tokens))
                    spent = _cpu(front.pid) - before
                    before = _cpu(front.pid)
                    short = _stream(c, f"{front_url}/v1/chat/completions", _chat(n, 16))
                    spent_short = _cpu(front.pid) - before
                    if n:
                        rows["direct"].append(d)
                        rows["toolwire"].append(t)
                        cpu[args.tokens].append(spent / t[2] * args.tokens)
                        cpu[16].append(spent_short / short[2] * 16)
            for name, runs in rows.items():
                rate = [tokens / total for _, total, tokens in runs]
                print(
                    f"{name:9s} tokens/s median {statistics.median(rate):6.1f} "
                    f"(min {min(rate):.1f}, max {max(rate):.1f}); first token median "
                    f"{statistics.median(r[0] for r in runs) * 1000:.0f} ms; "
                    f"tokens {[r[2] for r in runs]}"
                )
            pairs = list(zip(rows["direct"], rows["toolwire"], strict=True))
            per_request = [t[1] - d[1] for d, t in pairs]
            first = [t[0] - d[0] for d, t in pairs]
            print(
                f"wall clock, toolwire minus direct: per request median "
                f"{statistics.median(per_request) * 1000:.0f} ms; to the first token median "
                f"{statistics.median(first) * 1000:.0f} ms"
            )
            long_cpu, short_cpu = statistics.median(cpu[args.tokens]), statistics.median(cpu[16])
            per_token = (long_cpu - short_cpu) / (args.tokens - 16)
            fixed = short_cpu - 16 * per_token
            print(
                f"toolwire serve CPU: {short_cpu * 1000:.1f} ms per 16-token request, "
                f"{long_cpu * 1000:.1f} ms per {args.tokens}-token request -> "
                f"{fixed * 1000:.1f} ms per request + {per_token * 1e6:.0f} us per token"
            )
        finally:
            front.terminate()
            front.wait(timeout=30)
            server.stop()


if __name__ == "__main__":
    main()
