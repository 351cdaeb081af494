"""Streamed-arguments benchmark: `stream_arguments=True` against held mode on long calls.

    python -m bench.stream_args [--data DIR] [--formats hermes qwen3_coder]
                                [--lengths 1300 5000 20000] [--repeat 3]
                                [--text prose code]

One call per format whose string argument is about `--lengths` tokens of `--text`:
`prose` (the long-call stream of `bench.parsers`: a few dozen words, so its tokens
repeat more than a real call's) or `code` (this Python's own `argparse.py`, the file
a `write_file` call writes, cut to the length), rendered natively and tokenized with the format's
real tokenizer, fed one id per delta plus `finish()`, held mode (the default) and
`stream_arguments=True`. Printed per format, length and mode: µs per token (best of
`--repeat` runs, CPU time of this process) and the peak of memory allocated while the
stream is parsed (`tracemalloc`, a separate run, the parser built inside it, events
dropped as they come), beside the argument text's size; and the streamed/held time ratio.
"""

from __future__ import annotations

import argparse
import argparse as _argparse  # (its source is the `code` text)
import os
import time
import tracemalloc
from pathlib import Path

from bench.parsers import Stream, file_call, long_stream
from peers.profiles import profile
from peers.vocab import tokenizer_for
from toolwire import Message, Parser
from toolwire.events import ToolCallBegin
from toolwire.tokenizer import Tokenizer


def code_stream(fmt: str, tok: Tokenizer, tokens: int) -> Stream:
    """`long_stream`'s call with `argparse.py`'s first `tokens` tokens (repeated if
    short) as the file's content."""
    source = Path(_argparse.__file__).read_text()
    ids = tok.encode(source)
    while len(ids) < tokens:
        ids += ids
    return file_call(fmt, tok, "a.py", tok.decode(ids[:tokens]))


def run(fmt: str, tok: Tokenizer, ids: list[int], tools: list, streamed: bool) -> Message:
    parser = Parser(fmt, tok, tools=tools, stream_arguments=streamed)
    events = []
    for token in ids:
        events += parser.feed([token])
    events += parser.finish()
    return Message.from_events(events)


def names(fmt: str, tok: Tokenizer, ids: list[int], tools: list, streamed: bool) -> list[str]:
    """The calls' names; events are dropped as they come, so only the parser's own
    memory is counted (a consumer keeping every fragment keeps the text once more)."""
    parser = Parser(fmt, tok, tools=tools, stream_arguments=streamed)
    out = []
    for token in ids:
        out += [e.name for e in parser.feed([token]) if isinstance(e, ToolCallBegin)]
    return out + [e.name for e in parser.finish() if isinstance(e, ToolCallBegin)]


def timed(
    fmt: str, tok: Tokenizer, ids: list[int], tools: list, streamed: bool, repeat: int
) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run(fmt, tok, ids, tools, streamed)
        best = min(best, time.process_time() - start)
    return best


def peak(fmt: str, tok: Tokenizer, ids: list[int], tools: list, streamed: bool) -> int:
    tracemalloc.start()
    try:
        called = names(fmt, tok, ids, tools, streamed)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        if called != ["write_file"]:
            raise SystemExit(f"{fmt}: the benchmark call did not parse")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = os.environ.get("TOOLWIRE_TEST_DATA") or str(Path.cwd().parent / "shared")
    ap.add_argument("--data", type=Path, default=Path(default))
    ap.add_argument("--formats", nargs="+", default=["hermes", "qwen3_coder"])
    ap.add_argument("--lengths", nargs="+", type=int, default=[1300, 5000, 20000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--text", nargs="+", choices=["prose", "code"], default=["prose", "code"])
    args = ap.parse_args(argv)
    print(
        "| format | text | tokens | argument kB | held µs/tok | streamed µs/tok | ratio "
        "| held peak MB | streamed peak MB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for fmt in args.formats:
        tok = tokenizer_for(profile(fmt).tokenizer, args.data)
        for kind, length in ((k, n) for k in args.text for n in args.lengths):
            stream = long_stream if kind == "prose" else code_stream
            ids, tools = stream(fmt, tok, length)
            text_kb = len(tok.decode(ids).encode()) / 1e3
            run(fmt, tok, ids[:200], tools, True)  # warm-up: tables built once
            held = timed(fmt, tok, ids, tools, False, args.repeat) / len(ids) * 1e6
            streamed = timed(fmt, tok, ids, tools, True, args.repeat) / len(ids) * 1e6
            mem = [peak(fmt, tok, ids, tools, mode) / 1e6 for mode in (False, True)]
            print(
                f"| {fmt} | {kind} | {len(ids)} | {text_kb:.0f} | {held:.2f} | {streamed:.2f} "
                f"| {streamed / held:.2f}x | {mem[0]:.2f} | {mem[1]:.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
