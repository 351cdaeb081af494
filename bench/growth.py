"""Growth benchmark: does a held call cost linear time in its length, for every format?

    python -m bench.growth [--data DIR] [--formats F ...] [--items 500 2000 8000]

One call per format whose arguments hold many small values (an array of numbers and
short strings, which puts structure between every few tokens: the case where a
converter that re-reads the rest of its buffer at each step turns quadratic), rendered
natively and tokenized with the format's conformance tokenizer. The ids are fed one per
delta, held mode (the default) and `stream_arguments=True`; best of `--repeat` runs,
in CPU time of this process (so other jobs on a shared machine inflate it less).

Printed per format and mode: µs per token at each size, and the growth: the time ratio
of the largest to the smallest size divided by their token ratio (1.0 is linear; a
quadratic cost grows with the size ratio, 16 for 16x the items).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from peers.profiles import profile
from peers.vocab import tokenizer_for
from toolwire import Message, Parser, formats
from toolwire.tokenizer import Tokenizer

TOOL = {
    "type": "function",
    "function": {
        "name": "record",
        "parameters": {
            "type": "object",
            "properties": {"values": {"type": "array"}, "labels": {"type": "array"}},
        },
    },
}


def stream(fmt: str, tok: Tokenizer, items: int) -> list[int]:
    values = [i % 997 for i in range(items)]
    labels = [f"n{i % 89}" for i in range(items // 4)]
    text = formats.get(fmt).render_output(calls=[("record", {"values": values, "labels": labels})])
    return tok.encode(text)


def timed(fmt: str, tok: Tokenizer, ids: list[int], stream_arguments: bool, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        parser = Parser(fmt, tok, tools=[TOOL], stream_arguments=stream_arguments)
        events = []
        for token in ids:
            events += parser.feed([token])
        events += parser.finish()
        best = min(best, time.process_time() - start)
    calls = Message.from_events(events).tool_calls
    if [c.name for c in calls] != ["record"]:
        raise SystemExit(f"{fmt}: the benchmark call did not parse ({len(calls)} calls)")
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    default = Path(
        os.environ.get("TOOLWIRE_TEST_DATA", Path(__file__).parent.parent.parent / "shared")
    )
    parser.add_argument("--data", type=Path, default=default)
    parser.add_argument("--formats", nargs="*", default=formats.names())
    parser.add_argument("--items", nargs="*", type=int, default=[500, 2000, 8000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print("| format | mode | " + " | ".join(f"{n} items" for n in args.items) + " | growth |")
    print("|---|---|" + "---:|" * (len(args.items) + 1))
    for fmt in args.formats:
        try:
            tok = tokenizer_for(profile(fmt).tokenizer, args.data)
        except Exception as exc:  # a tokenizer this machine cannot load: say so, go on
            print(f"| {fmt} | skipped: {exc} |")
            continue
        sizes = [stream(fmt, tok, n) for n in args.items]
        timed(fmt, tok, sizes[0], False, 1)  # warm-up: the tokenizer's tables are built once
        for mode in (False, True):
            costs: list[tuple[int, float]] = [
                (len(ids), timed(fmt, tok, ids, mode, args.repeat)) for ids in sizes
            ]
            per_token = [f"{1e6 * t / n:.2f} µs/tok ({n} tok)" for n, t in costs]
            (n0, t0), (n1, t1) = costs[0], costs[-1]
            growth = (t1 / t0) / (n1 / n0)
            name = "stream" if mode else "held"
            print(f"| {fmt} | {name} | " + " | ".join(per_token) + f" | {growth:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
