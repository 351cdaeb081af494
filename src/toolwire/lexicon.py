"""A format's delimiters as one vocabulary sees them: resolved once, shared by parsers.

Data flow::

    (Format, Tokenizer)            -> Lexicon     which delimiters are token ids here
    (Lexicon, mode)                -> Tables      what each parser state searches for,
                                                  and what each match does there

The machine's transitions are one table, `TRANSITIONS`: (state, role) -> `Transition`,
an explicit entry for every pair, naming the action (one handler of the parser each)
and the next state for each of the action's outcomes; handlers say what happened
(`Outcome`), never where the machine goes. A destination that depends on the
structure just left is named too (`Then`: back where a released structure began, or
the open section). The few moves no delimiter makes (a self-ending body's end, an
anchored body's start, the end of output) are the same kind of entry, in `TRIGGERED`.
A format only says which structural forms play which role; `Tables.transitions`
composes the two once, (state, form) -> `Transition`, resolving a form that plays
several roles by that state's precedence (`PRECEDENCE`).

Both are pure functions of their inputs, so they are memoized per tokenizer here
(`_LEXICONS`, `_TABLES`: weakly keyed, dropped with the tokenizer): building a `Parser`
per request then costs a dictionary lookup, not a pass over the vocabulary's added tokens.

Added tokens that are not delimiters. The vocabulary says which of its added tokens
are special (`Tokenizer.special_ids`: Hugging Face's `"special": true`, llama.cpp's
control tokens, Mistral's control ids): those are never text, dropped wherever they
stand (turn markers, end of text), unless the format keeps one (`Format.keep`). Every
other added token (Qwen's `<tool_response>` and `<|fim_prefix|>`, DeepSeek's
`<｜User｜>`, Seed-OSS's `<seed:cot_budget_reflect>`) is its text wherever it does not
act as one of the format's delimiters: in content, reasoning, argument values and
released structure alike, as `decode(ids, skip_special_tokens=True)` reads it. Only a
format's own delimiter has a rule of its own where it does not act (markup outside
structure, its text inside a call body or released structure).

Structural text. In "ids" mode a delimiter's token id becomes a sentinel character, a
lone surrogate (U+D800 + k), which no decoded UTF-8 can contain: the same characters
spelled from ordinary ids can never match a delimiter. In "text" mode (text-only
backends, or a vocabulary without the delimiters' tokens) delimiters are their text.
"""

from __future__ import annotations

import enum
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from toolwire.holdback import Holdback
from toolwire.tokenizer import Tokenizer

if TYPE_CHECKING:  # read as a type only: `toolwire.formats.is_gated` imports this module
    from toolwire.formats.spec import Format

__all__ = [
    "PRECEDENCE",
    "TRANSITIONS",
    "TRIGGERED",
    "Action",
    "Lexicon",
    "Mode",
    "Outcome",
    "Role",
    "Scanner",
    "State",
    "Tables",
    "Then",
    "Transition",
    "Trigger",
    "lexicon",
    "tables",
]

SENTINEL_BASE = 0xD800  # lone surrogates: never produced by decoding UTF-8


class State(enum.IntEnum):
    """Where the machine is. (IntEnum: hashed in C on the per-token path.)"""

    CONTENT = 0
    REASONING = 1
    SECTION = 2
    CALL = 3
    HEADER = 4


class _Named(enum.Enum):
    """An enum whose members hash by identity: a member is a singleton and equal only
    to itself, and `Enum.__hash__` (hash of the name, in Python) costs a Python call
    at each lookup the machine makes per delimiter (`_HANDLERS[action]`,
    `step.to[outcome]`)."""

    __hash__ = object.__hash__


class Mode(enum.StrEnum):
    """What a parser is fed: token ids (delimiters matched by id where the vocabulary
    has them) or text (delimiters matched as text)."""

    IDS = "ids"
    TEXT = "text"


