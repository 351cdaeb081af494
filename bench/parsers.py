"""Parser benchmark: toolwire vs vLLM's and SGLang's parsers on the same token streams.

Run with the peers' interpreter (`make bench` creates `.venv-bench` and runs this), so
every implementation is measured in one process, one run::

    .venv-bench/bin/python -m bench.parsers [--data DIR] [--formats F ... | --all]
                                            [--lengths N ...] [--bfcl N] [--repeat R]

By default five families with a peer on each side (`SAMPLE`), 50 BFCL outputs each,
and the long call at 1k and 10k tokens (about ten minutes on two cores); `--all` takes
every format a peer implements and `--lengths 1000 10000 100000` the 100k-token call
(together, over an hour: SGLang's and vLLM's costs grow with the call).

Streams: BFCL calls (parallel and multiple categories) rendered natively with prose,
tokenized with the real tokenizer; and one call whose `content` argument is 1k, 10k
and 100k tokens long. Each stream is fed one id per delta and 8 ids per delta.

What is timed:

* toolwire: `Parser(...).feed(delta_ids)` per delta plus `finish()`: parsing *and*
  incremental detokenization (toolwire detokenizes internally). Held mode (default)
  and `stream_arguments=True`.
* vLLM / SGLang: only their parser calls (`ChatStreamProcessor.step`;
  `ReasoningParser` + `FunctionCallParser.parse_stream_chunk`/`parse_stream_end`),
  fed precomputed delta texts; their detokenization is not counted.
* detok: `tokenizers.decoders.DecodeStream(skip_special_tokens=False).step` per id,
  the incremental detokenization alone, for the parse+detok ratio.

Each figure is the best of `--repeat` runs, in µs per output token.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from tokenizers.decoders import DecodeStream

from peers.profiles import PeerSpec, profile
from peers.vocab import tokenizer_file, tokenizer_for
from peers.worker import SglangRunner, VllmRunner, load_hf_tokenizer
from toolwire import Parser, formats
from toolwire.check.corpus import bfcl_folder, load_bfcl
from toolwire.tokenizer import Tokenizer

LONG_TOOL = {
    "type": "function",
    "function": {
        "name": "write_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        },
    },
}
#: The default formats: one per family of syntax with both peers (JSON in tags, XML
#: parameters, DeepSeek's and Kimi's sections, GLM's argument tags).
SAMPLE = ["hermes", "qwen3_coder", "deepseek_v31", "kimi_k2", "glm47"]
PROSE = (
    "the parser reads token ids and decides structure by id while text flows through "
    "unchanged into arguments content reasoning with numbers 12 345 6789 and symbols "
    "such as braces {} brackets [] quotes and slashes / plus unicode café 日本 naïve"
)
WORDS = PROSE.split()

Stream = tuple[list[int], list[dict[str, Any]]]  # ids, tools


def long_text(tok: Tokenizer, tokens: int, seed: int = 0) -> str:
    """Prose of roughly `tokens` tokens (checked by encoding)."""
    rng = random.Random(seed)
    words: list[str] = []
    text = ""
    while True:
        words += [rng.choice(WORDS) for _ in range(max(64, tokens // 4))]
        text = " ".join(words)
        if len(tok.encode(text)) >= tokens:
            return text


def long_stream(fmt: str, tok: Tokenizer, tokens: int) -> Stream:
    return file_call(fmt, tok, "a.txt", long_text(tok, tokens))


def file_call(fmt: str, tok: Tokenizer, path: str, body: str) -> Stream:
    """One `write_file` call of `body`, rendered natively after a line of content."""
    text = formats.get(fmt).render_output(
        content="Writing the file now.", calls=[("write_file", {"path": path, "content": body})]
    )
    return tok.encode(text), [LONG_TOOL]


def bfcl_streams(fmt: str, tok: Tokenizer, data: Path, count: int) -> list[Stream]:
    folder = bfcl_folder(None, data)
    entries = load_bfcl(folder, "parallel")[:count] + load_bfcl(folder, "multiple")[:count]
    spec = formats.get(fmt)
    out = []
    for entry in entries:
        text = spec.render_output(content="Let me check.", calls=entry.calls)
        out.append((tok.encode(text), entry.tools))
    return out


def chunks(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def time_toolwire(fmt: str, tok: Tokenizer, streams: list[Stream], size: int, **kw: Any) -> float:
    total = 0.0
    for ids, tools in streams:
        parser = Parser(fmt, tok, tools=tools, **kw)
        deltas = chunks(ids, size)
        start = time.perf_counter()
        for delta in deltas:
            parser.feed(delta)
        parser.finish()
        total += time.perf_counter() - start
    return total


def time_detok(tok: Tokenizer, streams: list[Stream]) -> float:
    backend = tok.backend
    total = 0.0
    for ids, _ in streams:
        stream = DecodeStream(skip_special_tokens=False)
        step = stream.step
        start = time.perf_counter()
        for i in ids:
            step(backend, i)
        total += time.perf_counter() - start
    return total


def delta_texts(tok: Tokenizer, deltas: list[list[int]]) -> list[str]:
    """Each delta's text from an incremental detokenizer, special tokens kept (every
    peer is fed the same texts)."""
    stream = DecodeStream(skip_special_tokens=False)
    backend = tok.backend
    return ["".join(stream.step(backend, i) or "" for i in delta) for delta in deltas]


def time_peer(runner: Any, tok: Tokenizer, streams: list[Stream], size: int) -> float:
    total = 0.0
    for ids, tools in streams:
        deltas = chunks(ids, size)
        texts = delta_texts(tok, deltas)
        _, took = runner.stream(tools, texts, deltas)
        total += took
    return total


def best(fn: Callable[[], float], repeat: int) -> float:
    return min(fn() for _ in range(repeat))


def peers_for(fmt: str, data: Path) -> dict[str, Any]:
    """Runner objects for the peers that implement `fmt` (absent when they cannot run)."""
    prof = profile(fmt)
    out: dict[str, Any] = {}
    specs: dict[str, tuple[PeerSpec | None, Any]] = {
        "vllm": (prof.vllm, VllmRunner),
        "sglang": (prof.sglang, SglangRunner),
    }
    for name, (spec, cls) in specs.items():
        if spec is None:
            continue
        try:
            hf = load_hf_tokenizer(str(tokenizer_file(prof.tokenizer, data)))
            runner = cls(spec.__dict__, hf, formats.get(fmt).starts_in_reasoning)
            out[f"{name} {spec.tool}"] = runner
        except Exception as exc:
            print(f"  ({name} cannot run {fmt}: {type(exc).__name__}: {exc})")
    return out


def measure(
    fmt: str, tok: Tokenizer, streams: list[Stream], peers: dict[str, Any], size: int, repeat: int
) -> dict[str, float]:
    """µs per token for each implementation on `streams` fed `size` ids per delta."""
    tokens = sum(len(ids) for ids, _ in streams)
    times = {
        "toolwire": best(lambda: time_toolwire(fmt, tok, streams, size), repeat),
        "toolwire stream_arguments": best(
            lambda: time_toolwire(fmt, tok, streams, size, stream_arguments=True), repeat
        ),
    }
    for name, runner in peers.items():
        try:
            times[name] = best(lambda r=runner: time_peer(r, tok, streams, size), repeat)
        except Exception as exc:
            print(f"  ({name} failed on {fmt}: {type(exc).__name__}: {exc})")
    return {k: v / tokens * 1e6 for k, v in times.items()}


def report_row(label: str, us: dict[str, float]) -> None:
    peers = {k: v for k, v in us.items() if not k.startswith("toolwire")}
    fastest = min(peers.values()) if peers else None
    cells = "  ".join(f"{k} {v:8.2f}" for k, v in us.items())
    ratio = f"  faster peer / toolwire = {fastest / us['toolwire']:.1f}x" if fastest else ""
    print(f"{label:34s} {cells}{ratio}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = os.environ.get("TOOLWIRE_TEST_DATA") or str(Path.cwd().parent / "shared")
    ap.add_argument("--data", default=default)
    ap.add_argument("--formats", nargs="+", default=SAMPLE, help=f"formats (default: {SAMPLE})")
    ap.add_argument("--all", action="store_true", help="every format a peer implements")
    ap.add_argument("--long-formats", nargs="+", default=["hermes", "qwen3_coder"])
    ap.add_argument("--lengths", nargs="+", type=int, default=[1000, 10000])
    ap.add_argument("--bfcl", type=int, default=50, help="BFCL entries per category")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget", type=float, default=120.0, help="seconds a peer run may take")
    args = ap.parse_args()
    data = Path(args.data)
    os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(data / "tokenizers" / "gpt_oss"))
    import logging

    logging.disable(logging.CRITICAL)
    names = args.formats
    if args.all:
        names = [f for f in formats.names() if profile(f).vllm or profile(f).sglang]
    print("µs per output token (lower is better). toolwire: parse + its own incremental")
    print("detokenization; peers: parser calls only (detokenization excluded).\n")
    summary: dict[str, Any] = {}
    for fmt in names:
        tok = tokenizer_for(profile(fmt).tokenizer, data)
        peers = peers_for(fmt, data)
        streams = bfcl_streams(fmt, tok, data, args.bfcl)
        tokens = sum(len(ids) for ids, _ in streams)
        print(f"== {fmt}: {len(streams)} BFCL outputs, {tokens} tokens")
        for size in (1, 8):
            us = measure(fmt, tok, streams, peers, size, args.repeat)
            report_row(f"  {size} id/delta", us)
            summary[f"{fmt} bfcl {size}"] = us
        detok = best(partial(time_detok, tok, streams), args.repeat) / tokens * 1e6
        tw = summary[f"{fmt} bfcl 1"]["toolwire"]
        print(
            f"  DecodeStream alone {detok:.2f} µs/token; toolwire parse+detok = {tw / detok:.2f}x"
        )
        summary[f"{fmt} detok"] = {"detok": detok, "ratio": tw / detok}
        if fmt not in args.long_formats:
            continue
        spent: dict[str, float] = {}  # seconds at the previous length, 1 id/delta
        previous = 0
        for length in args.lengths:
            stream = [long_stream(fmt, tok, length)]
            n = len(stream[0][0])
            # Skip a peer whose cost here, projected quadratically from the previous
            # length, exceeds the budget.
            scale = (n / previous) ** 2 if previous else 1.0
            live = {k: r for k, r in peers.items() if spent.get(k, 0.0) * scale < args.budget}
            repeat = 1 if length >= 100000 else args.repeat
            for size in (1, 8):
                us = measure(fmt, tok, stream, live, size, repeat)
                report_row(f"  long call {n} tokens, {size} id/delta", us)
                summary[f"{fmt} long {length} {size}"] = us
                if size == 1:
                    spent = {k: v * n * 1e-6 for k, v in us.items()}
            previous = n
            detok = best(partial(time_detok, tok, stream), repeat) / n * 1e6
            tw = summary[f"{fmt} long {length} 1"]["toolwire"]
            print(f"  DecodeStream alone {detok:.2f} µs/token; parse+detok = {tw / detok:.2f}x")
            skipped = sorted(set(peers) - set(live))
            if skipped:
                print(f"  (not run at {n} tokens, projected over {args.budget:.0f} s: {skipped})")
        first, final = args.lengths[0], args.lengths[-1]
        for size in (1, 8):
            lo, hi = summary[f"{fmt} long {first} {size}"], summary[f"{fmt} long {final} {size}"]
            growth_of = {k: hi[k] / lo[k] * final / first for k in hi if k in lo}
            cells = "  ".join(f"{k} {v:.0f}x" for k, v in growth_of.items())
            print(f"  cost growth {first}->{final} tokens ({size} id/delta): {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
