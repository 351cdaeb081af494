"""Gemma 4's call body: `call:NAME{...}` with unquoted keys and `<|"|>` strings.

    call:get_weather{city:<|"|>Paris<|"|>,days:3,opts:{units:<|"|>metric<|"|>}}

(Gemma 4's chat template, `format_argument`.) Keys are bare words (or `<|"|>`-quoted);
every string, at any depth, is delimited by the `<|"|>` token, so a string may hold
any character. The body is converted to JSON incrementally and append-only: strings
stream escaped fragment by fragment, keys and bare scalars are emitted once their
terminator is seen. A bare scalar becomes a JSON number, boolean or null when it is
one, else a string; a top-level parameter the schema types as a string stays a
string (`zip:01234` -> "01234").

With `typed_strings` (FunctionGemma, whose parsers read every value from between its
quotes), a quoted top-level value the schema types as an integer, number or boolean
is held to its closing quote and becomes that JSON value when its
text is one (`days:<escape>3<escape>` -> 3); any other text stays a string.
"""

from __future__ import annotations

import json
import math
import re
from enum import Enum

from toolwire.holdback import Holdback
from toolwire.nesting import MAX_DEPTH
from toolwire.syntax.base import WS, ArgumentsDrain
from toolwire.syntax.protocol import CallContext, Reject
from toolwire.syntax.values import quote_fragment

__all__ = ["GemmaCall"]

_KEY_END = re.compile(r":")
_SCALAR_END = re.compile(r"[,}\]]")
_PYTHON = {"True": "true", "False": "false", "None": "null"}
#: Schema types a quoted value may be read as (`typed_strings`), and the values of each.
_TYPED: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


class _Mode(Enum):
    HEAD = 0
    VALUE = 1  # a value (or, first in an array, its close) is expected
    KEY = 2  # a key (or, first in an object, its close) is expected
    KEY_TEXT = 3  # inside a bare key, up to ':'
    COLON = 4  # after a quoted key
    STRING = 5
    SCALAR = 6
    AFTER = 7  # ',' or the container's close is expected
    END = 8