class Role(_Named):
    """What a delimiter is in a format (`Format` names one or more per role)."""

    REASONING_OPEN = "reasoning.open"
    REASONING_CLOSE = "reasoning.close"
    SECTION_OPEN = "section.open"
    SECTION_CLOSE = "section.close"
    CALL_OPEN = "call.open"
    CALL_CLOSE = "call.close"
    #: A call's or a header's inner mark (`Format.marks`, `Header.marks`).
    MARK = "mark"
    #: Any of `Header.opens`; inside a header, only the first (a new message).
    HEADER_OPEN = "header.open"
    HEADER_CLOSE = "header.close"
    HEADER_END = "header.end"
    #: One of `Anchor.after`: an anchored call may begin after it.
    AFTER = "anchor.after"
    #: `Bare.opener`: a call body that stands alone begins (searched only when
    #: standalone bodies are recovered, `Parser(bare_calls=True)`).
    BARE_OPEN = "bare.open"


class Action(_Named):
    """What the machine does with a delimiter (a handler of `Parser` each)."""

    OPEN_REASONING = "open reasoning"
    CLOSE_REASONING = "close reasoning"
    OPEN_SECTION = "open section (held until a call of it is returned)"
    CLOSE_SECTION = "close section (markup if structural, else released whole)"
    OPEN_CALL = "open call"
    CLOSE_CALL = "close call (commit or release it)"
    #: CALL: a new call begins (or the output ends); the open body did not close.
    NEXT_CALL = "end the body unclosed"
    #: CALL: a delimiter the body cannot hold ends it.
    END_BODY = "end the body closed"
    #: CALL: a section close with no section open closes nothing: body text.
    SECTION_CLOSE_IN_CALL = "body text without a section, else end the body"
    OPEN_HEADER = "open header"
    NEW_HEADER = "the header so far is markup; a new one begins"
    DROP_HEADER = "the header is markup; back to content"
    ENTER_BODY = "route the message body as the header says"
    END_MESSAGE = "a message body ends: back to content"
    LINE_START = "an anchored call may begin here"
    #: A body that stands alone begins (provisional: held until it ends).
    OPEN_BARE = "open a standalone body"
    #: Inside a body: text of it.
    BODY_TEXT = "body text"
    #: Outside a call body an inner mark is text.
    TEXT = "text"
    #: Inside a section: a delimiter that is not a mark, held as markup.
    SECTION_MARKUP = "section markup"
    #: Inside a section: an inner mark, held as text.
    SECTION_TEXT = "section text"
    #: A delimiter that does not act where it stands (a stray closer): markup.
    CONSUME = "consumed markup"


_OUTSIDE = (Role.CALL_OPEN, Role.HEADER_OPEN, Role.HEADER_END, Role.AFTER)

#: Per state, the order in which a form that plays several roles takes one (roles not
#: listed come after, in `Role` order; their actions there are all alike).
PRECEDENCE: Mapping[State, tuple[Role, ...]] = {
    State.CONTENT: (Role.BARE_OPEN, *_OUTSIDE, Role.SECTION_OPEN, Role.REASONING_OPEN, Role.MARK),
    State.REASONING: (
        Role.BARE_OPEN,
        *_OUTSIDE,
        Role.SECTION_OPEN,
        Role.REASONING_CLOSE,
        Role.MARK,
    ),
    State.SECTION: (*_OUTSIDE, Role.SECTION_CLOSE, Role.MARK),
    State.CALL: (Role.CALL_CLOSE, Role.SECTION_CLOSE, Role.CALL_OPEN),
    State.HEADER: (Role.HEADER_CLOSE, Role.HEADER_OPEN),
}


class Outcome(_Named):
    """How an action came out, where the table names a destination for each outcome
    (the handler says what happened; the table says where the machine goes then)."""

    #: The action's one outcome.
    DONE = "done"
    #: A call was returned (or consumed, with tool_choice "none"); a section it
    #: belonged to is structure.
    RETURNED = "returned"
    #: The structure cannot be returned: released as text where it began.
    RELEASED = "released"
    #: A body ended on a list separator: the next body begins at once.
    FOLLOWED = "another body follows"
    #: A section's closer with no section open: text of the call's body.
    TEXT = "text of the body"
    #: A header routed its body to reasoning, content or a call (`Route.kind`).
    TO_REASONING = "routed to reasoning"
    TO_CONTENT = "routed to content"
    TO_CALL = "routed to a call"


