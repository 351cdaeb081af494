"""Delimiter isolation: delimiter text from the request acts neither on the template nor
on the model.

Data flow::

    request data --hide()--> the same data with each occurrence of a delimiter's text
                             in any string replaced by one placeholder character
    render(hidden data) ---> hidden text: the template saw only placeholders, so its
                             `split('</think>')`, `'<tool_call>' in content`,
                             `startswith`, `replace`, `strip` and `|trim` find nothing
    restore(hidden text) --> text, ranges: each placeholder back to its own text, in
                             the form the template wrote it (raw, inside `tojson`, or
                             escaped by a Python `repr`), and the ranges it covers
    encode(text) ----------> ids (added tokens matched, as Hugging Face does); every
                             added-token id that overlaps a range -> its text spelled
                             from ordinary sub-word ids

What is hidden. Every string of the messages, the tools and the template kwargs (keys
and values, every role, string content and text parts, tool results, reasoning,
tool-call names and arguments): each whole occurrence of a *needle*, and at each end
of a string the longest piece that could join a neighbour into an added token (a
string ending in `<tool_` and the next one starting with `call>`, as adjacent text
parts are joined). Needles are the vocabulary's added tokens (not those made only of
whitespace) and the caller's control strings (the format's delimiters and the markup
strings the template tests content with, which may not be tokens of this vocabulary).

Placeholders. One character per distinct text, so equal texts stay equal for the
template (a tool name compared with a call's name); taken from the private-use areas,
never one the request or the template holds, raw or as a `\\uXXXX` escape, so no
request text can forge one. A placeholder is not whitespace, not markup and one
character long: no slice can cut it, no strip can remove it. `tojson` (the template
filter) writes the placeholder of a text's JSON form, so a delimiter holding `"` is
restored escaped inside JSON strings.

Why the ids outside the request's text are the plain encoding's. Hugging Face
tokenizers split the text at added tokens before the model's own pre-tokenizer and
BPE run, so an added token is a hard boundary: the ids on either side do not depend
on it. Replacing one added-token id by an encoding of its own characters leaves every
other id as it was. A request without delimiter text hides nothing, and its ids are
exactly the plain encoding of the plain rendering.

Invariant (checked, fails closed): the isolated ids decode to the restored text, and
no spelled piece holds an added-token id.
"""

from __future__ import annotations

import bisect
import contextvars
import json
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import PromptError, UsageError
from toolwire.tokenizer import Tokenizer

__all__ = ["encode", "isolate", "json_forms"]

#: The private-use characters placeholders are taken from, in order of preference.
_POOLS = ((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))
_PRIVATE = re.compile("[\ue000-\uf8ff\U000f0000-\U0010ffff]")
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))")


@dataclass
class _Vocabulary:
    """What isolation needs to know about one tokenizer's added tokens (built once)."""

    tokens: tuple[str, ...]
    prefixes: frozenset[str]
    suffixes: frozenset[str]
    longest: int
    ids: frozenset[int]
    #: a character that some added token ends with / starts with
    finals: re.Pattern[str] | None
    initials: re.Pattern[str] | None
    #: needle pattern per set of control strings
    patterns: dict[frozenset[str], re.Pattern[str] | None] = field(default_factory=dict)
    spelled: dict[str, list[int]] = field(default_factory=dict)


_VOCABULARIES: weakref.WeakKeyDictionary[Tokenizer, _Vocabulary] = weakref.WeakKeyDictionary()


def _vocabulary(tokenizer: Tokenizer) -> _Vocabulary:
    vocab = _VOCABULARIES.get(tokenizer)
    if vocab is None:
        texts = tuple(t for t in tokenizer.added_tokens if t and not t.isspace())
        vocab = _Vocabulary(
            tokens=texts,
            prefixes=frozenset(t[:k] for t in texts for k in range(1, len(t))),
            suffixes=frozenset(t[k:] for t in texts for k in range(1, len(t))),
            longest=max(map(len, texts), default=0),
            ids=frozenset(tokenizer.added_tokens[t] for t in texts),
            finals=_class({t[-1] for t in texts if len(t) > 1}),
            initials=_class({t[0] for t in texts if len(t) > 1}),
        )
        _VOCABULARIES[tokenizer] = vocab
    return vocab


def _class(chars: set[str]) -> re.Pattern[str] | None:
    return re.compile("[" + "".join(map(re.escape, sorted(chars))) + "]") if chars else None


