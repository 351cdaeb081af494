"""What toolwire adds in front of a real vLLM: startup, tokens/s, latency per request and token.

Run in .venv-vllm (`make test-vllm` builds it): `python -m bench.vllm_overhead
[--requests 6] [--tokens 128]`. It builds the tiny random-weight Qwen3
(`tests/tiny_qwen3.py`), starts vLLM's CPU server (`tests/vllm_rig.py`, timing it to
a healthy `/health`), serves `toolwire serve --engine vllm` in front of it (in this
process, on a thread), and times, request by request and alternating between the two:

* direct: vLLM's `/v1/completions` streamed, with exactly the body toolwire sends (the
  rendered prompt ids, `return_token_ids`), the client reading every event;
* toolwire: `/v1/chat/completions` streamed through toolwire (prompt rendering, the
  parser per delta, SSE chunks), `tool_choice="none"` so both generate free text.

`ignore_eos` is not sent; the random model almost never samples its end token, and
every run's token count is printed. Figures from a shared machine vary run to run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from tests.conftest import data_dir
from tests.serving import running
from tests.tiny_qwen3 import build
from tests.vllm_rig import SERVED, VllmServer

from toolwire import load_tokenizer, render_prompt
from toolwire.backends.base import Generation
from toolwire.backends.vllm import VllmEngine, completion_body
from toolwire.server.app import create_app
from toolwire.server.pipeline import Limits

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolwire-vllm-") as tmp:
        model = build(Path(tmp) / "tiny-qwen3", data_dir() / "tokenizers" / "qwen3")
        server = VllmServer.start(model, Path(tmp) / "vllm.log")
        try:
            print(f"vLLM startup (process start to healthy): {server.startup_seconds:.1f} s")
            tok = load_tokenizer(model)
            engine = VllmEngine(server.url, model=SERVED, tokenizer=tok, format="qwen3")
            prompt = render_prompt(MESSAGES, tok, tools=TOOLS, format="qwen3")
            with running(create_app(engine, Limits())) as front, httpx.Client(timeout=600) as c:
                rows: dict[str, list[tuple[float, float, int]]] = {"direct": [], "toolwire": []}
                for n in range(args.requests + 1):  # the first pair warms both paths up
                    direct = completion_body(
                        Generation(prompt_ids=prompt.ids, max_tokens=args.tokens, seed=n), SERVED
                    )
                    chat = {
                        "model": SERVED,
                        "messages": MESSAGES,
                        "tools": TOOLS,
                        "tool_choice": "none",
                        "max_tokens": args.tokens,
                        "seed": n,
                        "stream": True,
                        "stream_options": {"include_usage": True},
                    }
                    d = _stream(c, f"{server.url}/v1/completions", direct)
                    t = _stream(c, f"{front}/v1/chat/completions", chat)
                    if n:
                        rows["direct"].append(d)
                        rows["toolwire"].append(t)
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
            per_token = [(t[1] / t[2]) - (d[1] / d[2]) for d, t in pairs]
            first = [t[0] - d[0] for d, t in pairs]
            print(
                f"toolwire adds per request: median {statistics.median(per_request) * 1000:.0f} "
                f"ms; per token: median {statistics.median(per_token) * 1e6:.0f} us; "
                f"to the first token: median {statistics.median(first) * 1000:.0f} ms"
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
