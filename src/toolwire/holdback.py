"""How much of a text's end to hold back because it could begin a pattern.

A streaming matcher that has searched its text and found no pattern must still keep
the longest tail that is a proper prefix of some pattern: the next piece of text may
complete it. The parser's delimiter scanners, the syntaxes' closing tags and quotes,
and the server's stop strings all ask this one question, here::

    Holdback(patterns).tail(text, start) -> length of the tail of text[start:] to hold

The common answer is 0 and costs one set lookup: a tail can only begin a pattern when
the text's last character ends one of the patterns' proper prefixes.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["Holdback"]


class Holdback:
    """The proper prefixes of a set of patterns, to find the tail a text must hold."""

    __slots__ = ("_ends", "_firsts", "_prefixes", "_reach")

    def __init__(self, patterns: Iterable[str]) -> None:
        kept = [p for p in patterns if p]
        self._prefixes = frozenset(p[:k] for p in kept for k in range(1, len(p)))
        #: The last characters of those prefixes: any other last character holds nothing.
        self._ends = frozenset(p[-1] for p in self._prefixes)
        #: The patterns' first characters: where a held tail can begin (a closing tag's
        #: letters end many prefixes, so the tail is found from its possible starts).
        self._firsts = frozenset(p[0] for p in self._prefixes)
        #: The longest tail that can begin a pattern.
        self._reach = max((len(p) for p in kept), default=1) - 1

    def tail(self, text: str, start: int = 0) -> int:
        """Length of the longest tail of text[start:] that is a proper prefix of a pattern."""
        if not self._ends or not text or text[-1] not in self._ends:
            return 0
        size, prefixes, best = len(text), self._prefixes, 0
        low = max(start, size - self._reach)
        for first in self._firsts:  # a tail can only begin where a pattern begins
            at = text.find(first, low)
            while at >= 0 and size - at > best:
                if text[at:] in prefixes:
                    best = size - at  # the longest tail beginning with `first`
                    break
                at = text.find(first, at + 1)
        return best
