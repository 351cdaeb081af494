"""Format detection: which registered format a chat template and a vocabulary point to.

Data flow::

    tokenizer, template ---render a probe chat----> text: a user turn, an assistant turn
    (the probe: one tool, one call                   that calls the tool, its result, the
     with a string and an integer argument)          generation prompt (the template's
                                                     own syntax for calls, resolved)
    text --encode (delimiters as their ids)--> ids
    every registered format F:
        reads:    Parser(F, tokenizer, tools=[probe tool]) over the ids returns the
                  probe call, name and arguments equal   (F's call shape and delimiters)
        verbatim: F.render(probe call) appears in the text (F's exact body shape)
        written:  F's delimiters found in the text or the template's source
        missing:  F's delimiters found in neither
        tokens:   F's delimiters that are single added tokens of the vocabulary
        markers:  F's `template_markers` found in the text or the source
    rank the formats that read the call by (markers, verbatim, written - missing,
    tokens); one best -> that format; a tie -> None, naming the tied formats.

Without a template, or when no format reads the template's call, the vocabulary alone
decides: the formats whose structure it gates (`is_gated`: every delimiter that opens
calls is an added token), ranked by the newest added token (highest id) their
delimiters hold, then by how many they hold (a family's vocabulary keeps its older
formats' tokens and appends the ones its newer format needs: DeepSeek V4's holds V3's
tool tokens and, after them, `｜DSML｜`); among the formats tied there, a revision wins
over the format it revises (`formats.detection.REVISIONS`), and a format yields to the
one it defers to (`formats.detection.DEFERS`); one best -> that format,
else None with the reason.

Everything is read from each format's own data (delimiters, reasoning pairs, header,
anchor, `render` and its syntax), so a format registered later is detected without
any change here. Formats that share delimiters are told apart by what they declare:
Qwen2.5 and Qwen3 templates both write hermes calls, but `qwen3` declares `<think>`,
which only Qwen3's template writes; GLM-4.5 and GLM-4.7 read each other's calls, but
each renders its own body verbatim; a family whose calls are another's (Granite 4 and
hermes both write `<tool_call>` JSON) declares its templates' turn markers
(`Format.template_markers`). Pure: no I/O beyond a template path given as
`template=`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolwire import formats
from toolwire.errors import ToolwireError, UsageError
from toolwire.formats import Detection, Format
from toolwire.formats.detection import DEFERS, REVISIONS
from toolwire.message import Message
from toolwire.parser import Parser
from toolwire.prompt.messages import prepare
from toolwire.prompt.template import iterates_content, render
from toolwire.tokenizer import Tokenizer

__all__ = ["PROBE_ARGUMENTS", "PROBE_NAME", "detect"]

#: The probe tool's name and the arguments of the call the probe chat holds.
PROBE_NAME = "probe_weather"
PROBE_ARGUMENTS: dict[str, Any] = {"city": "Paris", "days": 3}

_TOOL = {
    "type": "function",
    "function": {
        "name": PROBE_NAME,
        "description": "The weather forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
_CALL_ID = "a1b2c3d4e"  # nine alphanumerics: Mistral's templates refuse other ids
_NAMED_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token")


def _probe_chats() -> list[tuple[bool, list[dict[str, Any]]]]:
    """Chats with one call: (prepared as `render_prompt` prepares them, messages).

    Templates differ in what they accept, so each is tried: the OpenAI shapes with and
    without reasoning, and the raw shape older templates test for (an assistant
    `content` of None, arguments as a JSON string: DeepSeek V3's template writes calls
    only then, and `render_prompt` drops None keys).
    """
    arguments = json.dumps(PROBE_ARGUMENTS)
    call = {"id": _CALL_ID, "type": "function",
            "function": {"name": PROBE_NAME, "arguments": arguments}}  # fmt: skip
    result = {"role": "tool", "tool_call_id": _CALL_ID, "name": PROBE_NAME, "content": "rain"}
    question = {"role": "user", "content": "Weather in Paris for 3 days?"}
    system = {"role": "system", "content": "Use tools when useful."}
    thinking = {"role": "assistant", "content": "", "tool_calls": [call],
                "reasoning_content": "The user wants a forecast."}  # fmt: skip
    plain = {"role": "assistant", "content": "", "tool_calls": [call]}
    raw = {"role": "assistant", "content": None, "tool_calls": [call]}
    return [
        (True, [question, thinking, result]),
        (True, [system, question, plain, result]),
        (False, [question, raw, result]),
    ]


@dataclass(frozen=True)
class _Score:
    """What one format's own data finds in the rendered probe."""

    fmt: Format
    markers: tuple[str, ...]
    reads: bool
    verbatim: bool
    written: tuple[str, ...]
    missing: tuple[str, ...]
    tokens: tuple[str, ...]

    @property
    def rank(self) -> tuple[int, bool, int, int]:
        # Markers only add: a family's templates are not all alike, and a format that
        # declares none must not win over one whose markers are merely absent.
        balance = len(self.written) - len(self.missing)
        return (len(self.markers), self.verbatim, balance, len(self.tokens))

    def evidence(self) -> tuple[str, ...]:
        name = self.fmt.name
        out = []
        if self.reads:
            out.append(f"{name}: the template's tool call parses as {PROBE_NAME}({_args()})")
        if self.verbatim:
            out.append(f"{name}: its own rendering of the call is what the template writes")
        if self.markers:
            out.append(f"{name}: its family's markers are in the template: "
                       f"{', '.join(self.markers)}")  # fmt: skip
        if len(self.markers) < len(self.fmt.template_markers):
            absent = [m for m in self.fmt.template_markers if m not in self.markers]
            out.append(f"{name}: its family's markers are not: {', '.join(absent)}")
        if self.written:
            out.append(f"{name}: delimiters the template writes: {', '.join(self.written)}")
        if self.missing:
            out.append(f"{name}: delimiters it never writes: {', '.join(self.missing)}")
        if self.tokens:
            out.append(f"{name}: delimiters that are tokens: {', '.join(self.tokens)}")
        return tuple(out)