def _pattern(vocab: _Vocabulary, controls: frozenset[str]) -> re.Pattern[str] | None:
    if controls not in vocab.patterns:
        needles = sorted({*vocab.tokens, *controls}, key=len, reverse=True)
        vocab.patterns[controls] = (
            re.compile("|".join(map(re.escape, needles))) if needles else None
        )
    return vocab.patterns[controls]


# -- the JSON forms of placeholders (read by the template's `tojson`) ------------------

#: While a hidden request renders: (raw -> JSON form, escaped raw -> ASCII JSON form).
_JSON_FORMS: contextvars.ContextVar[tuple[dict[int, str], dict[str, str]] | None] = (
    contextvars.ContextVar("toolwire_json_forms", default=None)
)


def json_forms(dumped: str, ensure_ascii: bool) -> str:
    """`dumped` (a `json.dumps` result) with each placeholder replaced by the placeholder
    of its text's JSON form; unchanged outside a hidden render."""
    forms = _JSON_FORMS.get()
    if forms is None:
        return dumped
    raw, escaped = forms
    if not ensure_ascii:
        return dumped.translate(raw) if raw else dumped
    if "\\" not in dumped:
        return dumped
    for escape, char in escaped.items():
        if escape in dumped:
            dumped = dumped.replace(escape, char)
    return dumped


# -- hiding -------------------------------------------------------------------------


class _Placeholders:
    """Allocates one placeholder character per (text, form) and remembers the text."""

    def __init__(self, taken: set[int]) -> None:
        self._taken = taken
        self._free = self._candidates()
        self.char_of: dict[str, str] = {}
        #: placeholder -> the text it stands for, as the rendered prompt must hold it
        self.text_of: dict[str, str] = {}
        #: placeholder's `\\uXXXX` escape (a `repr`) -> the text's Python-escaped form
        self.escaped_of: dict[str, str] = {}

    def _candidates(self) -> Iterator[str]:
        for low, high in _POOLS:
            for code in range(low, high + 1):
                if code not in self._taken:
                    yield chr(code)

    def _new(self, text: str) -> str:
        char = next(self._free, None)
        if char is None:
            raise PromptError("the request holds every character isolation could use")
        self.text_of[char] = text
        return char

    def of(self, text: str) -> str:
        char = self.char_of.get(text)
        if char is None:
            char = self.char_of[text] = self._new(text)
            self.escaped_of[_escape_of(char)] = repr(text)[1:-1]
        return char

    def json_tables(self) -> tuple[dict[int, str], dict[str, str]]:
        """For `tojson`: raw placeholder -> JSON-form placeholder, and a placeholder's
        ASCII escape -> the ASCII-JSON-form placeholder."""
        raw: dict[int, str] = {}
        escaped: dict[str, str] = {}
        for text, char in list(self.char_of.items()):
            if text.startswith(_FORM):
                continue
            plain = json.dumps(text, ensure_ascii=False)[1:-1]
            ascii_ = json.dumps(text)[1:-1]
            if plain != text:
                raw[ord(char)] = self.of_form(plain)
            escaped[json.dumps(char)[1:-1]] = self.of_form(ascii_)
        return raw, escaped

    def of_form(self, text: str) -> str:
        """A placeholder restored as exactly `text` (a form, not a needle)."""
        key = _FORM + text
        char = self.char_of.get(key)
        if char is None:
            char = self.char_of[key] = self._new(text)
        return char


#: Keys of `_Placeholders.char_of` for forms (no request text holds a NUL-wrapped one).
_FORM = "\x00form\x00"


