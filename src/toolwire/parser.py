"""The one state machine that runs every format.

Data flow of `feed(ids)`::

    ids --lex--> structural text --scan--> state machine --> events
          |                         |
          | a delimiter's id  -> its sentinel (a lone surrogate, which no decoded
          |                      text can contain, so spelled markup never matches)
          | other added ids   -> dropped (special tokens never reach content)
          | any other id      -> its detokenized text
          |
          the current state's delimiters are searched in that text; a suffix that
          could still become a delimiter is held until the next delta decides it

States, and what moves between them. Each state has one payload (`_Section`, `_Call`,
`_Header`; `_Anchor` for CONTENT of a format whose calls no token opens); the moves
are one table, `toolwire.lexicon.TRANSITIONS`: (state, delimiter role) -> the action
and the next state for each of its outcomes, one handler here per action
(`_HANDLERS`). A handler does its action's work and says how it came out; `_take` sets
the state the table names for that outcome (the handlers never do), and a delimiter
the table says acts again (a body it ended could not hold it) is looked up anew in
the next state. The moves no delimiter makes are entries too (`lexicon.TRIGGERED`).
`Tables.transitions` resolves each form the format gives a role, once per format and
mode, so a matched delimiter costs one lookup. In short::

    CONTENT   --reasoning.open--> REASONING   --reasoning.close--> CONTENT
        (any of the format's reasoning pairs; one the vocabulary has no token for
         is matched as text, which can move text between the two but make no call)
    CONTENT | REASONING --section.open--> SECTION --section.close--> CONTENT
    CONTENT | REASONING | SECTION --call.open--> CALL
        (from CONTENT | REASONING only when calls may stand outside their section,
         and then provisionally; a delimiter without a token of its own, such as
         `<invoke name="`, is matched only in SECTION | CALL, which gating guards)
    CALL --call.close (or the body ending itself)--> SECTION or CONTENT
    CALL --call.open--> CALL (the first body is closed, a second call opens)
    CALL --anything else it searches for--> the body ends; the delimiter acts anew
    CALL --a self-ending body that `follows` (a list's separator)--> CALL, no opener
    CONTENT | REASONING --header.open--> HEADER --header.close--> REASONING, CONTENT
        or CALL, as the format's pure hook routes the header text (harmony; Inkling,
        whose block kinds are its closes and whose output begins inside a header); a
        header end, a new header or the call close ends that body; a header that never
        closes is markup, or content where the format says so
    CONTENT --a line's first non-space character, one of anchor.begins--> CALL
        (calls that no token opens: the text-gated fallback, `Parser.gated` False;
         a line start is the output's start, a newline, one of anchor.after, or the
         end of a call. Anywhere else such text is content)
    SECTION --any other delimiter--> SECTION (held: a mark as text, others markup)
    any other (state, role) --> the delimiter is consumed markup (a stray closer),
        or text (a call's inner mark outside a call)

A form that plays several roles takes the first by its state's precedence
(`lexicon.PRECEDENCE`: a call's close before a section's close in CALL, the call's
open before a header's outside it, a mark before a stray delimiter).

The held call's lifecycle is the call's own (`_Call`: take, verdict, commit; begin,
stream and end when streaming); text reaches an open body one way (`_route`).

There is one scan (`_run`). Ordinary ids need no decoder and their text holds no
sentinel, so in a state whose every delimiter begins with one (`Tables.fast`) the
search is skipped and the text goes straight to the state's sink (`_route`; for a
held body, the sink `_route` itself uses, `_Call.collect`): the scan's own step when
it finds nothing, not a second copy of it.

What the parser saw is public (`Parser.stats`): delimiters spelled as text under a
gated vocabulary (echoes), and calls and sections released as content.

Rules this module keeps (the guarantees of docs/parser.md):

* Chunk invariance: the only state carried between deltas is the held suffix, the
  state and its payload; nothing depends on where a delta ended.
* Conservation: a call that cannot be completed is released as content with every
  character it held (delimiters included), or raises `MalformedOutput` when strict.
  A section is held (`_Section`) until a call of it is returned, which makes it
  structure (its delimiters markup, the text inside it content), or until it ends
  without one, which releases it whole. Released text is the literal text of the ids
  it came from, stray delimiters included. Outside structure, a delimiter that does
  not act where it stands is markup, except a call's inner marks, which are text.
* Whitespace at the edges of a content or reasoning run, next to structure or at the
  ends of the output, is markup: it is dropped. Two runs of one kind separated only
  by structure keep one separator (`_Run`).
* Unfinished bodies: a call whose body did not end is returned only when its
  arguments are complete for the schema, and never once `finish("length")` says the
  output was cut off (held mode).
* Cost: each id is decoded once and each character scanned a bounded number of
  times; a held call is parsed once, when it closes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolwire.errors import MalformedOutput, UsageError
from toolwire.events import (
    Content,
    Event,
    Reasoning,
    ToolCallArguments,
    ToolCallBegin,
    ToolCallEnd,
)
from toolwire.formats import get as get_format
from toolwire.formats.spec import CallContext, CallSyntax, Format, Reject
from toolwire.lexicon import (
    TRIGGERED,
    Action,
    Mode,
    Outcome,
    Scanner,
    State,
    Tables,
    Then,
    Transition,
    Trigger,
    is_gated,
    lexicon,
    tables,
)
from toolwire.message import Message
from toolwire.tokenizer import Tokenizer
from toolwire.tools import Tools

__all__ = ["Parser", "ParserStats", "parse"]


_Snapshot = tuple[bool, str, bool, str, str]

# The per-token path compares against these module globals: looking a member up on
# its Enum class costs more than the rest of a fast-path step (CPython 3.11).
_IDS = Mode.IDS
_CONTENT, _REASONING, _SECTION, _CALL = State.CONTENT, State.REASONING, State.SECTION, State.CALL
_DONE, _TEXT, _RELEASED = Outcome.DONE, Outcome.TEXT, Outcome.RELEASED
_OUTER = Then.OUTER
_NOWHERE: frozenset[State] = frozenset()
_BODY_END = TRIGGERED[State.CALL, Trigger.BODY_END]

#: What joins two runs of one kind separated only by structure, where the model
#: wrote no whitespace between them.
SEPARATOR = "\n"


class _Run:
    """A run of content or reasoning text; whitespace at its edges is markup.

    Two runs of one kind that only structure separates keep one separator: the
    whitespace written right after the earlier run's text, else the whitespace right
    before the later run's text, else a newline (`SEPARATOR`).
    """

    __slots__ = ("kind", "lead", "pending", "spoke", "started", "trail")

    def __init__(self, kind: type[Content] | type[Reasoning]) -> None:
        self.kind = kind
        self.started = False  # non-whitespace text seen since the last boundary
        self.pending = ""  # trailing whitespace, emitted only if more text follows
        self.spoke = False  # this run's kind emitted text earlier in the output
        self.trail = ""  # whitespace dropped after the last text, at its boundary
        self.lead = ""  # whitespace dropped since the last boundary, before any text

    def add(self, text: str, out: list[Event]) -> None:
        if self.started and not self.pending and text and not text[-1].isspace():
            out.append(self.kind(text))  # the common case: text inside a run
            return
        if not self.started:
            body = text.lstrip()
            if not body:
                self.lead += text
                return
            if self.spoke:  # only structure stands between this text and the last
                lead = self.lead + text[: len(text) - len(body)]
                body = (self.trail or lead or SEPARATOR) + body
            self.started = self.spoke = True
            self.trail = self.lead = ""
            text = body
        body = text.rstrip()
        if not body:
            self.pending += text
            return
        out.append(self.kind(self.pending + body))
        self.pending = text[len(body) :]

    def boundary(self) -> _Snapshot:
        """Structure begins: the run ends. Returns what `resume` needs to undo that."""
        snapshot = (self.started, self.pending, self.spoke, self.trail, self.lead)
        if self.started:
            self.trail = self.pending
        self.pending, self.started, self.lead = "", False, ""
        return snapshot

    def resume(self, snapshot: _Snapshot) -> None:
        """The structure turned out to be text: the run goes on as if never ended."""
        self.started, self.pending, self.spoke, self.trail, self.lead = snapshot


class _Section:
    """Payload of an open section: held until a call of it is returned or it ends."""

    __slots__ = ("before", "held", "opener", "resume", "structural")

    def __init__(self, opener: str, resume: State, before: _Snapshot) -> None:
        self.opener = opener  # the opener's literal text, for release as content
        self.resume = resume  # the state to return to if the section is released
        self.before = before  # the interrupted run's state, restored on release
        #: Literal text inside the section, with True for a delimiter that is markup
        #: once the section is structure (a mark, such as `<｜tool▁sep｜>`, is text).
        self.held: list[tuple[str, bool]] = []
        #: A call of it was returned (or consumed, with tool_choice "none"): the
        #: section is markup, and text inside it is content.
        self.structural = False


class _Header:
    """Payload of the HEADER state: a message header (harmony), routed when it closes."""

    __slots__ = ("before", "parts")

    def __init__(self, opener: str, before: _Snapshot | None) -> None:
        self.parts = [opener]  # the header's structural text so far
        #: Content's state when the header began there (None from reasoning): a call
        #: the header routes is released back to it.
        self.before = before


class _Anchor:
    """Where a call that no token opens may begin (`Format.anchor`; CONTENT only)."""

    __slots__ = ("begins", "line")

    def __init__(self, begins: str) -> None:
        self.begins = begins
        self.line = True  # at a line start: an anchored body may begin here


class _Call:
    """Payload of the CALL state: one call, and its lifecycle.

    Held (the default): the body is collected (`take`) and parsed once, by `verdict`,
    when it ends; then the parser commits it (`commit`) or releases its `text`.
    Streaming: the body is parsed as it comes; once its name is declared it begins
    (`begin`), streams argument fragments (`stream`) and ends (`end`), valid or not.
    """

    __slots__ = (
        "before",
        "begun",
        "closer",
        "collect",
        "fragments",
        "held",
        "index",
        "plain",
        "provisional",
        "raw",
        "resume",
        "spell",
        "syntax",
    )

    def __init__(
        self,
        syntax: CallSyntax,
        opener: str,
        resume: State,
        before: _Snapshot,
        *,
        provisional: bool,
        held: bool,
        spell: tuple[Mapping[int, str], Callable[[str], object]] | None = None,
    ) -> None:
        self.syntax = syntax
        #: Sentinels back to their text: a call's mark the syntax kept as a value's
        #: text (inside a string, or where a value was due) leaves the parser as the
        #: token's text, never as its sentinel. (sentinel -> text, finds a sentinel)
        self.spell = spell
        #: Structural text of the call, opener first: released as content if it fails.
        #: While held, raw[1:] is the body not yet fed to the syntax.
        self.raw = [opener]
        self.closer = ""  # the closing delimiter, once it came
        self.resume = resume  # the state to return to if the call is released
        self.before = before  # the interrupted run's state, restored on release
        self.provisional = provisional
        self.held = held
        #: Held: body text is collected as it comes (raw[1:]), parsed once it ends.
        self.collect = self.raw.append
        self.begun = False  # ToolCallBegin emitted (streaming only)
        self.index = -1
        #: Streaming: this call's fragment events by text, short texts only and at
        #: most `_FRAGMENTS` of them. An event is frozen, so a fragment the call
        #: streams again (a token's text: a word, an indent) is the same event,
        #: looked up instead of built (building is a quarter of a streamed token).
        self.fragments: dict[str, ToolCallArguments] = {}
        #: Streaming: the syntax's short step for text inside a value, if it has one
        #: (`PlainStep`; looked up, not `isinstance`d: a runtime protocol check costs
        #: ~20 µs, a tenth of a short call's whole parse).
        self.plain: Callable[[str], str | None] | None = (
            None if held else getattr(syntax, "plain", None)
        )

    def take(self, text: str) -> int:
        """Body text fed to the syntax now (not held: held text goes to `collect`).
        Returns how much the body took (less than all only once a self-ending body
        has ended)."""
        used = self.syntax.feed(text)
        self.raw.append(text[:used])
        return used

    def close(self, closer: str) -> None:
        self.closer = closer

    def text(self) -> str:
        """Every character the call held, in structural form."""
        return "".join(self.raw) + self.closer

    def verdict(
        self, tools: Tools, made: int, *, closed: bool, cut: bool, anchored: bool
    ) -> tuple[str, str]:
        """Why this call cannot be returned ('' when it can), and, for a call not yet
        begun, its whole arguments text. `made`: calls returned before it.

        A body that did not end (its closing delimiter, or a self-ending body's own end,
        never came) is a call only when the output stopped by itself and its arguments
        are complete for the schema; never when the output was `cut` off."""
        syntax = self.syntax
        if self.held and len(self.raw) > 1:
            syntax.feed("".join(self.raw[1:]))
        # A call that no token opens (`Format.anchor`) ends with its own closing
        # bracket: a body its syntax accepts has ended, whatever follows.
        ended = closed or anchored
        try:
            if not closed and self.provisional:
                raise Reject("the call was cut off before its closing delimiter")
            if not ended and cut and not self.begun:
                raise Reject("the output was cut off by the length limit inside the call")
            syntax.close()
        except Reject as exc:
            return str(exc) or "malformed tool call", ""
        name = syntax.name
        if name is None:
            return "the call names no tool", ""
        if self.begun:
            return "", ""
        if not tools.accepts(name):
            return f"tool {name!r} is not declared", ""
        if not tools.parallel and made > 0:
            return "parallel_tool_calls is false and a call was already made", ""
        arguments = syntax.arguments()
        if not ended:
            missing = tools.incomplete(name, arguments)
            if missing:
                return f"the call did not end and {missing}", ""
        return "", arguments

    def begin(self, index: int, ids: Callable[[int], str], out: list[Event]) -> None:
        """Streaming: the name is known and declared; the call is returned as it comes."""
        name = self.syntax.name
        assert name is not None
        self.begun = True
        self.index = index
        out.append(ToolCallBegin(index, self.syntax.call_id or ids(index), self.spelled(name)))

    def stream(self, out: list[Event]) -> None:
        """Streaming: the argument text that became final since the last fragment."""
        fragment = self.syntax.arguments()
        if fragment:
            out.append(self.fragment(self.spelled(fragment)))

    def fragment(self, text: str) -> ToolCallArguments:
        """`ToolCallArguments(self.index, text)`, the same event for the same short
        text (`fragments`)."""
        return self.fragments.get(text) or self.new_fragment(text)

    def new_fragment(self, text: str) -> ToolCallArguments:
        """`fragment`'s event for a text not in `fragments`, kept there if short."""
        event = _fragment(self.index, text)
        if len(text) <= _FRAGMENT_TEXT and len(self.fragments) < _FRAGMENTS:
            self.fragments[text] = event
        return event

    def spelled(self, text: str) -> str:
        spell = self.spell
        if spell is None or text.isascii() or not spell[1](text):  # (sentinels: not ASCII)
            return text
        return text.translate(spell[0])

    def end(self, reason: str, out: list[Event]) -> None:
        """Streaming: the body ended; the call stays a call, valid only without `reason`."""
        if not reason:
            self.stream(out)
        out.append(ToolCallEnd(self.index, valid=not reason))

    def commit(
        self, index: int, ids: Callable[[int], str], arguments: str, out: list[Event]
    ) -> None:
        """Held: the call is returned whole."""
        name = self.syntax.name
        assert name is not None
        self.index = index
        out.append(ToolCallBegin(index, self.syntax.call_id or ids(index), self.spelled(name)))
        if arguments:
            out.append(ToolCallArguments(index, self.spelled(arguments)))
        out.append(ToolCallEnd(index))