class Then(_Named):
    """A destination the table names that the structure just left resolves."""

    #: Where the released structure began (`resume` of its payload).
    RESUME = "back where the released structure began"
    #: The open section, else content: where a returned call leaves the machine.
    OUTER = "the open section, else content"


class Transition(NamedTuple):
    """One entry of the table: what a delimiter does in a state, and where it leads."""

    action: Action
    #: Each outcome of the action -> the next state (or how to find it, `Then`).
    to: Mapping[Outcome, State | Then]
    #: Outcomes after which the same delimiter acts again, in the next state (a body
    #: ended because it could not hold the delimiter).
    again: frozenset[Outcome] = frozenset()


def _go(action: Action, state: State) -> Transition:
    return Transition(action, {Outcome.DONE: state})


#: Where a call body's end leads: a returned call to its section (or content), a
#: released one back where it began, a list's separator to the next body.
_AFTER_CALL: Mapping[Outcome, State | Then] = {
    Outcome.RETURNED: Then.OUTER,
    Outcome.RELEASED: Then.RESUME,
    Outcome.FOLLOWED: State.CALL,
}
#: A delimiter the body cannot hold ends it, then acts in the state that follows.
_ENDS_BODY = Transition(Action.END_BODY, _AFTER_CALL, frozenset(_AFTER_CALL))
#: Inside a header, anything but its close or a new header: it is markup.
_HEADER_ENDS = _go(Action.DROP_HEADER, State.CONTENT)


