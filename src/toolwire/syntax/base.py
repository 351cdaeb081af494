"""What the call syntaxes share: the whitespace they skip, the drain of their output,
and the check of arguments the model wrote as JSON.

A syntax appends argument JSON text to `_out` as it becomes final; the parser takes
it with `arguments()` (`syntax.protocol.CallSyntax`), which returns what was appended
since the last call and forgets it: the syntax never takes text back, so the argument
text streamed is append-only by construction. At `close()`, a syntax that passed the
model's own JSON through checks it once (`check_object`).
"""

from __future__ import annotations

import json
from typing import Final

from toolwire.nesting import MAX_DEPTH, json_too_deep
from toolwire.syntax.protocol import Reject

__all__ = ["UNPARSED", "WS", "ArgumentsDrain", "check_object"]

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


#: `check_object`'s `value` when the syntax has not parsed the text.
UNPARSED: Final = object()


def check_object(text: str, value: object = UNPARSED) -> None:
    """Raise `Reject` unless argument text `text` is a JSON object nested at most
    `MAX_DEPTH` deep (`value`: the text's parse, when the syntax already has it)."""
    if json_too_deep(text):
        raise Reject(f"the arguments nest deeper than {MAX_DEPTH} levels")
    if value is UNPARSED:
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise Reject(f"the arguments are not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise Reject("the arguments are not a JSON object")