#: `Call.fragments`: texts of up to `_FRAGMENT_TEXT` characters (a token's, a few),
#: up to `_FRAGMENTS` a call (a few hundred kB at most, dropped with the call).
_FRAGMENT_TEXT = 64
_FRAGMENTS = 4096

_new_event = object.__new__
_set_index = ToolCallArguments.index.__set__  # type: ignore[attr-defined,misc]
_set_text = ToolCallArguments.text.__set__  # type: ignore[attr-defined,misc]


def _fragment(index: int, text: str) -> ToolCallArguments:
    """`ToolCallArguments(index, text)`, built as the frozen dataclass's own `__init__`
    would (its per-field `object.__setattr__` is half the cost of a streamed token)."""
    event: ToolCallArguments = _new_event(ToolCallArguments)
    _set_index(event, index)
    _set_text(event, text)
    return event


class _Echoes:
    """Counts the delimiters that open call structure spelled from ordinary ids (a
    gated vocabulary keeps them text). A tail that could begin one is kept, so the
    count does not depend on where deltas end."""

    __slots__ = ("count", "lead", "scanner", "tail")

    def __init__(self, scanner: Scanner, lead: str) -> None:
        self.scanner = scanner
        self.lead = lead  # every echo begins with it ("" when they differ)
        self.count = 0
        self.tail = ""

    def see(self, text: str) -> None:
        buf = self.tail + text
        pos = 0
        match = self.scanner.search(buf, pos)
        while match is not None:
            self.count += 1
            pos = match.end()
            match = self.scanner.search(buf, pos)
        keep = self.scanner.holdback(buf, pos)
        self.tail = buf[len(buf) - keep :] if keep else ""


