"""A format's delimiters as one vocabulary sees them: resolved once, shared by parsers.

Data flow::

    (Format, Tokenizer)            -> Lexicon     which delimiters are token ids here
    (Lexicon, mode)                -> Tables      what each parser state searches for

Both are pure functions of their inputs, so they are memoized per tokenizer here
(`_LEXICONS`, `_TABLES`: weakly keyed, dropped with the tokenizer): building a `Parser`
per request then costs a dictionary lookup, not a pass over the vocabulary's added tokens.

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

from toolwire.formats.spec import Format
from toolwire.tokenizer import Tokenizer

__all__ = ["Lexicon", "Scanner", "State", "Tables", "lexicon", "tables"]

SENTINEL_BASE = 0xD800  # lone surrogates: never produced by decoding UTF-8
_MARKUP_SHAPED = re.compile(r"^(<.*>|\[.*\]|<\|.*|.*\|>)$", re.S)


class State(enum.IntEnum):
    """Where the machine is. (IntEnum: hashed in C on the per-token path.)"""

    CONTENT = 0
    REASONING = 1
    SECTION = 2
    CALL = 3
    HEADER = 4


class Scanner:
    """Finds the leftmost (then longest) delimiter; says how much of a tail to hold."""

    __slots__ = ("_first", "_prefixes", "_regex", "longest", "sentinel_led")

    def __init__(self, patterns: Sequence[str]) -> None:
        ordered = sorted(set(patterns), key=len, reverse=True)
        # A pattern standing inside a longer one (DSML's `｜DSML｜` mark inside its tags)
        # is not searched alone: the leftmost search would find it first.
        ordered = [p for p in ordered if not any(p in q[1:] for q in ordered if q != p)]
        self._regex = re.compile("|".join(re.escape(p) for p in ordered)) if ordered else None
        self._prefixes = {p[:k] for p in ordered for k in range(1, len(p))}
        self._first = {p[-1] for p in self._prefixes}
        self.longest = max((len(p) for p in ordered), default=0)
        #: Every pattern starts with a token's sentinel: ordinary text cannot begin one.
        self.sentinel_led = all(SENTINEL_BASE <= ord(p[0]) < 0xE000 for p in ordered)

    def search(self, text: str, start: int) -> re.Match[str] | None:
        return self._regex.search(text, start) if self._regex is not None else None

    def holdback(self, text: str, start: int) -> int:
        """Length of the longest tail of text[start:] that begins some delimiter."""
        if not self._prefixes or not text or text[-1] not in self._first:
            return 0
        for k in range(min(self.longest - 1, len(text) - start), 0, -1):
            if text[-k:] in self._prefixes:
                return k
        return 0


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
    #: Added tokens that are neither delimiters nor kept text: never content.
    drop: frozenset[int]


#: Per tokenizer: format -> its lexicon; (format, mode) -> its tables. Weakly keyed,
#: so a tokenizer's entries go when it does (the tokenizer holds no cache of ours).
_LEXICONS: weakref.WeakKeyDictionary[Tokenizer, dict[Format, Lexicon]] = weakref.WeakKeyDictionary()
_TABLES: weakref.WeakKeyDictionary[Tokenizer, dict[tuple[Format, str], Tables]] = (
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
    drop = set(tokenizer.special_ids)
    drop.update(i for text, i in tokenizer.added_tokens.items() if _MARKUP_SHAPED.match(text))
    dropped = frozenset(drop - keep)
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
    h_close: str | None
    h_ends: frozenset[str]
    #: Delimiters after which an anchored (text-gated) call may begin.
    after: frozenset[str]
    #: Inner marks -> their structural forms (`CallContext.marks`).
    marks: Mapping[str, str]
    scanners: Mapping[State, Scanner]
    #: States where ordinary text never begins a delimiter, so ordinary ids need no
    #: scan (performance only: the result is the scan's).
    fast: frozenset[State]


def tables(fmt: Format, tokenizer: Tokenizer | None, mode: str) -> Tables:
    """The search tables for a parser (memoized per tokenizer when there is one)."""
    if tokenizer is not None:
        memo = _TABLES.get(tokenizer)
        if memo is None:
            memo = _TABLES[tokenizer] = {}
        found = memo.get((fmt, mode))
        if found is None:
            found = memo[fmt, mode] = _tables(fmt, lexicon(fmt, tokenizer), mode)
        return found
    return _tables(fmt, lexicon(fmt, None), mode)


def _tables(fmt: Format, lex: Lexicon, mode: str) -> Tables:
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
    h_close = form(header.close) if header else None
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
    table = {
        State.CONTENT: outer + opens,
        State.REASONING: outer + closes,
        State.SECTION: everything,
        State.CALL: inside,
        State.HEADER: [*h_opens[:1], *h_ends, *([h_close] if h_close else [])],
    }
    scanners = {state: Scanner(patterns) for state, patterns in table.items()}
    fast = frozenset(
        state
        for state, scanner in scanners.items()
        if scanner.sentinel_led
        and state is not State.HEADER
        and not (state is State.CONTENT and fmt.anchor is not None)
    )
    return Tables(
        forms=forms,
        id_forms=id_forms,
        to_literal=to_literal,
        inner=frozenset(form(m) for m in (*fmt.marks, *(header.marks if header else ()))),
        r_opens=frozenset(form(o) for o, _ in fmt.reasoning_pairs),
        r_closes=frozenset(form(c) for _, c in fmt.reasoning_pairs),
        s_open=s_open,
        s_close=s_close,
        c_open=c_open,
        c_close=c_close,
        h_opens=h_opens,
        h_close=h_close,
        h_ends=h_ends,
        after=frozenset(form(a) for a in fmt.anchor.after) if fmt.anchor else frozenset(),
        marks={m: form(m) for m in fmt.marks},
        scanners=scanners,
        fast=fast,
    )
