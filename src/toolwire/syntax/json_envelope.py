"""A call body that is one JSON object naming the tool and holding its arguments.

    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}

Used by hermes/Qwen (`arguments`) and Llama 3 (`parameters`). With `keyed` (Apertus),
the object's one key is the tool's name and its value the arguments::

    {"get_weather": {"city": "Paris", "days": 3}}

The arguments value is
passed through as the model's own bytes: fragments are slices of the output, and the
whole is checked to be a JSON object when the body closes. With `self_ending`, the
body ends at the object's closing brace (formats without a closing delimiter), or
where it stopped being a call object (`failed`), so the text from there is not held.
"""

from __future__ import annotations

import json
from enum import Enum

from toolwire.syntax.base import UNPARSED, WS, ArgumentsDrain, check_object
from toolwire.syntax.jsonscan import STRING, JsonValue
from toolwire.syntax.protocol import CallContext, Reject

__all__ = ["JsonEnvelope"]

_SCALAR_END = frozenset(WS + ",}]")  # where the scan ends a scalar (`jsonscan`)
_DECODER = json.JSONDecoder()


class _Phase(Enum):
    OPEN = 0
    KEY = 1
    COLON = 2
    VALUE = 3
    AFTER = 4
    END = 5


_VALUE = _Phase.VALUE


