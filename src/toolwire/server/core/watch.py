"""Counting what the parser neutralized: calls released as content, echoed delimiters.

Neither changes the output; both are worth a metric. The parser reports what it saw
(`Parser.stats`); this reads it per choice, nothing is matched twice::

    parser.stats --> fallbacks   calls released as content (malformed, truncated,
                                 undeclared): `ParserStats.released_calls`
                 --> echoes      delimiters that open call structure, spelled from
                                 ordinary ids under a gated vocabulary and so kept as
                                 text: `ParserStats.echoes` (0 when not gated)

With `tool_choice="none"` tool markup is consumed by design: nothing is counted.
"""

from __future__ import annotations

from toolwire.parser import Parser

__all__ = ["CallWatch"]


class CallWatch:
    """Per-choice counters of parse fallbacks and neutralized echoes."""

    __slots__ = ("_parser", "enabled")

    def __init__(self, parser: Parser, *, enabled: bool = True) -> None:
        self._parser = parser
        self.enabled = enabled

    @property
    def gated(self) -> bool:
        """Structure is decided by token id, so spelled delimiters can be told apart."""
        return self._parser.gated

    @property
    def fallbacks(self) -> int:
        """Calls released as content."""
        return self._parser.stats.released_calls if self.enabled else 0

    @property
    def echoes(self) -> int:
        """Delimiters spelled as text and kept as text (gated formats)."""
        return self._parser.stats.echoes if self.enabled else 0