@dataclass(frozen=True, slots=True)
class ParserStats:
    """What a parser saw so far (`Parser.stats`): what it neutralized, not output."""

    #: Delimiters that open call structure (`Format.entries`), spelled from ordinary
    #: ids under a gated vocabulary, so kept as text: echoes of markup, never calls.
    #: Always 0 when the format is not gated (text matching cannot tell them apart).
    echoes: int = 0
    #: Calls released as content (malformed, truncated, undeclared...): parse fallbacks.
    released_calls: int = 0
    #: Sections released as content, having returned no call.
    released_sections: int = 0


class _Tally:
    __slots__ = ("calls", "sections")

    def __init__(self) -> None:
        self.calls = 0
        self.sections = 0


def _default_call_id(index: int) -> str:
    return f"call_{index}"


class Parser:
    """Turns one output stream of token ids into events. One parser per choice."""

    _t: Tables  # the format's tables in the mode fixed by the first feed

    def __init__(
        self,
        format: str | Format,
        tokenizer: Tokenizer | None,
        *,
        tools: Sequence[Any] | None = None,
        tool_choice: Any = "auto",
        parallel_tool_calls: bool = True,
        in_reasoning: bool | None = None,
        strict: bool = False,
        stream_arguments: bool = False,
        call_id: Callable[[int], str] | None = None,
        bare_calls: bool = False,
    ) -> None:
        if not isinstance(format, Format | str):
            raise UsageError(
                f"format must be a format name or a Format, got {type(format).__name__}"
            )
        if tokenizer is not None and not isinstance(tokenizer, Tokenizer):
            raise UsageError(
                f"tokenizer must be a toolwire.Tokenizer (load_tokenizer(path)) or None, "
                f"got {type(tokenizer).__name__}"
            )
        self.format = format if isinstance(format, Format) else get_format(format)
        self.tokenizer = tokenizer
        self.tools = Tools.from_request(tools, tool_choice, parallel_tool_calls)
        self.strict = strict
        self.stream_arguments = stream_arguments
        self._call_id = call_id or _default_call_id
        if in_reasoning is None:
            in_reasoning = self.format.starts_in_reasoning
        if in_reasoning and self.format.reasoning is None:
            raise UsageError(f"format {self.format.name!r} has no reasoning block")
        lex = lexicon(self.format, tokenizer)
        #: True when every delimiter that opens call structure is matched by token id
        #: (never for calls that no token opens, `Format.anchor`).
        #: Call bodies that stand alone without their wrapper (`Format.bare`) are
        #: recovered: their opener is text, so such a parser is not gated.
        self.bare_calls = bare_calls and self.format.bare is not None
        self.gated = is_gated(self.format, tokenizer) and not self.bare_calls
        self._drop = lex.drop
        self._mode: Mode | None = None  # fixed by the first feed
        self._scanners: Mapping[State, Scanner] = {}
        self._decoder = tokenizer.detokenizer() if tokenizer is not None else None
        self._state = State.REASONING if in_reasoning else State.CONTENT
        self._held = ""  # a tail that could still begin a delimiter
        self._content = _Run(Content)
        self._reasoning = _Run(Reasoning)
        # Payloads: of CALL, of an open section (SECTION, and CALL inside it), of HEADER,
        # and of CONTENT for a format whose calls no token opens.
        self._call: _Call | None = None
        self._section: _Section | None = None
        self._header: _Header | None = None
        header = self.format.header
        if header is not None and header.initial and not in_reasoning:
            self._state = State.HEADER  # the prompt opened it
            self._header = _Header("", self._content.boundary())
        anchor = self.format.anchor
        self._anchor = _Anchor(anchor.begins) if anchor is not None else None
        self._calls = 0  # calls returned
        self._cut = False  # finish(reason="length"): the output was cut off
        self._finished = False
        self._to_literal: Mapping[int, str] = {}
        self._body_literal: Mapping[int, str] = {}
        self._id_forms: Mapping[int, str] = {}
        self._fast: frozenset[State] = frozenset()
        self._plain_texts: Mapping[int, str] | None = None
        self._echoes: _Echoes | None = None
        self._tally = _Tally()

    # -- public API ----------------------------------------------------------------

    @property
    def stats(self) -> ParserStats:
        """What the parser saw so far: echoed delimiters and released structure."""
        echoes = self._echoes
        return ParserStats(
            echoes=echoes.count if echoes is not None else 0,
            released_calls=self._tally.calls,
            released_sections=self._tally.sections,
        )

    @property
    def state(self) -> State:
        """Where the machine is, as `toolwire.lexicon.TRANSITIONS` names it (for tests
        and tracing: output is in the events, never here)."""
        return self._state

    def feed(self, ids: Sequence[int]) -> list[Event]:
        """Feed output token ids (any number); return the events they complete.

        An id the vocabulary has no text for decodes to nothing; anything but a
        sequence of integers is a `UsageError`.
        """
        kind = type(ids)
        if (
            kind is not list
            and kind is not tuple
            and (isinstance(ids, str | bytes | Mapping) or not isinstance(ids, Sequence))
        ):
            raise UsageError(f"feed() takes a list of token ids, got {kind.__name__}")
        try:  # free unless raised: an id that is not an integer fails a lookup below
            if self._mode is not _IDS or self._finished:
                self._start(_IDS)
            decoder = self._decoder
            if decoder is None:
                raise UsageError("feed() needs a tokenizer; use feed_text() for text")
            echoes = self._echoes
            # Ordinary ids whose text needs no decoder (nothing pending): their text
            # holds no sentinel, so the scan skips the search in a state whose every
            # delimiter begins with one (`Tables.fast`).
            plain = self._plain_texts
            if plain is not None and not self._held and not decoder.pending:
                if len(ids) == 1:
                    text = plain.get(ids[0])
                else:
                    texts = [plain.get(token) for token in ids]
                    text = None if None in texts else "".join(texts)  # type: ignore[arg-type]
                if text is not None:
                    if echoes is not None and (echoes.tail or echoes.lead in text):
                        echoes.see(text)
                    out: list[Event] = []
                    if self._state in self._fast:  # the scan's step when nothing is found
                        call = self._call
                        if call is not None:
                            if call.held:
                                call.collect(text)  # a held body's sink (`_route`'s own)
                                return out
                            # A streamed value's common step: `_body`'s, in one call.
                            step = call.plain
                            if call.begun and step is not None:
                                fragment = step(text)
                                if fragment is not None:
                                    call.raw.append(text)
                                    if fragment:
                                        out.append(  # (`fragment`, inline)
                                            call.fragments.get(fragment)
                                            or call.new_fragment(fragment)
                                        )
                                    return out
                        size = len(text)
                        stop = self._route(text, 0, size, out, True)
                        if stop < size:  # a self-ending body ended: scan the rest
                            self._run(text[stop:], out, True)
                    else:
                        self._run(text, out, True)
                    return out
            forms, drop = self._id_forms, self._drop
            parts: list[str] = []
            for token in ids:
                form = forms.get(token)
                if form is not None:
                    if decoder.pending:  # an incomplete character ends before a delimiter
                        parts.append(decoder.flush())
                    parts.append(form)
                elif token not in drop:
                    parts.append(decoder.step(token))
            events: list[Event] = []
            text = "".join(parts)
            if echoes is not None and (echoes.tail or echoes.lead in text):
                echoes.see(text)
            self._run(text, events)
            return events
        except TypeError as exc:
            if all(type(token) is int for token in ids):
                raise
            raise UsageError("feed() takes integer token ids") from exc

    def feed_text(self, text: str) -> list[Event]:
        """Feed output text from a text-only backend; delimiters are matched as text."""
        if not isinstance(text, str):
            raise UsageError(f"feed_text() takes a str, got {type(text).__name__}")
        self._start(Mode.TEXT)
        out: list[Event] = []
        self._run(text, out)
        return out

    def finish(self, reason: str | None = None) -> list[Event]:
        """End of output: resolve what is held and return the last events.

        `reason` says why the output ended: "stop" (a stop id or stop string: the model
        ended it), "length" (the token limit, or anything else that cut it off), or
        None when unknown (treated as "stop"). A call whose body did not end is never
        returned after "length" (held mode); after a stop, only when its arguments are
        complete for the declared schema.
        """
        if self._finished:
            raise UsageError("finish() was already called")
        if reason not in (None, "stop", "length"):
            raise UsageError(f"finish(reason=...) must be 'stop', 'length' or None, got {reason!r}")
        self._cut = reason == "length"
        self._start(self._mode or Mode.TEXT)
        self._finished = True
        out: list[Event] = []
        if self._decoder is not None and self._mode is Mode.IDS:
            tail = self._decoder.flush()
            if tail:
                if self._echoes is not None:
                    self._echoes.see(tail)
                self._run(tail, out)
        held, self._held = self._held, ""
        start = 0
        while start < len(held):  # an unfinished delimiter prefix is plain text
            start = self._route(held, start, len(held), out)
        if self._call is not None:
            self._take(TRIGGERED[State.CALL, Trigger.OUTPUT_END], "", out)
        if self._section is not None:
            self._take(TRIGGERED[State.SECTION, Trigger.OUTPUT_END], "", out)
        header = self._header
        if self._state is State.HEADER and header is not None:
            spec = self.format.header
            assert spec is not None
            if spec.unclosed == "content":
                self._unclosed_header(out)
            elif self.strict:
                text = self._literal_text("".join(header.parts))  # non-strict: it is markup
                raise MalformedOutput("the output ended inside a message header", text=text)
        self._content.boundary()
        self._reasoning.boundary()
        return out

    # -- setup ---------------------------------------------------------------------

    def _start(self, mode: Mode) -> None:
        if self._finished:
            raise UsageError("the parser has finished; create a new one per output")
        if self._mode == mode:
            return
        if self._mode is not None:
            raise UsageError("do not mix feed() and feed_text() on one parser")
        self._mode = mode
        t = self._t = tables(self.format, self.tokenizer, mode, self.bare_calls)
        self._id_forms, self._to_literal = t.id_forms, t.to_literal
        self._body_literal = t.body_literal
        self._scanners, self._fast = t.scanners, t.fast
        self._plain_texts = (
            self.tokenizer.plain_texts()
            if mode is Mode.IDS and self.tokenizer is not None
            else None
        )
        self._context = CallContext(tools=self.tools, marks=t.marks)
        self._echoes = _Echoes(t.echo, t.echo_lead) if t.echo is not None else None

    # -- the machine ---------------------------------------------------------------

    def _run(self, text: str, out: list[Event], plain: bool = False) -> None:
        """The scan: search the current state's delimiters, send the text before each
        to the state's sink, act on the delimiter, hold a tail that could begin one.

        `plain`: the text of ordinary ids, which holds no sentinel: in a state whose
        every delimiter begins with one (`Tables.fast`) there is nothing to find and
        nothing to hold, so the search is skipped (the result is the search's)."""
        if self._held:
            buf, plain = self._held + text, False
            self._held = ""
        else:
            buf = text
        fast = self._fast if plain else _NOWHERE
        pos, size = 0, len(buf)
        while pos < size:
            state = self._state
            if state in fast:
                match, end = None, size
            else:
                scanner = self._scanners[state]
                match = scanner.search(buf, pos)
                end = match.start() if match is not None else size - scanner.holdback(buf, pos)
            if end > pos:
                stop = self._route(buf, pos, end, out, plain)
                if stop < end:  # a self-ending call body ended: rescan in the new state
                    pos = stop
                    continue
            if match is None:
                if end < size:
                    self._held = buf[end:]
                return
            form = match.group()
            taken = self._act(form, out)
            pos = match.end() if taken == len(form) else end + taken

    def _route(self, buf: str, start: int, end: int, out: list[Event], plain: bool = False) -> int:
        """Send buf[start:end] to the current state's sink; return where it stopped
        (before `end` only when a self-ending call body ended inside it). `plain`: the
        text holds no sentinel (nothing to spell back)."""
        text = buf[start:end]  # (the whole of buf is buf itself: no copy)
        call = self._call
        if call is not None:  # CALL (its payload is there exactly then)
            # Text of the open call's body (the one way in). A delimiter that does not
            # act inside a call (say `</think>` in a string value) reaches the syntax
            # as the token's text; only the call's marks keep their structural form.
            if not plain and (literal := self._body_literal) and not text.isascii():
                spelled = text.translate(literal)
            else:
                spelled = text
            if call.held:  # collected, parsed once when the body ends
                call.collect(spelled)
                return end
            return start + self._body(text, spelled, out)
        state = self._state
        if state is _CONTENT:
            if self._anchor is not None:
                return self._anchored(buf, start, end, out)
            self._content.add(text if plain else self._literal_text(text), out)
        elif state is _REASONING:
            self._reasoning.add(text if plain else self._literal_text(text), out)
        elif state is _SECTION:
            self._section_text(text, out, markup=False)
        else:
            header = self._header
            assert header is not None
            header.parts.append(text)
        return end

    def _body(self, text: str, spelled: str, out: list[Event]) -> int:
        """A body parsed as it comes (streaming, or one that ends itself) takes
        `spelled`, the body text as its syntax reads it; returns how much of `text`
        it took (less than all only when a self-ending body ended)."""
        call = self._call
        assert call is not None
        used = call.take(spelled)
        if call.begun:  # the common step of a streamed call, without `_stream`'s checks
            fragment = call.syntax.arguments()
            if fragment:
                out.append(call.fragment(call.spelled(fragment)))
        else:
            self._stream(out)
        if call.syntax.done:  # the body ended itself: the table's move for that
            self._take(_BODY_END, "", out)
        if used == len(spelled) or spelled is text:
            return len(text) if used == len(spelled) else used
        literal = self._body_literal
        taken = 0  # a self-ending body ended inside: `used` back onto `text`
        for pos, char in enumerate(text):
            taken += len(literal.get(ord(char), char))
            if taken > used:
                return pos
        return len(text)

    def _anchored(self, buf: str, start: int, end: int, out: list[Event]) -> int:
        """Content of a format whose calls no token opens: a call body may begin at a
        line start (`Format.anchor`). Returns where the body begins, or `end`."""
        anchor = self._anchor
        assert anchor is not None
        pos = start
        while pos < end:
            if anchor.line:
                first = pos
                while first < end and buf[first] in " \t\r\n":
                    first += 1
                if first < end and buf[first] in anchor.begins:
                    self._content.add(buf[pos:first], out)
                    self._take(TRIGGERED[State.CONTENT, Trigger.LINE_CALL], "", out)
                    return first
                anchor.line = first == end
            newline = buf.find("\n", pos, end)
            stop = end if newline < 0 else newline + 1
            self._content.add(self._literal_text(buf[pos:stop]), out)
            anchor.line = anchor.line or newline >= 0
            pos = stop
        return end

    def _act(self, form: str, out: list[Event]) -> int:
        """A delimiter matched: take the step the table names for it in this state,
        and again in the next one while the table says it acts again there. Returns
        how much of `form` was taken (less than all only when the delimiter was text
        of a self-ending body that ended inside it)."""
        transitions = self._t.transitions
        while True:
            step = transitions[self._state, form]
            outcome = self._take(step, form, out)
            if outcome is _TEXT:  # the delimiter is text where it stands
                return self._route(form, 0, len(form), out)
            if outcome not in step.again:
                return len(form)

    def _take(self, step: Transition, form: str, out: list[Event]) -> Outcome:
        """Run one transition: its handler says what happened, the table where the
        machine goes then (`Then`: resolved from the structure the handler left)."""
        call, section = self._call, self._section
        resume = (
            call.resume if call is not None else section.resume if section is not None else None
        )
        outcome = _HANDLERS[step.action](self, form, out)
        to = step.to[outcome]
        if isinstance(to, Then):
            if to is _OUTER:
                to = _SECTION if self._section is not None else _CONTENT
            else:
                assert resume is not None
                to = resume
        self._state = to
        return outcome

    # -- the handlers of `TRANSITIONS` (one per `Action`) ---------------------------
    # Each returns what happened (`Outcome`); the table says where the machine goes.

    def _open_reasoning(self, form: str, out: list[Event]) -> Outcome:
        self._content.boundary()
        return _DONE

    def _close_reasoning(self, form: str, out: list[Event]) -> Outcome:
        self._reasoning.boundary()
        return _DONE

    def _open_section(self, form: str, out: list[Event]) -> Outcome:
        state = self._state
        before = self._run_of(state).boundary()
        self._section = _Section(self._literal_text(form), state, before)
        return _DONE

    def _close_section(self, form: str, out: list[Event]) -> Outcome:
        section = self._section
        assert section is not None
        self._section = None
        if section.structural:  # its delimiters are markup
            self._content.boundary()
            return Outcome.RETURNED
        self._release_section(section, self._literal_text(form), out)
        return _RELEASED

    def _close_call(self, form: str, out: list[Event]) -> Outcome:
        call = self._call
        assert call is not None
        call.close(form)
        return self._end_call(out, closed=True)

    def _next_call(self, form: str, out: list[Event]) -> Outcome:
        """A new call begins (or the output ends): the open body ends unclosed."""
        return self._end_call(out, closed=False)

    def _end_body(self, form: str, out: list[Event]) -> Outcome:
        """A delimiter the body cannot hold (the section's close, a header's): the
        body ends there."""
        return self._end_call(out, closed=form != self._t.c_open)

    def _section_close_in_call(self, form: str, out: list[Event]) -> Outcome:
        if self._section is not None:
            return self._end_body(form, out)
        return _TEXT  # it closes nothing: text of the body (released with it, if it is)

    def _open_header(self, form: str, out: list[Event]) -> Outcome:
        state = self._state
        before = self._run_of(state).boundary()
        self._header = _Header(form, before if state is State.CONTENT else None)
        return _DONE

    def _new_header(self, form: str, out: list[Event]) -> Outcome:
        """A new message begins inside a header: the header so far is markup (or
        content, as the format says)."""
        header = self._header
        assert header is not None
        if self._unclosed_header(out):
            self._header = _Header(form, self._content.boundary())
        else:
            header.parts = [form]
            self._header = header
        return _DONE

    def _drop_header(self, form: str, out: list[Event]) -> Outcome:
        """A message ended inside its header: the header is markup (or content)."""
        self._unclosed_header(out)
        return _DONE

    def _unclosed_header(self, out: list[Event]) -> bool:
        """A header that never closed ends: its text after the opener is content where
        the format says so (`Header.unclosed`; True then), else markup."""
        header, self._header = self._header, None
        spec = self.format.header
        assert header is not None and spec is not None
        if spec.unclosed != "content":
            return False
        self._content.add(self._literal_text("".join(header.parts[1:])), out)
        return True

    def _enter_body(self, form: str, out: list[Event]) -> Outcome:
        """A header closed: route the message body as the format's hook says."""
        route_of = self.format.header
        header = self._header
        assert route_of is not None and header is not None
        text = "".join(header.parts) + form
        self._header = None
        route = route_of.route(self._literal_text(text))
        before = header.before
        if route.content:  # prose, not metadata: content, then the body
            self._content.add(route.content, out)
            text = form
            before = self._content.boundary() if route.kind != "content" else None
        if route.kind == "reasoning":
            return Outcome.TO_REASONING
        if route.kind == "call":
            # Released, the call goes back where its header began (content's state then).
            self._open_call(text, out, name=route.name, before=before, resume=_CONTENT)
            return Outcome.TO_CALL
        return Outcome.TO_CONTENT

    def _end_message(self, form: str, out: list[Event]) -> Outcome:
        self._run_of(self._state).boundary()
        return _DONE

    def _line_start(self, form: str, out: list[Event]) -> Outcome:
        self._content.boundary()
        if self._anchor is not None:
            self._anchor.line = True
        return _DONE

    def _text(self, form: str, out: list[Event]) -> Outcome:
        """A call's inner mark outside a call body is text."""
        self._run_of(self._state).add(self._literal_text(form), out)
        return _DONE

    def _section_markup(self, form: str, out: list[Event]) -> Outcome:
        self._section_text(form, out, markup=True)
        return _DONE

    def _section_mark(self, form: str, out: list[Event]) -> Outcome:
        self._section_text(form, out, markup=False)
        return _DONE

    def _open_bare(self, form: str, out: list[Event]) -> Outcome:
        """A body that stands alone begins: provisional, parsed as it comes, returned
        only once it ended itself and names a declared tool."""
        bare = self.format.bare
        assert bare is not None
        return self._open_call(form, out, bare=bare.syntax)

    def _body_text(self, form: str, out: list[Event]) -> Outcome:
        return _TEXT

    def _consume(self, form: str, out: list[Event]) -> Outcome:
        """A delimiter that does not act where it stands (a stray closer) is markup."""
        return _DONE

    # -- sections, runs and calls --------------------------------------------------

    def _section_text(self, text: str, out: list[Event], *, markup: bool) -> None:
        """Text inside a section (`markup`: a stray delimiter that is not a mark)."""
        section = self._section
        assert section is not None
        literal = self._literal_text(text)
        if not section.structural:
            section.held.append((literal, markup))
        elif not markup:
            self._content.add(literal, out)

    def _structural(self, out: list[Event]) -> None:
        """A call of the open section is returned: the section is structure, and the
        text it held so far is content (its delimiters are markup)."""
        section = self._section
        if section is None or section.structural:
            return
        section.structural = True
        content = self._content
        for text, markup in section.held:
            if not markup:
                content.add(text, out)
        section.held.clear()
        content.boundary()

    def _release_section(self, section: _Section, closer: str, out: list[Event]) -> None:
        """A section that returned no call is content, every character of it (the
        table then resumes where it began)."""
        self._tally.sections += 1
        run = self._run_of(section.resume)
        run.resume(section.before)
        run.add(section.opener + "".join(text for text, _ in section.held) + closer, out)

    def _run_of(self, state: State) -> _Run:
        return self._reasoning if state is State.REASONING else self._content

    def _open_call(
        self,
        form: str,
        out: list[Event],
        name: str | None = None,
        before: _Snapshot | None = None,
        resume: State | None = None,
        bare: Callable[[CallContext], CallSyntax] | None = None,
    ) -> Outcome:
        """A call opens; `resume`: where it goes back to if released (by default the
        state it opened in); `bare`: the syntax of a body standing alone."""
        resume = self._state if resume is None else resume
        interrupted = self._run_of(resume).boundary()
        before = interrupted if before is None else before
        provisional = bare is not None or (
            self.format.section is not None and self._section is None
        )
        context = self._context if name is None else replace(self._context, name=name)
        # Held: the body is only collected, and parsed once when the call closes.
        # Otherwise it is parsed as it comes (streaming, or a body that ends itself).
        held = (
            bare is None
            and self._t.c_close is not None
            and (provisional or not self.stream_arguments)
        )
        syntax = (bare or self.format.syntax)(context)
        self._call = _Call(
            syntax,
            form,
            resume,
            before,
            provisional=provisional,
            held=held,
            spell=(self._to_literal, self._t.sentinel.search) if self._t.sentinel else None,
        )
        return _DONE

    def _stream(self, out: list[Event]) -> None:
        """Streaming mode: emit the name once declared, then argument fragments."""
        call = self._call
        assert call is not None
        if not self.stream_arguments or call.provisional:
            return
        if not call.begun:
            name = call.syntax.name
            if name is None or not self._may_commit(name):
                return
            index = self._calls
            self._calls += 1
            self._structural(out)
            call.begin(index, self._call_id, out)
        call.stream(out)

    def _may_commit(self, name: str) -> bool:
        if not self.tools.accepts(name):
            return False
        return self.tools.parallel or self._calls == 0

    def _end_call(self, out: list[Event], *, closed: bool) -> Outcome:
        """The body ended (closed by its delimiter, or not). Commit or release it; a
        body that ended on a list separator is followed by the next at once."""
        call = self._call
        assert call is not None
        self._call = None
        if self._anchor is not None:
            self._anchor.line = True
        outcome = self._settle(call, out, closed)
        # `Chained` syntaxes say whether another body follows (getattr: a runtime
        # Protocol check costs more than the whole call on this path).
        if closed and getattr(call.syntax, "follows", False):
            # The next body resumes where this one left the machine.
            after = call.resume if outcome is _RELEASED else None
            if after is None:
                after = _SECTION if self._section is not None else _CONTENT
            self._open_call("", out, resume=after)
            return Outcome.FOLLOWED
        return outcome

    def _settle(self, call: _Call, out: list[Event], closed: bool) -> Outcome:
        if self.tools.choice == "none":
            self._structural(out)
            return Outcome.RETURNED  # tool markup is consumed: no call, nothing in content
        reason, arguments = call.verdict(
            self.tools, self._calls, closed=closed, cut=self._cut, anchored=self._anchor is not None
        )
        if call.begun:  # streaming: the call stays a call, complete or not (`valid` says)
            call.end(reason, out)
            if reason and self.strict:
                raise MalformedOutput(reason, text=self._literal_text(call.text()))
            return Outcome.RETURNED
        if reason:
            self._release(call, reason, out)
            return _RELEASED
        self._structural(out)
        index = self._calls
        self._calls += 1
        call.commit(index, self._call_id, arguments, out)
        return Outcome.RETURNED

    def _release(self, call: _Call, reason: str, out: list[Event]) -> None:
        """A call that cannot be returned is content, every character of it (or, in its
        section, decided with it); strict, it is an error."""
        text = self._literal_text(call.text())
        if self.strict:
            raise MalformedOutput(reason, text=text)
        self._tally.calls += 1
        section = self._section
        if call.resume is State.SECTION and section is not None and not section.structural:
            section.held.append((text, False))  # decided with its section
            return
        run = self._run_of(call.resume)
        run.resume(call.before)
        run.add(text, out)
        if self._anchor is not None:
            self._anchor.line = text.rstrip(" \t").endswith("\n")

    def _literal_text(self, text: str) -> str:
        """Structural text back to what the model's output said."""
        return text.translate(self._to_literal) if self._to_literal else text