class JsonEnvelope(ArgumentsDrain):
    """Parses `{"name": ..., "arguments": {...}}` incrementally."""

    name_keys: tuple[str, ...] = ("name",)
    argument_keys: tuple[str, ...] = ("arguments", "parameters")
    #: The object's one key names the tool; its value is the arguments (Apertus).
    keyed: bool = False

    def __init__(self, context: CallContext, *, self_ending: bool = False) -> None:
        super().__init__()
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self._self_ending = self_ending
        self._phase = _Phase.OPEN
        self._buf = ""
        self._key = ""
        self._value = JsonValue()
        self._raw: list[str] = []  # the current value's text
        self._args: str | None = None  # the complete arguments text
        self._error = ""
        self._parsed: object = UNPARSED  # the arguments, when parsed whole
        self._value_end = 0
        self._tried = False  # the current value was offered to `_whole_value`
        #: `plain`'s conditions on the state held, checked at its first step after a
        #: `feed` (only `feed` changes them: a plain step leaves them as they are).
        self._ready = False
        self._emits = False  # and a plain step's text is an arguments fragment

    def feed(self, text: str) -> int:
        self._ready = False
        if self.done:
            return 0
        if self._error:
            return len(text)
        held, size, scanned = len(self._buf), len(text), 0
        if not held and self._tried and self._phase is _Phase.VALUE:
            # Inside a value (a streamed one, or one longer than its first chunk): the
            # scan takes the text as it is, without the buffer or the phase loop.
            end = self._value.feed(text)
            self._take(text[:end])
            if not self._value.done:
                return size
            self._value_done()
            text, scanned = text[end:], end
        buf = self._buf + text
        pos = self._advance(buf)
        self._buf = "" if self.done else buf[pos:]  # a self-ending body left the rest
        return scanned + max(0, pos - held) if self.done else size

    def plain(self, text: str) -> str | None:
        """`PlainStep`: more of a string inside the value that leaves it inside (no
        bare quote, escapes whole or ending it: `JsonValue.within`); None for
        anything else."""
        if not self._ready:
            if (
                self._phase is not _VALUE
                or not self._value.in_text
                or self._buf
                or self._out
                or self._error
                or not self._tried
            ):
                return None
            self._ready = True
            self._emits = self._key in self.argument_keys and self._args is None
        value = self._value
        if ('"' in text or "\\" in text or value.escape) and not value.within(text):
            return None
        self._raw.append(text)  # `_take`'s step inside a value (a subclass that holds
        # what it takes says so in its own `plain`: EscapedArguments)
        return text if self._emits else ""

    def _advance(self, buf: str) -> int:
        pos, size = 0, len(buf)
        while pos < size and not self._error and not self.done:
            phase = self._phase
            if phase is _Phase.VALUE:
                if not self._tried and self._whole_value(buf, pos):
                    pos = self._value_end
                    continue
                end = pos + self._value.feed(buf[pos:])
                self._take(buf[pos:end])
                pos = end
                if self._value.done:
                    self._value_done()
                continue
            while pos < size and buf[pos] in WS:
                pos += 1
            if pos == size:
                break
            char = buf[pos]
            if phase is _Phase.OPEN:
                if char != "{":
                    self._error = "the call body is not a JSON object"
                    break
                self._phase, pos = _Phase.KEY, pos + 1
            elif phase is _Phase.KEY:
                if char == "}":
                    self._phase, pos = _Phase.END, pos + 1
                    self.done = self._self_ending
                    continue
                if char != '"':
                    self._error = "expected a key in the call object"
                    break
                match = STRING.match(buf, pos)
                if match is None:
                    return pos  # hold the unfinished key
                try:  # a raw control character inside the quotes is not JSON
                    self._key = json.loads(match.group())
                except ValueError:
                    # The key belongs to the body: a self-ending body stops after it,
                    # never inside text it held back from an earlier chunk.
                    self._error = "a key of the call object is not a JSON string"
                    pos = match.end()
                    break
                self._phase, pos = _Phase.COLON, match.end()
                if self.keyed:
                    if self.name is not None or not self._key:
                        self._error = "a keyed call object holds one non-empty key"
                        break
                    self.name = self._key
            elif phase is _Phase.COLON:
                if char != ":":
                    self._error = "expected ':' in the call object"
                    break
                self._phase, pos = _Phase.VALUE, pos + 1
                self._value, self._tried = JsonValue(), False
                self._raw = []
            elif phase is _Phase.AFTER:
                if char == ",":
                    self._phase, pos = _Phase.KEY, pos + 1
                elif char == "}":
                    self._phase, pos = _Phase.END, pos + 1
                    self.done = self._self_ending
                else:
                    self._error = "expected ',' or '}' in the call object"
            else:
                self._error = "text after the call object"
        if self._error and not self.done:
            if not self._self_ending:
                return size
            self.done = True
        return pos

    def _holds_arguments(self) -> bool:
        """Whether the current value is the call's arguments."""
        return self.keyed or self._key in self.argument_keys

    @property
    def failed(self) -> bool:
        """True once the body cannot be a call (`close` will raise `Reject`)."""
        return bool(self._error)

    def _take(self, text: str) -> None:
        if not text:
            return
        if not self._raw:
            text = text.lstrip(WS)
            if not text:
                return
        self._raw.append(text)
        if self._holds_arguments() and self._args is None:
            self._out.append(text)

    def _whole_value(self, buf: str, pos: int) -> bool:
        """A value whose text is all here is parsed once, in C (`raw_decode`); else the
        incremental scan takes it. Tried once per value, so streaming stays linear."""
        start = pos
        while start < len(buf) and buf[start] in WS:
            start += 1
        if start == len(buf):
            return False
        self._tried = True
        try:
            parsed, end = _DECODER.raw_decode(buf, start)
        except (ValueError, RecursionError):  # the scan takes it; `close` checks depth
            return False
        if buf[start] not in '{["' and (end == len(buf) or buf[end] not in _SCALAR_END):
            # A number or literal at the end of the text may go on; one followed by
            # more word (`3abc`) ends where the scan says, in any chunking.
            return False
        self._value_end = end
        self._take(buf[start:end])
        if self._holds_arguments() and self._args is None:
            self._parsed = parsed
        self._value_done()
        return True

    def _value_done(self) -> None:
        raw = "".join(self._raw)
        self._phase = _Phase.AFTER
        if self.keyed:
            self._args = raw
        elif self._key in self.name_keys and self.name is None:
            try:
                name = json.loads(raw)
            except (ValueError, RecursionError):
                name = None
            if not isinstance(name, str) or not name:
                self._error = "the tool name is not a string"
            else:
                self.name = name
        elif self._key in self.argument_keys and self._args is None:
            self._args = raw

    def close(self) -> None:
        self._ready = False
        if self._error:
            raise Reject(self._error)
        if self._phase is _Phase.VALUE and self._value.end():
            self._value_done()
        if self._phase is not _Phase.END:
            raise Reject("the call object is incomplete")
        if self._buf.strip():
            raise Reject("text after the call object")
        if self.name is None:
            raise Reject("the call names no tool")
        if self._args is None:
            self._args = "{}"
            self._out.append("{}")
        check_object(self._args, self._parsed)
