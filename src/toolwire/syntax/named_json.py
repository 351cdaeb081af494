"""A call body that is a head naming the tool, then the model's own JSON arguments.

    get_weather<｜tool▁sep｜>{"city": "Paris", "days": 3}                DeepSeek V3.1
    function<｜tool▁sep｜>get_weather\\n```json\\n{"city": "Paris"}\\n```   DeepSeek V3
    functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}  Kimi K2

The head runs up to `head_end` (a structural form: a mark's sentinel, or text such as
"```json"); the format's `head` hook turns it into (name, call id) or raises `Reject`.
The arguments are one JSON value passed through as the model's bytes: fragments are
slices of the output, checked to be a JSON object when the body closes. After it only
whitespace and `tail` (V3's closing fence) may follow. With `self_ending` the body ends
at the value's end (formats without a closing delimiter).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from toolwire.syntax.base import WS, ArgumentsDrain, check_object
from toolwire.syntax.jsonscan import JsonValue
from toolwire.syntax.protocol import CallContext, Reject

__all__ = ["Head", "NamedJson"]


#: Head text -> (tool name, the model's call id or None); raises `Reject`.
Head = Callable[[str], tuple[str, str | None]]


class _Phase(Enum):
    HEAD = 0
    ARGS = 1
    AFTER = 2


class NamedJson(ArgumentsDrain):
    """Parses `HEAD <head_end> JSON [tail]` incrementally."""

    def __init__(
        self,
        context: CallContext,
        *,
        head_end: str,
        head: Head,
        tail: str = "",
        self_ending: bool = False,
    ) -> None:
        super().__init__()
        del context  # the arguments are the model's own JSON: no schema typing
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self._head_end = head_end
        self._head = head
        self._tail = tail
        self._self_ending = self_ending
        self._phase = _Phase.HEAD
        self._buf = ""  # the head so far, or the text after the arguments
        self._value = JsonValue()
        self._args: list[str] = []  # every argument fragment, for the check at close
        self._error = ""

    def feed(self, text: str) -> int:
        if self.done:
            return 0
        if self._error:
            return len(text)
        pos = 0
        if self._phase is _Phase.HEAD:
            searched = max(0, len(self._buf) - len(self._head_end) + 1)
            self._buf += text
            at = self._buf.find(self._head_end, searched)
            if at < 0:
                return len(text)
            head, rest = self._buf[:at], self._buf[at + len(self._head_end) :]
            self._buf = ""
            try:
                self.name, self.call_id = self._head(head)
            except Reject as exc:
                self._error = str(exc) or "the call's head names no tool"
                return len(text)
            self._phase = _Phase.ARGS
            pos = len(text) - len(rest)
        if self._phase is _Phase.ARGS:
            end = pos + self._value.feed(text[pos:])
            self._take(text[pos:end])
            pos = end
            if not self._value.done:
                return len(text)
            self._phase = _Phase.AFTER
            if self._self_ending:
                self.done = True
                return pos
        self._buf += text[pos:]
        if len(self._buf.strip(WS)) > len(self._tail):
            self._error = "text after the call's arguments"
        return len(text)

    def _take(self, text: str) -> None:
        if not self._args:
            text = text.lstrip(WS)
        if text:
            self._args.append(text)
            self._out.append(text)

    def close(self) -> None:
        if self._error:
            raise Reject(self._error)
        if self._phase is _Phase.HEAD:
            raise Reject("the call has no arguments")
        if self._phase is _Phase.ARGS and not self._value.end():
            raise Reject("the call's arguments are incomplete")
        if self._buf.strip(WS) not in ("", self._tail):
            raise Reject("text after the call's arguments")
        check_object("".join(self._args))