def _escape_of(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _taken(strings: Iterable[str]) -> set[int]:
    """Private-use code points present in `strings`, raw or as `\\uXXXX` escapes."""
    taken: set[int] = set()
    for s in strings:
        if _PRIVATE.search(s):
            taken.update(map(ord, _PRIVATE.findall(s)))
        if "\\" in s:
            taken.update(int(a or b, 16) for a, b in _ESCAPE.findall(s))
    return taken


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


class _Hider:
    """Finds and hides the pieces of request strings (see the module docstring)."""

    def __init__(self, vocab: _Vocabulary, pattern: re.Pattern[str]) -> None:
        self.vocab = vocab
        self.pattern = pattern
        self.places: _Placeholders | None = None

    def needs(self, value: Any) -> bool:
        """True when some string of `value` holds a piece to hide."""
        if isinstance(value, str):
            return bool(self.spans(value))
        if isinstance(value, dict):
            return any(self.needs(k) or self.needs(v) for k, v in value.items())
        if isinstance(value, list):
            return any(self.needs(item) for item in value)
        return False

    def hide(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, dict):
            return {self.hide(k): self.hide(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.hide(item) for item in value]
        return value

    def spans(self, s: str) -> list[tuple[int, int]]:
        if not s:
            return []
        vocab = self.vocab
        spans = [m.span() for m in self.pattern.finditer(s)]
        first = spans[0][0] if spans else len(s)
        last = spans[-1][1] if spans else 0
        head = _head(s, vocab)
        tail = _tail(s, vocab)
        if head and head <= first:
            spans.insert(0, (0, head))
        if tail and len(s) - tail >= last:
            start = len(s) - tail
            if spans and spans[-1][1] > start:  # the same short piece at both ends
                spans[-1] = (spans[-1][0], len(s))
            else:
                spans.append((start, len(s)))
        return spans

    def string(self, s: str) -> str:
        spans = self.spans(s)
        if not spans:
            return s
        assert self.places is not None
        parts = []
        at = 0
        for start, end in spans:
            parts += [s[at:start], self.places.of(s[start:end])]
            at = end
        parts.append(s[at:])
        return "".join(parts)


def _head(s: str, vocab: _Vocabulary) -> int:
    """Length of the longest start of `s` that ends an added token, or 0.

    Such a piece ends with some token's last character, so only those positions are
    tried. A piece starting with whitespace is not hidden: a template's `strip()` must
    still reach it.
    """
    if vocab.finals is None or s[0].isspace():
        return 0
    window = s[: vocab.longest - 1]
    for match in reversed(list(vocab.finals.finditer(window))):
        if window[: match.end()] in vocab.suffixes:
            return match.end()
    return 0


def _tail(s: str, vocab: _Vocabulary) -> int:
    """Length of the longest end of `s` that starts an added token, or 0 (see `_head`)."""
    if vocab.initials is None or s[-1].isspace():
        return 0
    offset = max(0, len(s) - vocab.longest + 1)
    for match in vocab.initials.finditer(s, offset):
        if s[match.start() :] in vocab.prefixes:
            return len(s) - match.start()
    return 0


# -- restoring ----------------------------------------------------------------------


def _restore(hidden: str, places: _Placeholders) -> tuple[str, list[tuple[int, int]]]:
    """The text with every placeholder back to its text, and the ranges they cover."""
    chars = "".join(places.text_of)
    escapes = [re.escape(e) for e in places.escaped_of if e in hidden] if "\\" in hidden else []
    alternatives = [f"[{re.escape(chars)}]", *escapes]
    out: list[str] = []
    ranges: list[tuple[int, int]] = []
    length = 0
    at = 0
    for match in re.finditer("|".join(alternatives), hidden):
        before = hidden[at : match.start()]
        out.append(before)
        length += len(before)
        found = match.group()
        text = places.text_of[found] if len(found) == 1 else places.escaped_of[found]
        out.append(text)
        ranges.append((length, length + len(text)))
        length += len(text)
        at = match.end()
    out.append(hidden[at:])
    return "".join(out), ranges


# -- the entry point ----------------------------------------------------------------


def isolate(
    tokenizer: Tokenizer,
    data: list[Any],
    render: Callable[[list[Any]], str],
    *,
    controls: frozenset[str] = frozenset(),
    reserved: Sequence[str] = (),
) -> tuple[str, list[int], list[tuple[int, int]]]:
    """Render `data` with its delimiter text hidden from the template, and encode it
    with that text spelled from ordinary sub-words.

    `render` renders the request from `data` (a list, in the caller's order);
    `controls` are further strings to keep from the template (see the module
    docstring); `reserved` are texts the template itself may write (its source, the
    tokenizer's named tokens), whose private-use characters are never placeholders.
    Returns the prompt text, its ids and the ranges of the request's hidden text.
    """
    vocab = _vocabulary(tokenizer)
    pattern = _pattern(vocab, controls)
    if pattern is None:
        text = render(data)
        return text, _encode(tokenizer, vocab, text, []), []
    hider = _Hider(vocab, pattern)
    if not hider.needs(data):
        text = render(data)
        return text, _encode(tokenizer, vocab, text, []), []
    places = hider.places = _Placeholders(_taken([*reserved, *_strings(data)]))
    hidden = hider.hide(data)
    token = _JSON_FORMS.set(places.json_tables())
    try:
        rendered = render(hidden)
    finally:
        _JSON_FORMS.reset(token)
    text, ranges = _restore(rendered, places)
    return text, _encode(tokenizer, vocab, text, ranges), ranges


def encode(tokenizer: Tokenizer, text: str) -> list[int]:
    """The plain ids of `text`: added tokens matched, as Hugging Face does."""
    return _encode(tokenizer, _vocabulary(tokenizer), text, [])


def _encode(
    tokenizer: Tokenizer, vocab: _Vocabulary, text: str, ranges: list[tuple[int, int]]
) -> list[int]:
    """The ids of `text`, added-token ids overlapping `ranges` spelled."""
    try:
        backend = tokenizer.backend
    except UsageError:  # a tokenizer without a `tokenizers` backend (mistral-common)
        backend = None
    if backend is None or not hasattr(backend, "encode_batch"):
        return _encode_by_tokens(tokenizer, vocab, text, ranges)
    # encode_batch releases the GIL while it runs (encode does not): a server rendering
    # a long prompt on a worker thread keeps its event loop running
    encoding = backend.encode_batch([text], add_special_tokens=False)[0]
    ids: list[int] = list(encoding.ids)
    if not ranges:
        return ids
    return _spell(tokenizer, vocab, text, ids, encoding.offsets, ranges)


def _encode_by_tokens(
    tokenizer: Tokenizer, vocab: _Vocabulary, text: str, ranges: list[tuple[int, int]]
) -> list[int]:
    """For tokenizers without offsets (mistral-common): split at added tokens, as their
    own `encode` does, and spell the ones inside `ranges`."""
    pattern = _pattern(vocab, frozenset())
    if pattern is None:
        return tokenizer.encode(text, delimiters=False)
    starts = [start for start, _ in ranges]
    out: list[int] = []
    at = 0
    for match in pattern.finditer(text):
        if match.start() > at:
            out += tokenizer.encode(text[at : match.start()], delimiters=False)
        if _overlaps(starts, ranges, *match.span()):
            out += _spelled(tokenizer, vocab, match.group())
        else:
            out.append(tokenizer.added_tokens[match.group()])
        at = match.end()
    if at < len(text):
        out += tokenizer.encode(text[at:], delimiters=False)
    if tokenizer.decode(out) != text:
        raise PromptError(
            f"the tokenizer {tokenizer.name or '(unnamed)'} does not encode the prompt text "
            "back to itself (its pieces gain or lose characters), so the prompt cannot be "
            "tokenized from its text here"
        )
    return out


def _spell(
    tokenizer: Tokenizer,
    vocab: _Vocabulary,
    text: str,
    plain_ids: list[int],
    offsets: Sequence[tuple[int, int]],
    ranges: list[tuple[int, int]],
) -> list[int]:
    starts = [start for start, _ in ranges]
    out: list[int] = []
    changed = False
    for token_id, (start, end) in zip(plain_ids, offsets, strict=True):
        if token_id in vocab.ids and _overlaps(starts, ranges, start, end):
            out += _spelled(tokenizer, vocab, text[start:end])
            changed = True
        else:
            out.append(token_id)
    if changed and tokenizer.decode(out) != tokenizer.decode(plain_ids):
        raise PromptError(
            "delimiter isolation would change the prompt text with this tokenizer "
            f"({tokenizer.name or 'unnamed'}); pass isolate=False to encode without it"
        )
    return out


def _overlaps(starts: list[int], ranges: list[tuple[int, int]], start: int, end: int) -> bool:
    i = bisect.bisect_left(starts, end) - 1  # the last range starting before `end`
    while i >= 0:
        r_start, r_end = ranges[i]
        if r_end > start and r_start < end:
            return True
        if r_end <= start:
            return False
        i -= 1
    return False


def _spelled(tokenizer: Tokenizer, vocab: _Vocabulary, piece: str) -> list[int]:
    """`piece` from ordinary sub-word ids; fails closed if the tokenizer cannot do that."""
    cached = vocab.spelled.get(piece)
    if cached is not None:
        return cached
    ids = tokenizer.encode(piece, delimiters=False)
    if tokenizer.decode(ids) != piece:
        # SentencePiece-style vocabularies add a word-start mark at the start of a
        # string: encode after a newline and drop the newline's ids.
        newline = tokenizer.encode("\n", delimiters=False)
        joined = tokenizer.encode("\n" + piece, delimiters=False)
        if joined[: len(newline)] == newline:
            ids = joined[len(newline) :]
    if tokenizer.decode(ids) != piece or set(ids) & tokenizer.added_ids:
        raise PromptError(
            f"this tokenizer cannot spell {piece!r} from ordinary tokens, so it cannot be "
            "kept apart from the delimiter; remove it from the request or pass isolate=False"
        )
    vocab.spelled[piece] = ids
    return ids