#: The machine: what each delimiter role does in each state and where it leads, an
#: explicit entry for every pair (no fallthrough). Outside a call, what opens
#: structure acts alike in content, reasoning and a section; a section holds any
#: other delimiter (a mark as text); a call's body ends at anything it cannot hold;
#: a header ends at its close or, as markup, at anything else it searches for.
_TABLE: Mapping[State, Mapping[Role, Transition]] = {
    # stray closers are markup; marks are text
    State.CONTENT: {
        Role.REASONING_OPEN: _go(Action.OPEN_REASONING, State.REASONING),
        Role.REASONING_CLOSE: _go(Action.CONSUME, State.CONTENT),
        Role.SECTION_OPEN: _go(Action.OPEN_SECTION, State.SECTION),
        Role.SECTION_CLOSE: _go(Action.CONSUME, State.CONTENT),
        Role.CALL_OPEN: _go(Action.OPEN_CALL, State.CALL),
        Role.CALL_CLOSE: _go(Action.CONSUME, State.CONTENT),
        Role.MARK: _go(Action.TEXT, State.CONTENT),
        Role.HEADER_OPEN: _go(Action.OPEN_HEADER, State.HEADER),
        Role.HEADER_CLOSE: _go(Action.CONSUME, State.CONTENT),
        Role.HEADER_END: _go(Action.END_MESSAGE, State.CONTENT),
        Role.AFTER: _go(Action.LINE_START, State.CONTENT),
        Role.BARE_OPEN: _go(Action.OPEN_BARE, State.CALL),
    },
    # as content, but only a close ends it
    State.REASONING: {
        Role.REASONING_OPEN: _go(Action.CONSUME, State.REASONING),
        Role.REASONING_CLOSE: _go(Action.CLOSE_REASONING, State.CONTENT),
        Role.SECTION_OPEN: _go(Action.OPEN_SECTION, State.SECTION),
        Role.SECTION_CLOSE: _go(Action.CONSUME, State.REASONING),
        Role.CALL_OPEN: _go(Action.OPEN_CALL, State.CALL),
        Role.CALL_CLOSE: _go(Action.CONSUME, State.REASONING),
        Role.MARK: _go(Action.TEXT, State.REASONING),
        Role.HEADER_OPEN: _go(Action.OPEN_HEADER, State.HEADER),
        Role.HEADER_CLOSE: _go(Action.CONSUME, State.REASONING),
        Role.HEADER_END: _go(Action.END_MESSAGE, State.CONTENT),
        Role.AFTER: _go(Action.LINE_START, State.REASONING),
        Role.BARE_OPEN: _go(Action.OPEN_BARE, State.CALL),
    },
    # held until a call of it is returned
    State.SECTION: {
        Role.REASONING_OPEN: _go(Action.SECTION_MARKUP, State.SECTION),
        Role.REASONING_CLOSE: _go(Action.SECTION_MARKUP, State.SECTION),
        Role.SECTION_OPEN: _go(Action.SECTION_MARKUP, State.SECTION),
        Role.SECTION_CLOSE: Transition(
            Action.CLOSE_SECTION,
            {Outcome.RETURNED: State.CONTENT, Outcome.RELEASED: Then.RESUME},
        ),
        Role.CALL_OPEN: _go(Action.OPEN_CALL, State.CALL),
        Role.CALL_CLOSE: _go(Action.SECTION_MARKUP, State.SECTION),
        Role.MARK: _go(Action.SECTION_TEXT, State.SECTION),
        Role.HEADER_OPEN: _go(Action.OPEN_HEADER, State.HEADER),
        Role.HEADER_CLOSE: _go(Action.SECTION_MARKUP, State.SECTION),
        Role.HEADER_END: _go(Action.END_MESSAGE, State.CONTENT),
        Role.AFTER: _go(Action.LINE_START, State.SECTION),
        Role.BARE_OPEN: _go(Action.SECTION_TEXT, State.SECTION),
    },
    # anything else ends the body, then acts anew
    State.CALL: {
        Role.REASONING_OPEN: _ENDS_BODY,
        Role.REASONING_CLOSE: _ENDS_BODY,
        Role.SECTION_OPEN: _ENDS_BODY,
        Role.SECTION_CLOSE: Transition(
            Action.SECTION_CLOSE_IN_CALL,
            {**_AFTER_CALL, Outcome.TEXT: State.CALL},
            frozenset(_AFTER_CALL),
        ),
        Role.CALL_OPEN: Transition(Action.NEXT_CALL, _AFTER_CALL, frozenset(_AFTER_CALL)),
        Role.CALL_CLOSE: Transition(Action.CLOSE_CALL, _AFTER_CALL),
        Role.MARK: _ENDS_BODY,
        Role.HEADER_OPEN: _ENDS_BODY,
        Role.HEADER_CLOSE: _ENDS_BODY,
        Role.HEADER_END: _ENDS_BODY,
        Role.AFTER: _ENDS_BODY,
        Role.BARE_OPEN: Transition(Action.BODY_TEXT, {Outcome.TEXT: State.CALL}),
    },
    # only the first header opener is searched here
    State.HEADER: {
        Role.REASONING_OPEN: _HEADER_ENDS,
        Role.REASONING_CLOSE: _HEADER_ENDS,
        Role.SECTION_OPEN: _HEADER_ENDS,
        Role.SECTION_CLOSE: _HEADER_ENDS,
        Role.CALL_OPEN: _HEADER_ENDS,
        Role.CALL_CLOSE: _HEADER_ENDS,
        Role.MARK: _HEADER_ENDS,
        Role.HEADER_OPEN: _go(Action.NEW_HEADER, State.HEADER),
        Role.HEADER_CLOSE: Transition(
            Action.ENTER_BODY,
            {
                Outcome.TO_REASONING: State.REASONING,
                Outcome.TO_CONTENT: State.CONTENT,
                Outcome.TO_CALL: State.CALL,
            },
        ),
        Role.HEADER_END: _HEADER_ENDS,
        Role.AFTER: _HEADER_ENDS,
        Role.BARE_OPEN: _HEADER_ENDS,
    },
}
TRANSITIONS: Mapping[tuple[State, Role], Transition] = {
    (state, role): step for state, row in _TABLE.items() for role, step in row.items()
}


