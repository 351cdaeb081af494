"""Mutation fuzz of every format: real outputs, damaged, parsed under every option set.

Each case takes a BFCL ground-truth output (calls rendered natively with prose and,
where the format has it, reasoning; tokenized with the format's test tokenizer) and
damages it: id mutations (delete, duplicate, swap, truncate, insert a delimiter or
special id, insert a random id) and text mutations re-encoded with genuine delimiters
(a raw tab or newline in a key or value, quotes, brackets, nesting far beyond
`nesting.MAX_DEPTH`, a delimiter's text). It is then parsed under one option set drawn
from held/streamed x strict x tool_choice (auto, none, required, named) x tools (the
case's, none given, none declared) x parallel_tool_calls, and in several chunkings
(all at once, one id per delta, random partitions).

What must hold, whatever the damage:

* only events come out, or `MalformedOutput` when strict: no other exception;
* the outcome is chunk-invariant: the same merged events, or the same error, in every
  chunking;
* events are well formed (`Message.from_events` accepts them; text events are never
  empty); calls are to tools the request allows; a held call's arguments, and a
  streamed call's whose `ToolCallEnd.valid` is True, are a JSON object.

Bounded for CI: `CASES` cases per format (fixed seeds); `TOOLWIRE_FUZZ=N` runs N.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from functools import cache
from typing import Any

import pytest

from tests import bfcl, cases
from toolwire import MalformedOutput, Message, Parser, Tokenizer, formats
from toolwire.events import Content, Event, Reasoning, ToolCallEnd, merge
from toolwire.nesting import MAX_DEPTH
from toolwire.tools import tool_function

CASES = int(os.environ.get("TOOLWIRE_FUZZ", "120"))

#: Text inserted by the text mutations: control characters inside JSON strings and
#: keys, stray structure, nesting deeper than the limit, quotes of every format.
_SNIPPETS = [
    "\t",
    "\n",
    '"',
    "'",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\\",
    "=",
    "(",
    ")",
    "<",
    ">",
    '"a\tb"',
    '{"k\ny": 1}',
    "[" * (MAX_DEPTH + 50),
    "{" * 3 + "]" * 2,
    '"' + "[" * (MAX_DEPTH * 10),
    "\ud800",
    "\x00",
    "null",
    "1e999",
    "-",
]


@cache
def _bases(name: str) -> list[tuple[list[int], list[dict[str, Any]], str]]:
    """Real outputs of one format: (ids, tools, first tool's name), 12 BFCL cases."""
    fmt = formats.get(name)
    tok = cases.tokenizer(name)
    rng = random.Random(f"fuzz-{name}")
    reasoning = {"reasoning": cases.REASONING} if fmt.reasoning or fmt.render_text else {}
    out = []
    for category in ("multiple", "parallel", "parallel_multiple"):
        for _, tools, calls in rng.sample(bfcl.load(category), 4):
            text = fmt.render_output(content=cases.CONTENT, calls=calls, **reasoning)
            out.append((tok.encode(text), tools, str(calls[0][0])))
    return out


def _hot_ids(name: str, tok: Tokenizer) -> list[int]:
    fmt = formats.get(name)
    delimiters = {i for d in fmt.delimiters for i in tok.encode(d)}
    return sorted(delimiters | set(sorted(tok.special_ids)[:32]))


def _mutate(name: str, tok: Tokenizer, ids: list[int], rng: random.Random) -> tuple[list[int], str]:
    """One to three mutations of `ids`; returns the ids and what was done."""
    done = []
    ids = list(ids)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["delete", "duplicate", "swap", "truncate", "hot", "random", "text"])
        if not ids:
            ids = [rng.randrange(tok.vocab_size)]
        at = rng.randrange(len(ids))
        end = min(len(ids), at + rng.randint(1, 8))
        if kind == "delete":
            del ids[at:end]
        elif kind == "duplicate":
            ids[at:at] = ids[at:end]
        elif kind == "swap":
            other = rng.randrange(len(ids))
            ids[at], ids[other] = ids[other], ids[at]
        elif kind == "truncate":
            ids = ids[:at]
        elif kind == "hot":
            ids.insert(at, rng.choice(_hot_ids(name, tok)))
        elif kind == "random":
            ids.insert(at, rng.randrange(tok.vocab_size))
        else:  # text: decode, damage, re-encode with genuine delimiters
            text = tok.decode(ids)
            pos = rng.randrange(len(text) + 1)
            snippet = rng.choice(_SNIPPETS)
            if snippet == "\ud800":  # a lone surrogate cannot be encoded: an odd byte
                snippet = "\ufffd"
            cut = rng.choice([0, 0, 1, 3])
            text = text[:pos] + snippet + text[pos + cut :]
            ids = tok.encode(text)
            kind = f"text@{pos}:{snippet[:12]!r}"
        done.append(kind)
    return ids, ",".join(done)