_Handler = Callable[[Parser, str, list[Event]], Outcome]

#: Each `Action` of the transition table -> its handler.
_HANDLERS: Mapping[Action, _Handler] = {
    Action.OPEN_REASONING: Parser._open_reasoning,
    Action.CLOSE_REASONING: Parser._close_reasoning,
    Action.OPEN_SECTION: Parser._open_section,
    Action.CLOSE_SECTION: Parser._close_section,
    Action.OPEN_CALL: Parser._open_call,
    Action.CLOSE_CALL: Parser._close_call,
    Action.NEXT_CALL: Parser._next_call,
    Action.END_BODY: Parser._end_body,
    Action.SECTION_CLOSE_IN_CALL: Parser._section_close_in_call,
    Action.OPEN_HEADER: Parser._open_header,
    Action.NEW_HEADER: Parser._new_header,
    Action.DROP_HEADER: Parser._drop_header,
    Action.ENTER_BODY: Parser._enter_body,
    Action.END_MESSAGE: Parser._end_message,
    Action.LINE_START: Parser._line_start,
    Action.OPEN_BARE: Parser._open_bare,
    Action.BODY_TEXT: Parser._body_text,
    Action.TEXT: Parser._text,
    Action.SECTION_MARKUP: Parser._section_markup,
    Action.SECTION_TEXT: Parser._section_mark,
    Action.CONSUME: Parser._consume,
}


def parse(
    format: str | Format,
    tokenizer: Tokenizer | None,
    ids: Sequence[int],
    *,
    reason: str | None = None,
    **options: Any,
) -> Message:
    """Parse a whole output: `feed(ids)` then `finish(reason)` on one parser (one path)."""
    parser = Parser(format, tokenizer, **options)
    events = parser.feed(ids)
    events += parser.finish(reason)
    return Message.from_events(events)