class Trigger(_Named):
    """What moves the machine besides a delimiter (the syntax or the output says so)."""

    #: A body that ends itself ended (`CallSyntax.done`, no closing delimiter).
    BODY_END = "a body that ends itself ended"
    #: A line of content begins with one of `Anchor.begins`: an anchored body begins.
    LINE_CALL = "an anchored call begins at a line start"
    #: The output ended inside a call, or inside a section.
    OUTPUT_END = "the output ended"


#: The moves no delimiter makes, in the states where they happen.
TRIGGERED: Mapping[tuple[State, Trigger], Transition] = {
    (State.CALL, Trigger.BODY_END): Transition(Action.CLOSE_CALL, _AFTER_CALL),
    (State.CALL, Trigger.OUTPUT_END): Transition(Action.NEXT_CALL, _AFTER_CALL),
    (State.SECTION, Trigger.OUTPUT_END): Transition(
        Action.CLOSE_SECTION, {Outcome.RETURNED: State.CONTENT, Outcome.RELEASED: Then.RESUME}
    ),
    (State.CONTENT, Trigger.LINE_CALL): _go(Action.OPEN_CALL, State.CALL),
}


class Scanner:
    """Finds the leftmost (then longest) delimiter; says how much of a tail to hold."""

    __slots__ = ("_regex", "holdback", "longest", "sentinel_led")

    def __init__(self, patterns: Sequence[str]) -> None:
        ordered = sorted(set(patterns), key=len, reverse=True)
        # A pattern standing inside a longer one (DSML's `｜DSML｜` mark inside its tags)
        # is not searched alone: the leftmost search would find it first.
        ordered = [p for p in ordered if not any(p in q[1:] for q in ordered if q != p)]
        self._regex = re.compile("|".join(re.escape(p) for p in ordered)) if ordered else None
        #: holdback(text, start): length of the longest tail of text[start:] that begins
        #: some delimiter (the bound method itself: this runs on every feed).
        self.holdback = Holdback(ordered).tail
        self.longest = max((len(p) for p in ordered), default=0)
        #: Every pattern starts with a token's sentinel: ordinary text cannot begin one.
        self.sentinel_led = all(SENTINEL_BASE <= ord(p[0]) < 0xE000 for p in ordered)

    def search(self, text: str, start: int) -> re.Match[str] | None:
        return self._regex.search(text, start) if self._regex is not None else None


@dataclass(frozen=True)
class Lexicon:
    """Which of a format's delimiters are token ids in one vocabulary."""

    #: Each delimiter -> its structural form, when the format is gated here, else None.
    gated_forms: Mapping[str, str] | None
    #: Delimiter token id -> its sentinel character.
    sentinels: Mapping[int, str]
    #: Delimiter token id -> the token's text (to release held text as written).
    literal: Mapping[int, str]
    #: Delimiters with no token of their own, matched as text inside structure.
    plain: frozenset[str]
    #: Special tokens (the vocabulary's own flag) that are neither delimiters nor
    #: kept: dropped wherever they stand. Any other added token is text.
    drop: frozenset[int]


#: Per tokenizer: format -> its lexicon; (format, mode) -> its tables. Weakly keyed,
#: so a tokenizer's entries go when it does (the tokenizer holds no cache of ours).
_LEXICONS: weakref.WeakKeyDictionary[Tokenizer, dict[Format, Lexicon]] = weakref.WeakKeyDictionary()
_TABLES: weakref.WeakKeyDictionary[Tokenizer, dict[tuple[Format, str, bool], Tables]] = (
    weakref.WeakKeyDictionary()
)


def is_gated(fmt: Format, tokenizer: Tokenizer | None) -> bool:
    """True when every delimiter that opens call structure is a token of `tokenizer`,
    so structure is decided by id (never for calls no token opens, `Format.anchor`)."""
    return lexicon(fmt, tokenizer).gated_forms is not None and fmt.anchor is None


