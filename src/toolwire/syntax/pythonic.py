"""Python-literal calls, converted to JSON as they come, typed by the declared schema.

    [get_weather(city="Paris", days=3), get_time()]

One call is one body; the list's `[` opens the first, and a body ends after its `)`
with the separator `,` (then `follows`, and the next body begins at once) or with the
list's `]`. Keyword arguments only (positional ones cannot be named: the body is
rejected). Each value is converted when its top-level `,` or `)` arrives, so output is
append-only and every character is scanned once (string interiors by one regex
search each). A value's JSON type comes from the schema where it declares one: a
`string` parameter keeps the literal's text (`zip=75001` -> "75001"), a number given
as a string is a number (`days="3"` -> 3); otherwise the literal's own type holds
(tuples become arrays, `None` null). A bare word (`unit=celsius`) is a string.
With `json_names`, JSON's `null`, `true` and `false` are those values wherever they
stand (OLMo 3 writes them in its calls), not bare words.
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Any

from toolwire.syntax.base import WS, ArgumentsDrain
from toolwire.syntax.protocol import CallContext, Reject
from toolwire.syntax.values import as_json, literal, quote_fragment

__all__ = ["PythonicCall", "python_literal"]

_IDENT_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_IDENT = _IDENT_START | frozenset("0123456789")
_NAME = _IDENT | {".", "-"}
_STRING_STOP = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}


class _Phase(Enum):
    START = 0
    NAME = 1
    OPEN = 2
    ARGS = 3
    KEY = 4
    EQUALS = 5
    VALUE = 6
    AFTER = 7


class PythonicCall(ArgumentsDrain):
    """Parses `[? NAME(KEY=VALUE, ...)` then `,` or `]` into a name and JSON arguments."""

    def __init__(self, context: CallContext, *, json_names: bool = False) -> None:
        super().__init__()
        self._json_names = json_names
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self.follows = False
        self._tools = context.tools
        self._phase = _Phase.START
        self._bracket = False
        self._word: list[str] = []  # the name or key being read
        self._key = ""
        self._source: list[str] = []  # the current value's text
        self._depth = 0
        self._quote = ""  # the open string's quote character
        self._escape = False
        self._count = 0
        self._error = ""

    def feed(self, text: str) -> int:
        if self.done:
            return 0
        i, n = 0, len(text)
        while i < n and not self.done:
            phase = self._phase
            if phase is _Phase.VALUE:
                i = self._value(text, i)
                continue
            c = text[i]
            if phase is _Phase.NAME or phase is _Phase.KEY:
                if c in (_NAME if phase is _Phase.NAME else _IDENT):
                    self._word.append(c)
                    i += 1
                    continue
                word, self._word = "".join(self._word), []
                if phase is _Phase.NAME:
                    self._key, self._phase = word, _Phase.OPEN  # the name, until `(`
                else:
                    self._key, self._phase = word, _Phase.EQUALS
                continue
            if c in WS:
                i += 1
            elif phase is _Phase.START:
                if c == "[" and not self._bracket:
                    self._bracket = True
                    i += 1
                elif c in _IDENT_START:
                    self._phase = _Phase.NAME
                else:
                    return self._fail("the call list holds no call", i)
            elif phase is _Phase.OPEN:
                if c != "(":
                    return self._fail("expected '(' after the tool's name", i)
                self.name, self._phase = self._key, _Phase.ARGS
                self._out.append("{")
                i += 1
            elif phase is _Phase.ARGS:
                if c == ")":
                    self._out.append("}")
                    self._phase = _Phase.AFTER
                    i += 1
                elif c in _IDENT_START:
                    self._phase = _Phase.KEY
                else:
                    return self._fail("arguments must be keyword arguments", i)
            elif phase is _Phase.EQUALS:
                if c != "=":
                    return self._fail("arguments must be keyword arguments", i)
                self._phase, self._source, self._depth = _Phase.VALUE, [], 0
                i += 1
            else:  # AFTER: the list goes on, ends, or the body ends before this text
                self.done = True
                if c == ",":
                    self.follows = True
                    return i + 1
                return i + 1 if c == "]" else i
        return i

    def _value(self, text: str, i: int) -> int:
        """Consume value text; at its top-level `,` or `)` convert and emit it."""
        start, n = i, len(text)
        while i < n:
            if self._quote:
                if self._escape:
                    self._escape, i = False, i + 1
                    continue
                match = _STRING_STOP[self._quote].search(text, i)
                if match is None:
                    i = n
                    break
                i = match.end()
                if match.group() == "\\":
                    self._escape = True
                else:
                    self._quote = ""
                continue
            c = text[i]
            if c == '"' or c == "'":
                self._quote = c
            elif c in "([{":
                self._depth += 1
            elif c in ")]}":
                if self._depth == 0:
                    if c != ")":
                        return self._fail(f"unbalanced {c!r} in a value", i)
                    self._source.append(text[start:i])
                    self._emit()
                    self._out.append("}")
                    self._phase = _Phase.AFTER
                    return i + 1
                self._depth -= 1
            elif c == "," and self._depth == 0:
                self._source.append(text[start:i])
                self._emit()
                self._phase = _Phase.ARGS
                return i + 1
            i += 1
        self._source.append(text[start:i])
        return i

    def _emit(self) -> None:
        source = "".join(self._source).strip(WS)
        if not source:
            self._fail("a parameter has no value", 0)
            return
        assert self.name is not None
        kind = self._tools.parameter_type(self.name, self._key)
        nulls = ("None", "null") if self._json_names else ("None",)
        if source in nulls and self._tools.parameter_nullable(self.name, self._key):
            kind = "null"  # Python's null, where the schema allows null
        prefix = ", " if self._count else ""
        value = python_literal(source, kind, json_names=self._json_names)
        self._out.append(f'{prefix}"{quote_fragment(self._key)}": {value}')
        self._count += 1

    def _fail(self, reason: str, at: int) -> int:
        self._error = self._error or reason
        self.done = True
        return at

    def close(self) -> None:
        if self._error:
            raise Reject(self._error)
        if self._phase is not _Phase.AFTER:
            raise Reject("the call is incomplete")


def python_literal(source: str, kind: str | None, *, json_names: bool = False) -> str:
    """The JSON text of one Python literal, typed by the schema's `kind` (`json_names`:
    JSON's `null`, `true`, `false` read as such)."""
    try:
        value: Any = literal(source, json_names=json_names)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return as_json(source, "string" if kind in (None, "any") else kind)
    if isinstance(value, str):
        if kind in ("integer", "number", "boolean", "null", "array", "object"):
            return as_json(value, kind)
        return json.dumps(value, ensure_ascii=False)
    if kind == "string":
        return json.dumps(source, ensure_ascii=False)
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):  # sets, bytes, complex, non-finite floats
        return json.dumps(source, ensure_ascii=False)