def _args() -> str:
    return ", ".join(f"{k}={v!r}" for k, v in PROBE_ARGUMENTS.items())


def detect(tokenizer: Tokenizer, *, template: str | os.PathLike[str] | None = None) -> Detection:
    """The format `tokenizer`'s chat template (or `template`) and vocabulary point to.

    Returns a `Detection`: the format with the evidence for it, or no format and the
    reason (no template and no vocabulary evidence, a template that writes no call any
    format reads, or a tie). Never raises for what a template does; `UsageError` for a
    tokenizer that is not one, or a template path that cannot be read.
    """
    if not isinstance(tokenizer, Tokenizer):
        raise UsageError(f"detect needs a toolwire.Tokenizer, got {type(tokenizer).__name__}")
    source = _template_source(tokenizer, template)
    if source is None:
        return _by_vocabulary(tokenizer, "the tokenizer has no chat template")
    texts, refused = _render(tokenizer, source)
    if not texts:
        return _by_vocabulary(tokenizer, f"the chat template refused every probe chat ({refused})")
    rendered = [(text, tokenizer.encode(text)) for text in texts]
    scores = [_score(formats.get(name), tokenizer, source, rendered) for name in formats.names()]
    readers = [s for s in scores if s.reads]
    if not readers:
        return _by_vocabulary(
            tokenizer, "the chat template writes no tool call that a registered format reads"
        )
    best = max(s.rank for s in readers)
    top = [s for s in readers if s.rank == best]
    evidence = tuple(line for s in sorted(readers, key=lambda s: s.rank, reverse=True)
                     for line in s.evidence())  # fmt: skip
    if len(top) > 1:
        tied = ", ".join(s.fmt.name for s in top)
        return Detection(None, evidence, f"the chat template fits {tied} equally well")
    winner = top[0]
    others = [s.fmt.name for s in readers if s is not winner]
    why = f"the chat template writes {winner.fmt.name} calls"
    if others:
        why += f" (also read by {', '.join(others)}, which fit it less well)"
    return Detection(winner.fmt, evidence, why)


def _template_source(tokenizer: Tokenizer, template: str | os.PathLike[str] | None) -> str | None:
    if isinstance(template, os.PathLike):
        try:
            return Path(template).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read the chat template {template}: {exc}") from exc
    if isinstance(template, str):
        return template
    if template is not None:
        raise UsageError(f"template must be the text or a path, got {type(template).__name__}")
    return tokenizer.chat_template