def lexicon(fmt: Format, tokenizer: Tokenizer | None) -> Lexicon:
    """Resolve `fmt` against `tokenizer` (memoized per tokenizer)."""
    if tokenizer is None:
        return Lexicon(None, {}, {}, frozenset(), frozenset())
    memo = _LEXICONS.get(tokenizer)
    if memo is None:
        memo = _LEXICONS[tokenizer] = {}
    found = memo.get(fmt)
    if found is None:
        found = memo[fmt] = _resolve(fmt, tokenizer)
    return found


def _resolve(fmt: Format, tokenizer: Tokenizer) -> Lexicon:
    """Map delimiters to structural forms when the format is gated by this vocabulary.

    A delimiter holding an added token is matched by id (its form has a sentinel for
    that token). The format is gated when every delimiter that opens call structure
    from content (`Format.entries`) holds one. Any other delimiter that holds none
    keeps its text as its form: a reasoning delimiter is then matched as text where
    it acts (an open in content, a close in reasoning), which moves text between
    content and reasoning but can never make a call; the rest are searched only
    inside structure (a section or a call), which gating guards.
    """
    added = tokenizer.added_ids
    encoded = {d: tokenizer.encode(d) for d in fmt.delimiters}
    keep = {tokenizer.added_tokens[k] for k in fmt.keep if k in tokenizer.added_tokens}
    for ids in encoded.values():
        keep.update(i for i in ids if i in added)
    dropped = frozenset(tokenizer.special_ids - keep)
    plain = frozenset(d for d, ids in encoded.items() if not any(i in added for i in ids))
    if plain & set(fmt.entries):
        return Lexicon(None, {}, {}, frozenset(), dropped)
    forms: dict[str, str] = {}
    literal: dict[int, str] = {}
    sentinels: dict[int, str] = {}
    for delimiter, ids in encoded.items():
        if delimiter in plain:
            forms[delimiter] = delimiter
            continue
        pieces = []
        for i in ids:
            if i in added:
                if i not in sentinels:
                    sentinels[i] = chr(SENTINEL_BASE + len(sentinels))
                    literal[i] = tokenizer.token_text(i)
                pieces.append(sentinels[i])
            else:
                pieces.append(tokenizer.decode([i]))
        forms[delimiter] = "".join(pieces)
    return Lexicon(forms, sentinels, literal, plain, dropped)


@dataclass(frozen=True)
class Tables:
    """What one parser searches for, in one mode. Shared by every parser alike."""

    #: Delimiter -> the string standing for it in structural text.
    forms: Mapping[str, str]
    #: Token id -> sentinel, for the delimiters matched by id ("ids" mode, gated).
    id_forms: Mapping[int, str]
    #: ord(sentinel) -> the token's text, for `str.translate`.
    to_literal: Mapping[int, str]
    #: `to_literal` without the call's inner marks: a call body's text as its syntax
    #: reads it (any other delimiter standing inside a body is the token's text).
    body_literal: Mapping[int, str]
    #: Finds a sentinel of `to_literal` in a text (None: there are none), so that a
    #: long text without one is not translated character by character.
    sentinel: re.Pattern[str] | None
    #: The structural forms of every inner mark (the call's and the header's): text
    #: wherever they do not act.
    inner: frozenset[str]
    r_opens: frozenset[str]
    r_closes: frozenset[str]
    s_open: str
    s_close: str
    c_open: str | None
    c_close: str | None
    h_opens: tuple[str, ...]
    h_closes: tuple[str, ...]
    h_ends: frozenset[str]
    #: Delimiters after which an anchored (text-gated) call may begin.
    after: frozenset[str]
    #: Inner marks -> their structural forms (`CallContext.marks`).
    marks: Mapping[str, str]
    scanners: Mapping[State, Scanner]
    #: States where ordinary text never begins a delimiter, so ordinary ids need no
    #: scan (performance only: the result is the scan's).
    fast: frozenset[State]
    #: Per state, each form its scanner can match -> the role it plays there.
    roles: Mapping[State, Mapping[str, Role]]
    #: (state, form) -> its transition: `TRANSITIONS` through `roles`, for every form
    #: a state's scanner can match.
    transitions: Mapping[tuple[State, str], Transition]
    #: Gated, in "ids" mode: finds the delimiters that open call structure
    #: (`Format.entries`) spelled as text, which the machine never matches (echoes).
    echo: Scanner | None
    #: The character every echo begins with, or "" when they differ (a cheap test).
    echo_lead: str


