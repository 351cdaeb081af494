"""Delimiter isolation: added-token text from the request never becomes its token id.

Data flow::

    text = render(request)                      the prompt, exactly as without isolation
    ids  = encode(text)                         added tokens matched, as Hugging Face does
    marked = render(request with marks)         each added token's text in a request
                                                string is wrapped in two marker characters
    unmark(marked) == text?                     else the template rewrote a marked string:
                                                PromptError naming the message
    ranges = where the marks stood in `text`
    every added-token id of `ids` that overlaps a range -> its text spelled from
                                                ordinary sub-word ids

Why this keeps every other id. Hugging Face tokenizers split the text at added tokens
before the model's own pre-tokenizer and BPE run, so an added token is a hard boundary:
the ids on either side do not depend on it. Replacing one added-token id by an
encoding of its own characters therefore leaves every other id as it was, inside
content as well as in the template's text. A request without added-token text needs
no marks, and its ids are exactly the plain encoding.

What is marked. Every string of the messages and of the tools (values and keys, every
role, string content and text parts, tool results, reasoning, tool-call arguments):
each whole occurrence of an added token's text, and at each end of a string the
longest piece that could join a neighbour into a token (a string ending in `<tool_`
and the next one starting with `call>`, as adjacent text parts are joined). Added
tokens made only of whitespace are not delimiters and are left alone. The markers are
Unicode noncharacters absent from the rendered prompt (private-use characters when a
request holds them all), so no request text can forge one.

Invariant (checked, fails closed): the isolated ids decode to the same text as the
plain ids, and no spelled piece holds an added-token id.
"""

from __future__ import annotations

import bisect
import re
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import PromptError
from toolwire.tokenizer import Tokenizer

__all__ = ["Source", "isolate"]

#: One marked unit of the request: its name for errors (`message 2 (tool)`) and data.
Source = tuple[str, Any]

_NONCHARACTERS = [chr(c) for c in range(0xFDD0, 0xFDF0)] + [
    chr(plane * 0x10000 + low) for plane in range(17) for low in (0xFFFE, 0xFFFF)
]


@dataclass
class _Vocabulary:
    """What isolation needs to know about one tokenizer's added tokens (built once)."""

    pattern: re.Pattern[str] | None
    prefixes: frozenset[str]
    suffixes: frozenset[str]
    longest: int
    ids: frozenset[int]
    spelled: dict[str, list[int]] = field(default_factory=dict)


_VOCABULARIES: weakref.WeakKeyDictionary[Tokenizer, _Vocabulary] = weakref.WeakKeyDictionary()


def _vocabulary(tokenizer: Tokenizer) -> _Vocabulary:
    vocab = _VOCABULARIES.get(tokenizer)
    if vocab is None:
        texts = sorted(
            (t for t in tokenizer.added_tokens if t and not t.isspace()), key=len, reverse=True
        )
        pattern = re.compile("|".join(map(re.escape, texts))) if texts else None
        vocab = _Vocabulary(
            pattern=pattern,
            prefixes=frozenset(t[:k] for t in texts for k in range(1, len(t))),
            suffixes=frozenset(t[k:] for t in texts for k in range(1, len(t))),
            longest=len(texts[0]) if texts else 0,
            ids=frozenset(tokenizer.added_tokens[t] for t in texts),
        )
        _VOCABULARIES[tokenizer] = vocab
    return vocab


def isolate(
    tokenizer: Tokenizer,
    text: str,
    sources: Sequence[Source],
    render: Callable[[list[Any]], str],
) -> tuple[list[int], list[tuple[int, int]]]:
    """The prompt ids of `text` with request-borne added tokens spelled, and the marked ranges.

    `render` renders the request from the (possibly marked) data of `sources`, in order;
    rendering the unmarked data must give `text`.
    """
    vocab = _vocabulary(tokenizer)
    # encode_batch releases the GIL while it runs (encode does not): a server rendering
    # a long prompt on a worker thread keeps its event loop running
    encoding = tokenizer.backend.encode_batch([text], add_special_tokens=False)[0]
    ids: list[int] = list(encoding.ids)
    if vocab.pattern is None:
        return ids, []
    opener, closer = _markers(text)
    marked = [_mark(data, vocab, opener, closer) for _, data in sources]
    if all(count == 0 for _, count in marked):
        return ids, []
    ranges = _unmark(render([data for data, _ in marked]), opener, closer)
    if ranges is None or ranges[0] != text:
        raise _misaligned(vocab, text, sources, marked, render, opener, closer)
    return _spell(tokenizer, vocab, text, ids, encoding.offsets, ranges[1]), ranges[1]


def _markers(text: str) -> tuple[str, str]:
    """Two characters absent from `text`: noncharacters, else private-use characters
    (a request can hold every noncharacter, but not the ~137,000 private-use ones)."""
    present = set(text)
    free = (c for c in _candidates() if c not in present)
    first, second = next(free, None), next(free, None)
    if first is None or second is None:
        raise PromptError("the request holds every character isolation could mark with")
    return first, second


