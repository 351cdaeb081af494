"""One JSON call object as one body of a list of calls.

    {"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", ...}
    [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": ...}]

Llama 3 separates calls with `;`; Mistral before tokenizer v11 writes a JSON array
after `[TOOL_CALLS]`. The object is a `JsonEnvelope`, or a subclass naming other keys
(Command's `tool_name`/`parameters`) (the model's own argument bytes);
around it this syntax reads the list: an opening `[` before the first object, then
after each object its separator (`follows`: the next body begins at once) or the
closing `]`. Any other text ends the body before that text.
"""

from __future__ import annotations

from enum import Enum

from toolwire.syntax.base import WS
from toolwire.syntax.json_envelope import JsonEnvelope
from toolwire.syntax.protocol import CallContext, Reject

__all__ = ["JsonCall"]


class _Phase(Enum):
    START = 0
    OBJECT = 1
    AFTER = 2


class JsonCall:
    """`[? {call object}` then the separator, `]`, or the end of the body."""

    def __init__(
        self,
        context: CallContext,
        *,
        separator: str,
        envelope: type[JsonEnvelope] = JsonEnvelope,
    ) -> None:
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self.follows = False
        self._envelope = envelope(context, self_ending=True)
        self._separator = separator
        self._phase = _Phase.START
        self._bracket = False
        self._error = ""

    def feed(self, text: str) -> int:
        i, n = 0, len(text)
        while i < n and not self.done:
            if self._phase is _Phase.OBJECT:
                envelope = self._envelope
                used = envelope.feed(text[i:])
                self.name = envelope.name
                if not envelope.done:
                    return n
                i += used
                if envelope.failed:
                    self.done = True
                    return i
                self._phase = _Phase.AFTER
                continue
            c = text[i]
            if c in WS:
                i += 1
            elif self._phase is _Phase.START:
                if c == "[" and not self._bracket:
                    self._bracket = True
                    i += 1
                elif c == "{":
                    self._phase = _Phase.OBJECT
                else:
                    self._error = "the call is not a JSON object"
                    self.done = True
                    return i
            else:  # AFTER: the separator, the list's end, or text after the body
                self.done = True
                self.follows = c == self._separator
                return i + 1 if c == self._separator or c == "]" else i
        return i

    def arguments(self) -> str:
        return self._envelope.arguments()

    def close(self) -> None:
        if self._error:
            raise Reject(self._error)
        if self._phase is _Phase.START:
            raise Reject("the call list holds no call")
        self._envelope.close()