def _render(tokenizer: Tokenizer, source: str) -> tuple[list[str], str]:
    """Every distinct rendering of the probe chats, and why the template refused any."""
    variables = {k: v for k in _NAMED_TOKENS if (v := tokenizer.token_string(k)) is not None}
    texts: list[str] = []
    refused = ""
    for prepared, chat in _probe_chats():
        try:
            messages = prepare(chat, list_content=iterates_content(source)) if prepared else chat
            text = render(
                source, messages, tools=[_TOOL], add_generation_prompt=True, variables=variables
            )
        except ToolwireError as exc:  # the template's own refusal or failure
            refused = str(exc)
            continue
        if text not in texts:
            texts.append(text)
    return texts, refused


def _score(
    fmt: Format, tokenizer: Tokenizer, source: str, rendered: list[tuple[str, list[int]]]
) -> _Score:
    delimiters = fmt.delimiters
    every = "\n".join([source, *(text for text, _ in rendered)])
    written = tuple(d for d in delimiters if d in every)
    missing = tuple(d for d in delimiters if d not in written)
    tokens = tuple(d for d in delimiters if d in tokenizer.added_tokens)
    markers = tuple(m for m in fmt.template_markers if m in every)
    call = fmt.render([(PROBE_NAME, PROBE_ARGUMENTS)])
    reads = verbatim = False
    for text, ids in rendered:
        opens = fmt.anchor is not None or any(d and d in text for d in fmt.entries)
        if opens and _reads(fmt, tokenizer, ids):
            reads = True
            verbatim = verbatim or call in text
    return _Score(fmt, markers, reads, verbatim, written, missing, tokens)


def _reads(fmt: Format, tokenizer: Tokenizer, ids: list[int]) -> bool:
    """True when `fmt`'s parser finds the probe call in the rendered chat."""
    try:
        parser = Parser(fmt, tokenizer, tools=[_TOOL])
        message = Message.from_events([*parser.feed(ids), *parser.finish()])
    except ToolwireError:
        return False
    for call in message.tool_calls:
        if call.name == PROBE_NAME:
            try:
                if json.loads(call.arguments) == PROBE_ARGUMENTS:
                    return True
            except ValueError:
                continue
    return False


def _by_vocabulary(tokenizer: Tokenizer, why_not_template: str) -> Detection:
    """Decide from the vocabulary alone: the formats whose call structure it gates,
    ranked by the newest added token their delimiters hold, then by how many they
    hold; among formats tied there, a revision wins over the format it revises."""
    gated = [formats.get(n) for n in formats.names() if formats.is_gated(n, tokenizer)]
    if not gated:
        return Detection(
            None,
            (why_not_template,),
            f"{why_not_template}, and no registered format's delimiters are tokens of "
            "this vocabulary",
        )

    def held(fmt: Format) -> tuple[int, ...]:
        ids = {i for d in fmt.delimiters for i in tokenizer.encode(d) if i in tokenizer.added_ids}
        return tuple(sorted(ids))

    counts = {fmt.name: held(fmt) for fmt in gated}

    def rank(fmt: Format) -> tuple[int, int]:
        ids = counts[fmt.name]
        return (max(ids, default=-1), len(ids))

    best = max(rank(fmt) for fmt in gated)
    top = [fmt for fmt in gated if rank(fmt) == best]
    names = {fmt.name for fmt in top}
    top = [fmt for fmt in top if not names & {r for r, old in REVISIONS.items() if old == fmt.name}]
    top = [fmt for fmt in top if DEFERS.get(fmt.name) not in names]
    evidence = (
        why_not_template,
        *(
            f"{name}: tokens its delimiters hold: "
            + ", ".join(f"{tokenizer.token_text(i)} ({i})" for i in ids)
            for name, ids in counts.items()
        ),
    )
    if len(top) > 1:
        tied = ", ".join(f.name for f in top)
        return Detection(
            None,
            evidence,
            f"{why_not_template}, and the vocabulary holds the delimiters of {tied} alike",
        )
    winner = top[0]
    newest = tokenizer.token_text(best[0])
    why = f"{why_not_template}; the vocabulary holds {winner.name}'s delimiters as tokens"
    if len(gated) > 1:
        why += f"; the newest delimiter token of the vocabulary, {newest} (id {best[0]}), is its"
    return Detection(winner, evidence, why)


formats._install_detector(detect)  # `toolwire.formats.detect` (the registry cannot import this)