def _candidates() -> Iterator[str]:
    yield from _NONCHARACTERS
    for low, high in ((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)):
        for code in range(low, high + 1):
            yield chr(code)


def _mark(value: Any, vocab: _Vocabulary, opener: str, closer: str) -> tuple[Any, int]:
    """`value` with its strings marked, and how many marks were placed."""
    if isinstance(value, str):
        return _mark_string(value, vocab, opener, closer)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        total = 0
        for key, item in value.items():
            new_key, n = _mark(key, vocab, opener, closer)
            new_item, m = _mark(item, vocab, opener, closer)
            out[new_key] = new_item
            total += n + m
        return out, total
    if isinstance(value, list):
        items = [_mark(item, vocab, opener, closer) for item in value]
        return [item for item, _ in items], sum(n for _, n in items)
    return value, 0


def _mark_string(s: str, vocab: _Vocabulary, opener: str, closer: str) -> tuple[str, int]:
    assert vocab.pattern is not None
    spans = [(m.start(), m.end()) for m in vocab.pattern.finditer(s)]
    first = spans[0][0] if spans else len(s)
    last = spans[-1][1] if spans else 0
    head = _edge(s, vocab.suffixes, vocab.longest, at_start=True)
    tail = _edge(s, vocab.prefixes, vocab.longest, at_start=False)
    if head and head <= first:
        spans.insert(0, (0, head))
    if tail and len(s) - tail >= last:
        start = len(s) - tail
        if spans and spans[-1][1] > start:  # the same short piece at both ends
            spans[-1] = (spans[-1][0], len(s))
        else:
            spans.append((start, len(s)))
    if not spans:
        return s, 0
    parts = []
    at = 0
    for start, end in spans:
        parts += [s[at:start], opener, s[start:end], closer]
        at = end
    parts.append(s[at:])
    return "".join(parts), len(spans)


def _edge(s: str, pieces: frozenset[str], longest: int, *, at_start: bool) -> int:
    """Length of the longest end piece of `s` found in `pieces`, or 0.

    A piece whose outer character is whitespace is not marked: a mark there would stop
    a template's `strip()` from reaching it.
    """
    if not s or (s[0] if at_start else s[-1]).isspace():
        return 0
    for k in range(min(longest - 1, len(s)), 0, -1):
        if (s[:k] if at_start else s[-k:]) in pieces:
            return k
    return 0


def _unmark(marked: str, opener: str, closer: str) -> tuple[str, list[tuple[int, int]]] | None:
    """The text without markers and the ranges they enclosed; None when unbalanced."""
    out: list[str] = []
    ranges: list[tuple[int, int]] = []
    length = 0
    start: int | None = None
    for piece in re.split(f"([{opener}{closer}])", marked):
        if piece == opener:
            if start is not None:
                return None
            start = length
        elif piece == closer:
            if start is None:
                return None
            ranges.append((start, length))
            start = None
        else:
            out.append(piece)
            length += len(piece)
    if start is not None:
        return None
    return "".join(out), ranges


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


def _misaligned(
    vocab: _Vocabulary,
    text: str,
    sources: Sequence[Source],
    marked: list[tuple[Any, int]],
    render: Callable[[list[Any]], str],
    opener: str,
    closer: str,
) -> PromptError:
    """The error for a template that rewrote marked text, naming the first culprit."""
    plain = [data for _, data in sources]
    suspects = [i for i, (_, count) in enumerate(marked) if count]
    culprit = suspects[0]
    for index in suspects:
        trial = [*plain[:index], marked[index][0], *plain[index + 1 :]]
        result = _unmark(render(trial), opener, closer)
        if result is None or result[0] != text:
            culprit = index
            break
    name, data = sources[culprit]
    found = sorted({m.group() for m in _strings_matches(vocab, data)})
    shown = ", ".join(map(repr, found[:5])) or "a piece of a delimiter"
    return PromptError(
        f"{name}: the chat template rewrites this text (it splits, trims or drops it) "
        f"where it holds special-token text ({shown}), so that text cannot be kept apart "
        "from the template's own delimiters. Remove it (for reasoning, send "
        "`reasoning_content` instead of <think> tags in content) or pass isolate=False."
    )


def _strings_matches(vocab: _Vocabulary, value: Any) -> list[re.Match[str]]:
    assert vocab.pattern is not None
    if isinstance(value, str):
        return list(vocab.pattern.finditer(value))
    if isinstance(value, dict):
        return [
            m
            for k, v in value.items()
            for m in (*_strings_matches(vocab, k), *_strings_matches(vocab, v))
        ]
    if isinstance(value, list):
        return [m for item in value for m in _strings_matches(vocab, item)]
    return []
