"""What every call syntax shares: the whitespace it skips, and the drain of its output.

A syntax appends argument JSON text to `_out` as it becomes final; the parser takes
it with `arguments()` (`syntax.protocol.CallSyntax`), which returns what was appended
since the last call and forgets it: the syntax never takes text back, so the argument
text streamed is append-only by construction.
"""

from __future__ import annotations

__all__ = ["WS", "ArgumentsDrain"]

#: The whitespace a syntax skips between tokens of its body (JSON's four characters).
WS = " \t\r\n"


class ArgumentsDrain:
    """Argument text made final and not yet taken; a base of every syntax."""

    def __init__(self) -> None:
        #: Final argument text, in pieces, appended since the last `arguments()`.
        self._out: list[str] = []

    def arguments(self) -> str:
        """Argument JSON text that became final since the last call (append-only)."""
        out = "".join(self._out)
        self._out.clear()
        return out
