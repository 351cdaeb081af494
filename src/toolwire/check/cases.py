"""Conformance cases: real BFCL calls rendered natively and tokenized with real ids.

Data flow::

    BFCL (tools, calls) --Format.render_output--> text --Tokenizer.encode--> ids
                                                      (delimiters=False: echoed markup)

Each `Case` carries the output ids, the request's tools, what a correct parser returns
(`Expected`; None for fuzz cases, where only the structural properties apply) and the
chunkings to feed it in. Groups (the `--cases` names):

* `bfcl`: each ground-truth call list rendered with no text, with prose, or with
  reasoning, in the basic chunkings.
* `echo`: adversarial outputs: the whole call spelled from sub-word ids (`echo`);
  prose, a genuine call, then an echoed one (`mixed`); spelled delimiters inside a
  genuine call's argument (`nested`); a call cut inside its arguments (`truncated`);
  a call to a tool the request did not declare (`undeclared`); special tokens inside
  prose (`special`).
* `chunking`: a few cases of each kind in every 2-split, a sample of 3-splits and
  random partitions.
* `fuzz`: random ids from the whole vocabulary, delimiters over-weighted.

Generation is deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolwire.check import sweeps
from toolwire.check.corpus import BfclCase
from toolwire.formats.spec import Format, RenderedCall
from toolwire.parser import Parser
from toolwire.tokenizer import Tokenizer

__all__ = ["GROUPS", "Case", "Expected", "generate"]

GROUPS = ("bfcl", "echo", "chunking", "fuzz")

_PROSE = "Let me look that up for you."
_AFTER = "The tool result quoted this text:"
_REASONING = "The user asks for {}. I will call the tool."
#: The one tool fuzz cases declare (their random calls name `f`).
_FUZZ_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
_MARK = "\x00"  # stands for ids spliced into a rendered text
_PLAIN_VALUE = re.compile(r"^[A-Za-z][A-Za-z0-9 ]{5,}$")


@dataclass(frozen=True)
class Expected:
    """What a correct parser returns for a case (content and reasoning as text)."""

    calls: list[RenderedCall]
    content: str = ""
    reasoning: str = ""


@dataclass
class Case:
    """One output to parse, with the request around it and the chunkings to use."""

    id: str
    kind: str
    format: str
    ids: list[int]
    tools: list[dict[str, Any]]
    expected: Expected | None
    #: Calls present only as spelled markup: none of them may become a call.
    echoed: list[RenderedCall] = field(default_factory=list)
    #: Text the output may legitimately show in content/reasoning (leak baseline).
    allowed: str = ""
    chunkings: list[list[int]] = field(default_factory=list)
    #: Delimiters that are consumed markup even around a call released as content
    #: (a format's section wrapper): conservation ignores them.
    markup: list[str] = field(default_factory=list)


def _string_arg(calls: Sequence[RenderedCall]) -> tuple[str, str] | None:
    for _, args in calls:
        for key, value in args.items():
            if isinstance(value, str) and _PLAIN_VALUE.match(value):
                return key, value
    return None


class _Builder:
    """Builds the cases of one format and tokenizer."""

    def __init__(self, fmt: Format, tok: Tokenizer, rng: random.Random) -> None:
        self.fmt = fmt
        self.tok = tok
        self.rng = rng
        self.prefilled = fmt.starts_in_reasoning
        self.gated = Parser(fmt, tok).gated

    def enc(self, text: str, *, spelled: bool = False) -> list[int]:
        return self.tok.encode(text, delimiters=not spelled)

    def fill(self, text: str, fills: Sequence[list[int]]) -> list[int]:
        """Encode `text`, replacing each `_MARK` in it by the next of `fills`."""
        pieces = text.split(_MARK)
        assert len(pieces) == len(fills) + 1, "one fill per mark"
        ids = self.enc(pieces[0])
        for fill, piece in zip(fills, pieces[1:], strict=True):
            ids += fill + self.enc(piece)
        return ids

    def case(
        self,
        kind: str,
        cid: str,
        ids: list[int],
        tools: list[dict[str, Any]],
        expected: Expected | None,
        **extra: Any,
    ) -> Case:
        allowed = extra.pop("allowed", None)
        if allowed is None and expected is not None:
            allowed = expected.content + "\n" + expected.reasoning
        return Case(
            id=f"{kind}/{cid}",
            kind=kind,
            format=self.fmt.name,
            ids=ids,
            tools=tools,
            expected=expected,
            allowed=allowed or "",
            chunkings=sweeps.basic(len(ids), self.rng),
            markup=list(self.fmt.section or ()),
            **extra,
        )

    def output(
        self, calls: Sequence[RenderedCall], content: str | None, reasoning: str | None
    ) -> tuple[str, Expected]:
        if self.prefilled and reasoning is None:
            reasoning = _REASONING.format("help")
        if self.fmt.reasoning is None and self.fmt.render_text is None:
            reasoning = None
        text = self.fmt.render_output(
            reasoning=reasoning, content=content, calls=calls, prefilled=self.prefilled
        )
        return text, Expected(list(calls), content or "", reasoning or "")

    # -- groups ----------------------------------------------------------------------

    def bfcl(self, entries: Sequence[BfclCase]) -> Iterator[Case]:
        for n, entry in enumerate(entries):
            variant = n % 3
            content = _PROSE if variant == 1 else None
            reasoning = _REASONING.format(entry.calls[0][0]) if variant == 2 else None
            text, expected = self.output(entry.calls, content, reasoning)
            yield self.case("bfcl", entry.id, self.enc(text), entry.tools, expected)

    def echo(self, entries: Sequence[BfclCase]) -> Iterator[Case]:
        for entry in entries:
            yield from self._adversarial(entry)

    def _adversarial(self, entry: BfclCase) -> Iterator[Case]:
        calls, tools, cid = entry.calls, entry.tools, entry.id
        first = [calls[0]]
        if self.gated:
            quoted = self.fmt.render(calls)
            text, expected = self.output([], _MARK, None)
            ids = self.fill(text, [self.enc(quoted, spelled=True)])
            yield self.case(
                "echo",
                cid,
                ids,
                tools,
                Expected([], quoted, expected.reasoning),
                echoed=list(calls),
            )
            head, expected = self.output(first, _PROSE, None)
            quoted = self.fmt.render(calls[-1:])
            ids = self.enc(head) + self.enc(f"\n\n{_AFTER}\n") + self.enc(quoted, spelled=True)
            content = f"{expected.content} {_AFTER} {quoted}"
            yield self.case(
                "mixed",
                cid,
                ids,
                tools,
                Expected(first, content, expected.reasoning),
                echoed=calls[-1:],
            )
            nested = self._nested(entry) if self._call_gated() else None
            if nested is not None:
                yield nested
        picked = _string_arg(first)
        if picked is not None and picked[1] in self.output(first, _PROSE, None)[0]:
            yield self._truncated(entry, picked[1])
        name = "undeclared_" + calls[0][0].replace(".", "_")
        text, expected = self.output([(name, calls[0][1])], _PROSE, None)
        body = text[text.index(_PROSE) + len(_PROSE) :] if _PROSE in text else text
        undeclared = Expected([], f"{_PROSE} {body}", expected.reasoning)
        yield self.case("undeclared", cid, self.enc(text), tools, undeclared)
        specials = self._specials()
        if specials:
            said = "Hello there," + "".join(_MARK + " and" for _ in specials) + " more text."
            text, expected = self.output(first, said, None)
            ids = self.fill(text, [[sid] for sid in specials])
            yield self.case(
                "special",
                cid,
                ids,
                tools,
                Expected(first, said.replace(_MARK, ""), expected.reasoning),
            )

    def _call_gated(self) -> bool:
        """Whether both call delimiters hold an added token (spelling them changes ids)."""
        added = self.tok.added_ids
        pair = [d for d in self.fmt.call if d]
        return len(pair) == 2 and all(any(i in added for i in self.enc(d)) for d in pair)

    def _nested(self, entry: BfclCase) -> Case | None:
        """A genuine call whose string argument holds the format's delimiters, spelled."""
        picked = _string_arg(entry.calls)
        if picked is None:
            return None
        key, value = picked
        marker = _MARK
        name, args = next((n, a) for n, a in entry.calls if a.get(key) == value)
        close, opener = self.fmt.call[1] or "", self.fmt.call[0]
        spelled = f"{close}{opener}"
        patched = {**args, key: value + marker}
        text, expected = self.output([(name, patched)], None, None)
        if text.count(marker) != 1:
            return None
        before, after = text.split(marker)
        ids = self.enc(before) + self.enc(spelled, spelled=True) + self.enc(after)
        call = (name, {**args, key: value + spelled})
        return self.case(
            "nested",
            entry.id,
            ids,
            entry.tools,
            Expected([call], "", expected.reasoning),
            allowed=expected.reasoning,
        )

    def _truncated(self, entry: BfclCase, value: str) -> Case:
        """The output ends in the middle of a string argument."""
        text, expected = self.output(entry.calls[:1], _PROSE, None)
        head = text[: text.rfind(value) + len(value) // 2]
        body = head[head.index(_PROSE) + len(_PROSE) :] if _PROSE in head else head
        return self.case(
            "truncated",
            entry.id,
            self.enc(head),
            entry.tools,
            Expected([], f"{_PROSE} {body}", expected.reasoning),
        )

    def _specials(self) -> list[int]:
        """Up to two special tokens that are neither delimiters nor kept text."""
        structural = {i for d in (*self.fmt.delimiters, *self.fmt.keep) for i in self.tok.encode(d)}
        pool = sorted(i for i in self.tok.special_ids if i not in structural)
        if not pool:
            return []
        eos = sorted(i for i in self.tok.eos_ids if i in pool and i != pool[0])
        second = eos[:1] or pool[-1:]
        return [pool[0]] + [i for i in second if i != pool[0]]

    def fuzz(self, count: int) -> Iterator[Case]:
        delimiter_ids = sorted(
            {i for d in self.fmt.delimiters for i in self.tok.encode(d)} | set(self.tok.added_ids)
        )
        spelled = [self.enc(d, spelled=True) for d in self.fmt.delimiters]
        structural = {i for d in (*self.fmt.delimiters, *self.fmt.keep) for i in self.enc(d)}
        size = self.tok.vocab_size
        for n in range(count):
            ids: list[int] = []
            for _ in range(self.rng.randint(10, 120)):
                roll = self.rng.random()
                if roll < 0.2 and delimiter_ids:
                    ids.append(self.rng.choice(delimiter_ids))
                elif roll < 0.3 and spelled:
                    ids += self.rng.choice(spelled)
                elif roll < 0.45:
                    ids += self.enc(self.rng.choice(('{"name": "f", "arguments": {', '"x"', "}")))
                else:
                    ids.append(self.rng.randrange(size))
            # Delimiter ids may come back as text (a released call keeps its delimiters);
            # no other added token may.
            kept = [i for i in ids if i not in self.tok.added_ids or i in structural]
            allowed = self.tok.decode(kept)
            yield self.case("fuzz", str(n), ids, [_FUZZ_TOOL], None, allowed=allowed)


def generate(
    fmt: Format,
    tok: Tokenizer,
    corpus: dict[str, list[BfclCase]],
    groups: Sequence[str],
    *,
    limit: int,
    seed: int = 0,
) -> list[Case]:
    """Every case of `groups` for one format; at most `limit` BFCL entries per category."""
    rng = random.Random(f"{seed}:{fmt.name}")
    builder = _Builder(fmt, tok, rng)
    picked = {c: _sample(entries, limit, rng) for c, entries in corpus.items()}
    out: list[Case] = []
    if "bfcl" in groups:
        for entries in picked.values():
            out += builder.bfcl(entries)
    if "echo" in groups:
        for entries in picked.values():
            out += builder.echo(entries[: max(1, limit // 2)])
    if "chunking" in groups:
        # Exhaustive sweeps cost one run per split: a BFCL output with parallel calls, and
        # the adversarial kinds where chunking bugs show (mixed, nested, truncated).
        few = (picked.get("parallel") or next(iter(picked.values()), []))[:1]
        sweep_kinds = ("mixed", "nested", "truncated")
        chunked = list(builder.bfcl(few))
        chunked += [c for e in few for c in builder._adversarial(e) if c.kind in sweep_kinds]
        for case in chunked:
            case.id = f"chunking/{case.id}"
            case.chunkings = sweeps.exhaustive(len(case.ids), rng)
        out += chunked
    if "fuzz" in groups:
        out += builder.fuzz(max(5, limit))
    return out


def _sample(entries: list[BfclCase], limit: int, rng: random.Random) -> list[BfclCase]:
    if len(entries) <= limit:
        return list(entries)
    return sorted(rng.sample(entries, limit), key=lambda e: e.id)