class GemmaCall(ArgumentsDrain):
    """Parses one Gemma 4 call body into a name and JSON arguments."""

    def __init__(self, context: CallContext, quote: str, *, typed_strings: bool = False) -> None:
        super().__init__()
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self._tools = context.tools
        self._quote = quote  # the structural form of `<|"|>`
        self._quote_start = Holdback([quote])  # a string's tail that may begin its end
        self._mode = _Mode.HEAD
        self._buf = ""  # text not yet consumed (a partial quote, an unfinished head)
        self._searched = 0  # how much of an unfinished head is known to hold no brace
        self._word: list[str] = []  # the bare key or scalar so far, or a quoted key
        self._quoted_key = False
        self._key = ""  # the current top-level key, for schema typing
        self._stack: list[str] = []  # open containers, "{" or "["
        self._fresh = False  # a container just opened: it may close at once
        self._error = ""
        self._typed_strings = typed_strings
        self._held: list[str] | None = None  # a quoted value held to be typed
        self._held_kind = ""  # the schema type it is read as

    def feed(self, text: str) -> int:
        if not self._error:
            self._buf += text
            self._advance()
        return len(text)

    def close(self) -> None:
        if self._error:
            raise Reject(self._error)
        if self._mode is not _Mode.END or self._buf.strip(WS):
            raise Reject("the call's arguments are incomplete")

    # -- the converter ---------------------------------------------------------------

    def _advance(self) -> None:
        buf, pos, quote = self._buf, 0, self._quote
        while pos < len(buf) and not self._error:
            mode = self._mode
            if mode is _Mode.HEAD:
                at = buf.find("{", self._searched)
                if at < 0:
                    self._searched = len(buf)  # the head so far holds no brace
                    break
                head = buf[:at].strip(WS)
                name = head[5:] if head.startswith("call:") else head
                if not name or quote in name:
                    self._error = "the call names no tool"
                    break
                self.name = name.strip(WS)
                self._open("{")
                pos = at + 1
                continue
            if mode is _Mode.STRING:
                at = buf.find(quote, pos)
                end = at if at >= 0 else len(buf) - self._quote_start.tail(buf)
                piece = buf[pos:end]
                if self._quoted_key:
                    self._word.append(piece)
                elif self._held is not None:
                    self._held.append(piece)
                elif piece:
                    self._out.append(quote_fragment(piece))
                if at < 0:
                    pos = end
                    break
                pos = at + len(quote)
                if self._quoted_key:
                    self._mode = _Mode.COLON
                else:
                    self._end_string()
                    self._mode = _Mode.AFTER
                continue
            if mode in (_Mode.KEY_TEXT, _Mode.SCALAR):
                match = (_KEY_END if mode is _Mode.KEY_TEXT else _SCALAR_END).search(buf, pos)
                self._word.append(buf[pos : match.start() if match else len(buf)])
                if match is None:
                    pos = len(buf)
                    break
                if mode is _Mode.KEY_TEXT:
                    self._emit_key("".join(self._word).strip(WS))
                    pos = match.end()
                else:
                    self._emit_scalar("".join(self._word).strip(WS))
                    pos = match.start()
                continue
            while pos < len(buf) and buf[pos] in WS:
                pos += 1
            if pos == len(buf):
                break
            if buf.startswith(quote, pos):
                pos += len(quote)
                self._fresh = False
                self._begin_string(key=mode is _Mode.KEY)
                continue
            if len(buf) - pos < len(quote) and quote.startswith(buf[pos:]):
                break  # maybe the start of a quote: wait for the next text
            pos = self._structure(buf, pos)
        self._buf = buf[pos:]

    def _structure(self, buf: str, pos: int) -> int:
        """One character of structure, or the start of a bare word; returns the next pos."""
        char, mode = buf[pos], self._mode
        fresh, self._fresh = self._fresh, False
        closes = {"}": "{", "]": "["}
        if char in closes and (mode is _Mode.AFTER or (fresh and mode is not _Mode.COLON)):
            if not self._stack or self._stack[-1] != closes[char]:
                self._error = f"unbalanced {char!r} in the call's arguments"
            else:
                self._stack.pop()
                self._out.append(char)
                self._mode = _Mode.AFTER if self._stack else _Mode.END
            return pos + 1
        if mode is _Mode.AFTER:
            if char != ",":
                self._error = "expected ',' in the call's arguments"
                return pos
            self._out.append(", ")
            self._mode = _Mode.KEY if self._stack[-1] == "{" else _Mode.VALUE
            return pos + 1
        if mode is _Mode.COLON:
            if char != ":":
                self._error = "expected ':' after a key"
                return pos
            self._emit_key("".join(self._word))
            return pos + 1
        if mode is _Mode.KEY:
            self._word, self._mode = [], _Mode.KEY_TEXT
            return pos
        if mode is _Mode.VALUE and char in "{[":
            self._open(char)
            return pos + 1
        if mode is _Mode.VALUE:
            self._word, self._mode = [], _Mode.SCALAR
            return pos
        self._error = "text after the call's arguments"
        return pos

    def _open(self, char: str) -> None:
        if len(self._stack) >= MAX_DEPTH:
            self._error = f"the call's arguments nest deeper than {MAX_DEPTH} levels"
            return
        self._fresh = True
        self._stack.append(char)
        self._out.append(char)
        self._mode = _Mode.KEY if char == "{" else _Mode.VALUE

    def _begin_string(self, *, key: bool) -> None:
        self._quoted_key, self._word = key, []
        kind = None
        if not key and self._typed_strings and len(self._stack) == 1 and self.name is not None:
            kind = self._tools.parameter_type(self.name, self._key)
        if kind in _TYPED:
            self._held, self._held_kind = [], kind or ""
        elif not key:
            self._out.append('"')
        self._mode = _Mode.STRING

    def _end_string(self) -> None:
        if self._held is None:
            self._out.append('"')
            return
        text, self._held = "".join(self._held), None
        self._out.append(_typed(text, _TYPED[self._held_kind]))

    def _emit_key(self, key: str) -> None:
        if not key:
            self._error = "a parameter has no name"
            return
        if len(self._stack) == 1:
            self._key = key
        self._out.append(json.dumps(key, ensure_ascii=False) + ": ")
        self._quoted_key, self._mode = False, _Mode.VALUE

    def _emit_scalar(self, word: str) -> None:
        kind = None
        if len(self._stack) == 1 and self.name is not None:
            kind = self._tools.parameter_type(self.name, self._key)
            if word in ("null", "None") and self._tools.parameter_nullable(self.name, self._key):
                kind = "null"  # a bare null, where the schema allows null
        self._out.append(_scalar(word, kind))
        self._mode = _Mode.AFTER


def _scalar(word: str, kind: str | None) -> str:
    """The JSON text of a bare scalar, a string where the schema says so."""
    if kind != "string":
        if word in ("true", "false", "null"):
            return word
        if word in _PYTHON:
            return _PYTHON[word]
        try:
            value = json.loads(word)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return word
    return json.dumps(word, ensure_ascii=False)


def _typed(text: str, kinds: tuple[type, ...]) -> str:
    """The JSON text of a quoted value: the JSON value it spells when of `kinds`."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, float) and not math.isfinite(value):
        value = None  # `1e999`: JSON has no infinity
    if isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(text, ensure_ascii=False)