def tables(fmt: Format, tokenizer: Tokenizer | None, mode: str, bare: bool = False) -> Tables:
    """The search tables for a parser (memoized per tokenizer when there is one).
    `bare`: standalone bodies (`Format.bare`) are searched for outside structure."""
    if tokenizer is not None:
        memo = _TABLES.get(tokenizer)
        if memo is None:
            memo = _TABLES[tokenizer] = {}
        found = memo.get((fmt, mode, bare))
        if found is None:
            found = memo[fmt, mode, bare] = _tables(fmt, lexicon(fmt, tokenizer), mode, bare)
        return found
    return _tables(fmt, lexicon(fmt, None), mode, bare)


def _tables(fmt: Format, lex: Lexicon, mode: str, bare: bool = False) -> Tables:
    gated = mode == "ids" and lex.gated_forms is not None
    if gated:
        assert lex.gated_forms is not None
        forms: Mapping[str, str] = lex.gated_forms
        id_forms: Mapping[int, str] = lex.sentinels
        to_literal = {ord(s): lex.literal[i] for i, s in lex.sentinels.items()}
    else:
        forms = {d: d for d in fmt.delimiters}
        id_forms, to_literal = {}, {}
    form = forms.__getitem__
    s_open, s_close = map(form, fmt.section) if fmt.section else ("", "")
    c_open = form(fmt.call[0]) if fmt.call[0] else None
    c_close = form(fmt.call[1]) if fmt.call[1] else None
    header = fmt.header
    h_opens = tuple(form(o) for o in header.opens) if header else ()
    h_closes = tuple(form(c) for c in header.closes) if header else ()
    h_ends = frozenset(form(e) for e in header.ends) if header else frozenset()
    # Outside a call every delimiter is searched for, so that an unexpected one
    # (a stray closing tag, a mark outside a body) is consumed, never leaked. Content
    # and reasoning search only what is matched by id (everything, when matching
    # text), never a call's own delimiters when calls stand only in their section;
    # a reasoning delimiter matched as text only where it acts.
    everything = [form(d) for d in fmt.delimiters]
    plain = lex.plain if gated else frozenset()
    local = set(fmt.call) if fmt.section is not None and not fmt.loose_calls else set()
    outer = [form(d) for d in fmt.delimiters if d not in local and d not in plain]
    opens = [o for o, _ in fmt.reasoning_pairs if o in plain]
    closes = [c for _, c in fmt.reasoning_pairs if c in plain]
    # In a body, a delimiter with no token is left to the body's syntax (a value may
    # hold its text): such a call's end is the syntax's, its successor the section's.
    inside = [p for p in (c_open, c_close, s_close) if p and p not in plain]
    inside += [*h_opens, *h_ends]  # a header-routed body ends at these
    # A standalone body's opener is text: searched where calls may begin, if asked;
    # where the opener is also a delimiter that this vocabulary spells with an added
    # token (the synthetic vocabulary's `<invoke name="`), that token's form as well.
    b_open = fmt.bare.opener if bare and fmt.bare is not None else ""
    loose = list(dict.fromkeys((b_open, forms.get(b_open, b_open)))) if b_open else []
    table = {
        State.CONTENT: outer + opens + loose,
        State.REASONING: outer + closes + (loose if fmt.calls_in_reasoning else []),
        State.SECTION: everything,
        State.CALL: inside,
        State.HEADER: [*h_opens[:1], *h_ends, *h_closes],
    }
    inner = frozenset(form(m) for m in (*fmt.marks, *(header.marks if header else ())))
    members: dict[Role, frozenset[str]] = {
        Role.REASONING_OPEN: frozenset(form(o) for o, _ in fmt.reasoning_pairs),
        Role.REASONING_CLOSE: frozenset(form(c) for _, c in fmt.reasoning_pairs),
        Role.SECTION_OPEN: frozenset({s_open}),
        Role.SECTION_CLOSE: frozenset({s_close}),
        Role.CALL_OPEN: frozenset({c_open} if c_open else ()),
        Role.CALL_CLOSE: frozenset({c_close} if c_close else ()),
        Role.MARK: inner,
        Role.HEADER_OPEN: frozenset(h_opens),
        Role.HEADER_CLOSE: frozenset(h_closes),
        Role.HEADER_END: h_ends,
        Role.AFTER: frozenset(form(a) for a in fmt.anchor.after) if fmt.anchor else frozenset(),
        Role.BARE_OPEN: frozenset(loose),
    }
    roles = {
        state: {p: _role(state, p, members, h_opens) for p in patterns if p}
        for state, patterns in table.items()
    }
    if not fmt.calls_in_reasoning:  # reasoning runs to its close: call markup is text there
        left = {p: r for p, r in roles[State.REASONING].items() if r not in _CALL_ROLES}
        roles[State.REASONING] = left
        table[State.REASONING] = [p for p in table[State.REASONING] if p in left]
    scanners = {state: Scanner(patterns) for state, patterns in table.items()}
    transitions = {
        (state, p): TRANSITIONS[state, role]
        for state, found in roles.items()
        for p, role in found.items()
    }
    entries = [e for e in fmt.entries if e] if gated else []
    leads = {e[0] for e in entries}
    fast = frozenset(
        state
        for state, scanner in scanners.items()
        if scanner.sentinel_led
        and state is not State.HEADER
        and not (state is State.CONTENT and fmt.anchor is not None)
    )
    # Every sentinel a mark's form holds (a mark may be a token with text around it).
    kept = {ord(c) for m in fmt.marks for c in form(m) if ord(c) in to_literal}
    return Tables(
        forms=forms,
        id_forms=id_forms,
        to_literal=to_literal,
        body_literal={k: v for k, v in to_literal.items() if k not in kept},
        sentinel=re.compile("[" + "".join(re.escape(chr(k)) for k in to_literal) + "]")
        if to_literal
        else None,
        inner=inner,
        r_opens=members[Role.REASONING_OPEN],
        r_closes=members[Role.REASONING_CLOSE],
        s_open=s_open,
        s_close=s_close,
        c_open=c_open,
        c_close=c_close,
        h_opens=h_opens,
        h_closes=h_closes,
        h_ends=h_ends,
        after=members[Role.AFTER],
        marks={m: form(m) for m in fmt.marks},
        scanners=scanners,
        fast=fast,
        roles=roles,
        transitions=transitions,
        echo=Scanner(entries) if entries else None,
        echo_lead=leads.pop() if len(leads) == 1 else "",
    )


#: The roles of call structure: what `Format.calls_in_reasoning` False leaves unsearched
#: inside reasoning.
_CALL_ROLES = frozenset({Role.SECTION_OPEN, Role.SECTION_CLOSE, Role.CALL_OPEN, Role.CALL_CLOSE})


def _role(
    state: State, pattern: str, members: Mapping[Role, frozenset[str]], h_opens: Sequence[str]
) -> Role:
    """The role `pattern` plays in `state`: of the roles it has, the first by the
    state's precedence. Inside a header only the first header opener opens (the
    header scanner searches no other)."""
    found = [
        role
        for role, forms in members.items()
        if pattern in forms
        and not (state is State.HEADER and role is Role.HEADER_OPEN and pattern != h_opens[0])
    ]
    assert found, f"{pattern!r} has no role"
    order = PRECEDENCE[state]
    return min(found, key=lambda r: order.index(r) if r in order else len(order))
