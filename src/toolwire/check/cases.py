"""Conformance cases: real BFCL calls rendered natively and tokenized with real ids.

Data flow::

    BFCL (tools, calls) --Format.render_output--> text --Tokenizer.encode--> ids
                                                      (delimiters=False: echoed markup)

Each `Case` carries the output ids, the request around it (tools, `tool_choice`, the
thinking switch, the prompt ids: `prompts.Request`), what a correct parser returns
(`Expected`; None for fuzz cases, where only the structural properties apply) and the
chunkings to feed it in. Generation ends at a stop token, so no case continues past
one (`check_stops` refuses such a case; a stop token may be the last id, as gpt-oss's
`<|call|>` is). Groups (the `--cases` names):

* `bfcl`: each ground-truth call list rendered with no text, with prose, or with
  reasoning, in the basic chunkings.
* `echo`: adversarial outputs: the whole call spelled from sub-word ids (`echo`);
  prose, a genuine call, then an echoed one (`mixed`); spelled delimiters inside a
  genuine call's argument (`nested`); a call cut inside its arguments (`truncated`);
  a call to a tool the request did not declare (`undeclared`); special tokens inside
  prose (`special`).
* `chunking`: a few cases of each kind in every 2-split, a sample of 3-splits and
  random partitions.
* `fuzz`: random ids from the whole vocabulary, delimiters over-weighted, cut after
  the first stop token.

Generation is deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolwire import formats
from toolwire.check import sweeps
from toolwire.check.corpus import BfclCase
from toolwire.check.prompts import Prompter, Request
from toolwire.errors import UsageError
from toolwire.formats.spec import Format, RenderedCall
from toolwire.tokenizer import Tokenizer

__all__ = ["GROUPS", "KINDS", "POLICIES", "Case", "Expected", "check_stops", "generate"]

GROUPS = ("bfcl", "echo", "chunking", "fuzz")

#: Policies, and the case kinds about each.
POLICIES: dict[str, tuple[str, ...]] = {
    "echoed markup": ("echo", "mixed", "nested"),
    "undeclared tool": ("undeclared",),
    "truncated call": ("truncated",),
    "tool_choice none": ("none",),
}

#: Each case kind, what its output is, and whose rule its expected message encodes.
KINDS: dict[str, tuple[str, str]] = {
    "bfcl": ("BFCL ground-truth calls, alone, after prose or after reasoning", ""),
    "special": (
        "special tokens (neither delimiters nor stop tokens) inside prose",
        "special tokens are not text (what skip_special_tokens=True gives)",
    ),
    "echo": (
        "a call spelled from sub-word ids (markup quoted as text)",
        "toolwire's rule: only a delimiter's token id opens a call",
    ),
    "mixed": (
        "prose, a genuine call, then a spelled (quoted) call",
        "toolwire's rule: only a delimiter's token id opens a call",
    ),
    "nested": (
        "a genuine call whose string argument holds spelled delimiters",
        "toolwire's rule: spelled delimiters inside a call are argument text",
    ),
    "undeclared": (
        "prose, then a call to a tool the request did not declare",
        "toolwire's rule: such a call is released as content",
    ),
    "truncated": (
        "prose, then a call cut inside a string argument (output ends there)",
        "toolwire's held-mode rule: an unfinished call is released as content",
    ),
    "none": (
        "prose and a call, in a request with tool_choice none",
        "toolwire's rule: no call is returned and the call's markup is consumed",
    ),
    "fuzz": ("random ids, delimiters over-weighted, cut after the first stop token", ""),
}

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
    #: The request (tool_choice, thinking switch, prompt ids, start in reasoning).
    request: Request = field(default_factory=Request)
    #: The last id is a stop token (generation ended there).
    stop: bool = False

    @property
    def policy(self) -> str | None:
        """The policy this case is about, or None (a case judged on defects)."""
        return next((p for p, kinds in POLICIES.items() if self.kind in kinds), None)


def check_stops(case: Case, stops: frozenset[int]) -> None:
    """Refuse a case whose output continues past a stop token (no server produces it)."""
    for at, token in enumerate(case.ids[:-1]):
        if token in stops:
            raise UsageError(
                f"case {case.id} ({case.format}) continues past stop token {token} at "
                f"position {at} of {len(case.ids)}: generation ends at a stop token"
            )


def _string_arg(calls: Sequence[RenderedCall]) -> tuple[str, str] | None:
    for _, args in calls:
        for key, value in args.items():
            if isinstance(value, str) and _PLAIN_VALUE.match(value):
                return key, value
    return None


class _Builder:
    """Builds the cases of one format and tokenizer."""

    def __init__(
        self,
        fmt: Format,
        tok: Tokenizer,
        rng: random.Random,
        prompter: Prompter,
        stops: frozenset[int],
    ) -> None:
        self.fmt = fmt
        self.tok = tok
        self.rng = rng
        self.prompter = prompter
        self.stops = stops
        self.gated = formats.is_gated(fmt, tok)
        close = fmt.call[1]
        close_ids = self.enc(close) if close else []
        #: A call's closing delimiter is a stop token (gpt-oss's `<|call|>`): an output
        #: holds at most one call and nothing after it.
        self.call_stops = len(close_ids) == 1 and close_ids[0] in stops

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

    def calls(self, calls: Sequence[RenderedCall]) -> list[RenderedCall]:
        """The calls one output can hold (one when a call's close ends generation)."""
        return list(calls[:1]) if self.call_stops else list(calls)

    def case(
        self,
        kind: str,
        cid: str,
        ids: list[int],
        tools: list[dict[str, Any]],
        expected: Expected | None,
        request: Request,
        **extra: Any,
    ) -> Case:
        allowed = extra.pop("allowed", None)
        if allowed is None and expected is not None:
            allowed = expected.content + "\n" + expected.reasoning
        case = Case(
            id=f"{kind}/{cid}",
            kind=kind,
            format=self.fmt.name,
            ids=ids,
            tools=tools,
            expected=expected,
            allowed=allowed or "",
            chunkings=sweeps.basic(len(ids), self.rng),
            markup=list(self.fmt.section or ()),
            request=request,
            stop=bool(ids) and ids[-1] in self.stops,
            **extra,
        )
        check_stops(case, self.stops)
        return case

    def output(
        self,
        tools: list[dict[str, Any]],
        calls: Sequence[RenderedCall],
        content: str | None,
        reasoning: str | None,
        tool_choice: str = "auto",
    ) -> tuple[str, Expected, Request]:
        """An output and the request it answers: thinking is on when it has reasoning."""
        if self.fmt.reasoning is None and self.fmt.render_text is None:
            reasoning = None
        request = self.prompter.request(tools, reasoning is not None, tool_choice)
        if request.in_reasoning and reasoning is None:
            reasoning = _REASONING.format("help")
        text = self.fmt.render_output(
            reasoning=reasoning, content=content, calls=calls, prefilled=request.in_reasoning
        )
        text = self._after_prompt(text, request)
        return text, Expected(list(calls), content or "", reasoning or ""), request

    def _after_prompt(self, text: str, request: Request) -> str:
        """The output without the markup the prompt already ends with.

        A rendered output may open with a message header that the generation prompt
        already wrote (gpt-oss: `<|start|>assistant`); a model continues after it.
        """
        if not request.prompt_ids:
            return text
        prompt = self.tok.decode(request.prompt_ids[-16:])
        for token in sorted(self.tok.added_tokens, key=len, reverse=True):
            if token and text.startswith(token) and token in prompt:
                head = prompt[prompt.rindex(token) :]
                if text.startswith(head):
                    return text[len(head) :]
        return text

    # -- groups ----------------------------------------------------------------------

    def bfcl(self, entries: Sequence[BfclCase]) -> Iterator[Case]:
        for n, entry in enumerate(entries):
            variant = n % 3
            content = _PROSE if variant == 1 else None
            reasoning = _REASONING.format(entry.calls[0][0]) if variant == 2 else None
            calls = self.calls(entry.calls)
            text, expected, request = self.output(entry.tools, calls, content, reasoning)
            yield self.case("bfcl", entry.id, self.enc(text), entry.tools, expected, request)

    def echo(self, entries: Sequence[BfclCase]) -> Iterator[Case]:
        for entry in entries:
            yield from self._adversarial(entry)

    def _adversarial(self, entry: BfclCase) -> Iterator[Case]:
        calls, tools, cid = self.calls(entry.calls), entry.tools, entry.id
        first = [calls[0]]
        if self.gated:
            quoted = self.fmt.render(calls)
            text, expected, request = self.output(tools, [], _MARK, None)
            ids = self.fill(text, [self.enc(quoted, spelled=True)])
            yield self.case(
                "echo",
                cid,
                ids,
                tools,
                Expected([], quoted, expected.reasoning),
                request,
                echoed=list(calls),
            )
            if not self.call_stops:  # text after a call would follow a stop token
                head, expected, request = self.output(tools, first, _PROSE, None)
                quoted = self.fmt.render(calls[-1:])
                ids = self.enc(head) + self.enc(f"\n\n{_AFTER}\n") + self.enc(quoted, spelled=True)
                content = f"{expected.content} {_AFTER} {quoted}"
                yield self.case(
                    "mixed",
                    cid,
                    ids,
                    tools,
                    Expected(first, content, expected.reasoning),
                    request,
                    echoed=calls[-1:],
                )
            nested = self._nested(entry) if self._call_gated() else None
            if nested is not None:
                yield nested
        picked = _string_arg(first)
        if picked is not None and picked[1] in self.output(tools, first, _PROSE, None)[0]:
            yield self._truncated(entry, picked[1])
        name = "undeclared_" + calls[0][0].replace(".", "_")
        text, expected, request = self.output(tools, [(name, calls[0][1])], _PROSE, None)
        body = text[text.index(_PROSE) + len(_PROSE) :] if _PROSE in text else text
        undeclared = Expected([], f"{_PROSE} {body}", expected.reasoning)
        yield self.case("undeclared", cid, self.enc(text), tools, undeclared, request)
        text, expected, request = self.output(tools, first, _PROSE, None, tool_choice="none")
        body = text[text.index(_PROSE) + len(_PROSE) :] if _PROSE in text else text
        none = Expected([], f"{_PROSE} {body}", expected.reasoning)
        yield self.case("none", cid, self.enc(text), tools, none, request)
        specials = self._specials()
        if specials:
            said = "Hello there," + "".join(_MARK + " and" for _ in specials) + " more text."
            text, expected, request = self.output(tools, first, said, None)
            ids = self.fill(text, [[sid] for sid in specials])
            yield self.case(
                "special",
                cid,
                ids,
                tools,
                Expected(first, said.replace(_MARK, ""), expected.reasoning),
                request,
            )

    def _call_gated(self) -> bool:
        """Whether both call delimiters hold an added token (spelling them changes ids)."""
        added = self.tok.added_ids
        pair = [d for d in self.fmt.call if d]
        return len(pair) == 2 and all(any(i in added for i in self.enc(d)) for d in pair)

    def _nested(self, entry: BfclCase) -> Case | None:
        """A genuine call whose string argument holds the format's delimiters, spelled."""
        picked = _string_arg(self.calls(entry.calls))
        if picked is None:
            return None
        key, value = picked
        marker = _MARK
        name, args = next((n, a) for n, a in entry.calls if a.get(key) == value)
        close, opener = self.fmt.call[1] or "", self.fmt.call[0]
        spelled = f"{close}{opener}"
        patched = {**args, key: value + marker}
        text, expected, request = self.output(entry.tools, [(name, patched)], None, None)
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
            request,
            allowed=expected.reasoning,
        )

    def _truncated(self, entry: BfclCase, value: str) -> Case:
        """The output ends in the middle of a string argument."""
        text, expected, request = self.output(
            entry.tools, self.calls(entry.calls)[:1], _PROSE, None
        )
        head = text[: text.rfind(value) + len(value) // 2]
        body = head[head.index(_PROSE) + len(_PROSE) :] if _PROSE in head else head
        return self.case(
            "truncated",
            entry.id,
            self.enc(head),
            entry.tools,
            Expected([], f"{_PROSE} {body}", expected.reasoning),
            request,
        )

    def _specials(self) -> list[int]:
        """Up to two special tokens that are neither delimiters nor stop tokens."""
        structural = {i for d in (*self.fmt.delimiters, *self.fmt.keep) for i in self.tok.encode(d)}
        pool = sorted(
            i for i in self.tok.special_ids if i not in structural and i not in self.stops
        )
        return pool[:1] + pool[-1:] if len(pool) > 1 else pool

    def fuzz(self, count: int) -> Iterator[Case]:
        delimiter_ids = sorted(
            {i for d in self.fmt.delimiters for i in self.tok.encode(d)} | set(self.tok.added_ids)
        )
        spelled = [self.enc(d, spelled=True) for d in self.fmt.delimiters]
        structural = {i for d in (*self.fmt.delimiters, *self.fmt.keep) for i in self.enc(d)}
        size = self.tok.vocab_size
        request = self.prompter.request([_FUZZ_TOOL], False)
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
            # Generation ends at the first stop token (the token itself is the last id).
            end = next((k for k, i in enumerate(ids) if i in self.stops), len(ids) - 1)
            ids = ids[: end + 1]
            # Delimiter ids may come back as text (a released call keeps its delimiters),
            # and so may added tokens that are not special (they are text); no special
            # token may.
            kept = [i for i in ids if i not in self.tok.special_ids or i in structural]
            allowed = self.tok.decode(kept)
            yield self.case("fuzz", str(n), ids, [_FUZZ_TOOL], None, request, allowed=allowed)


def generate(
    fmt: Format,
    tok: Tokenizer,
    corpus: dict[str, list[BfclCase]],
    groups: Sequence[str],
    *,
    limit: int,
    prompter: Prompter,
    stops: frozenset[int],
    seed: int = 0,
) -> list[Case]:
    """Every case of `groups` for one format; at most `limit` BFCL entries per category."""
    rng = random.Random(f"{seed}:{fmt.name}")
    builder = _Builder(fmt, tok, rng, prompter, stops)
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
