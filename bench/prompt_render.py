"""Time `render_prompt` on a 20-message conversation with Qwen3's tokenizer and template.

    PYTHONPATH=src:. python -m bench.prompt_render [--repeat N] [--data DIR]

Two conversations: plain text, and the same with delimiter text (`</think>`,
`<tool_call>`, `<|im_start|>`) in every message, which isolation hides from the
template and spells from ordinary tokens. Prints the minimum and the median CPU time
of this process per render (`time.process_time`: steadier than wall time on a shared
machine), isolation on and off.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from toolwire import load_tokenizer, render_prompt

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]


def conversation(extra: str) -> list[dict[str, Any]]:
    """20 messages: a system prompt, then user / assistant-call / tool / answer rounds."""
    out: list[dict[str, Any]] = [{"role": "system", "content": f"You are terse.{extra}"}]
    for turn in range(5):
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": f"C{turn}"})},
        }
        out += [
            {"role": "user", "content": f"Weather in city {turn}, please.{extra}"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": f"sunny {turn}{extra}"},
            {"role": "assistant", "content": f"It is sunny in city {turn}.{extra}"},
        ]
    out.append({"role": "user", "content": f"Thanks!{extra}"})
    return out[:20]


def timed(messages: list[dict[str, Any]], tok: Any, repeat: int, isolate: bool) -> list[float]:
    render_prompt(messages, tok, tools=TOOLS, format="qwen3", isolate=isolate)  # warm caches
    out = []
    for _ in range(repeat):
        start = time.process_time()
        render_prompt(messages, tok, tools=TOOLS, format="qwen3", isolate=isolate)
        out.append(time.process_time() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    default = os.environ.get("TOOLWIRE_TEST_DATA") or str(Path.cwd().parent / "shared")
    parser.add_argument("--data", default=default)
    args = parser.parse_args()
    tok = load_tokenizer(Path(args.data) / "tokenizers" / "qwen3")
    cases = {"plain text": "", "delimiter text": " See </think> and <tool_call> <|im_start|>."}
    for label, extra in cases.items():
        messages = conversation(extra)
        assert len(messages) == 20
        for isolate in (True, False):
            times = sorted(timed(messages, tok, args.repeat, isolate))
            low, p50 = times[0] * 1e3, statistics.median(times) * 1e3
            print(f"{label:15s} isolate={isolate!s:5s}  min {low:.3f} ms  median {p50:.3f} ms")


if __name__ == "__main__":
    main()