def _options(
    rng: random.Random, tools: list[dict[str, Any]], first: str
) -> tuple[dict[str, Any], frozenset[str] | None]:
    """One option set and the names a call may have (None: any)."""
    given = rng.choice(["case", "case", "none given", "none declared"])
    declared: list[dict[str, Any]] | None = {"case": tools, "none given": None}.get(given, [])
    choice: Any = rng.choice(["auto", "auto", "none", "required", "named"])
    names: frozenset[str] | None = (
        None if declared is None else frozenset(tool_function(t)["name"] for t in declared)
    )
    if choice == "named":
        if declared is None or not declared:
            choice = "auto"
        else:
            choice = {"type": "function", "function": {"name": first}}
            names = frozenset({first})
    if choice == "none":
        names = frozenset()
    options = {
        "tools": declared,
        "tool_choice": choice,
        "strict": rng.random() < 0.3,
        "stream_arguments": rng.random() < 0.5,
        "parallel_tool_calls": rng.random() < 0.8,
    }
    return options, names


def _outcome(
    name: str, tok: Tokenizer, ids: Sequence[int], cuts: Sequence[int], options: dict[str, Any]
) -> list[Event] | str:
    """Merged events, or the name of the typed error raised."""
    parser = Parser(name, tok, **options)
    events: list[Event] = []
    start = 0
    try:
        for cut in [*cuts, len(ids)]:
            events += parser.feed(ids[start:cut])
            start = cut
        events += parser.finish()
    except MalformedOutput:
        assert options["strict"], "MalformedOutput without strict=True"
        return "MalformedOutput"
    return merge(events)


def _check_events(events: list[Event], options: dict[str, Any], names: Any) -> None:
    for event in events:
        if isinstance(event, Content | Reasoning):
            assert event.text
    msg = Message.from_events(events)
    ends = {e.index: e.valid for e in events if isinstance(e, ToolCallEnd)}
    for index, call in enumerate(msg.tool_calls):
        if names is not None:
            assert call.name in names, call.name
        if not options["stream_arguments"]:
            assert ends[index], "a held call always ends valid"
        if ends[index]:
            assert isinstance(json.loads(call.arguments), dict), call.arguments
    if not options["parallel_tool_calls"]:
        assert len(msg.tool_calls) <= 1


@pytest.mark.parametrize("name", formats.names())
def test_mutated_outputs_give_only_events_and_are_chunk_invariant(name: str) -> None:
    tok = cases.tokenizer(name)
    bases = _bases(name)
    for case in range(CASES):
        rng = random.Random(f"{name}-{case}")
        base, tools, first = rng.choice(bases)
        ids, how = _mutate(name, tok, base, rng)
        options, names = _options(rng, tools, first)
        where = f"{name} case {case} ({how}; {options})"
        whole = _outcome(name, tok, ids, [], options)
        if not isinstance(whole, str):
            _check_events(whole, options, names)
        partitions = [list(range(1, len(ids)))]
        for _ in range(2):
            k = rng.randint(1, max(1, min(6, len(ids))))
            partitions.append(sorted(rng.sample(range(len(ids) + 1), k)))
        for cuts in partitions:
            assert _outcome(name, tok, ids, cuts, options) == whole, (where, cuts)
