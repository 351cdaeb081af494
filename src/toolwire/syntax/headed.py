"""A call body that begins with a fixed header, then another syntax's body.

    \\n\\nfunction call<|role_sep|>\\n{"name": "get_weather", "arguments": {...}}

GigaChat 3 opens a call with its message separator; what follows is the header of
a message of the `function call` role (text, then the role separator, an inner mark
standing in its structural form), then the call's JSON. This syntax skips the
whitespace before the header, reads the header character by character and hands
the rest to the inner syntax. Text that departs from the header ends the body there
and `close` rejects it: the parser releases the whole body as content, in any
chunking (the check is per character, so a header cut anywhere reads the same).
"""

from __future__ import annotations

from collections.abc import Callable

from toolwire.syntax.base import WS
from toolwire.syntax.protocol import CallContext, CallSyntax, Reject

__all__ = ["Headed"]


class Headed:
    """`header` (whitespace before it skipped), then the body of `inner`."""

    def __init__(
        self,
        context: CallContext,
        header: str,
        inner: Callable[[CallContext], CallSyntax],
    ) -> None:
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self._header = header
        self._inner = inner(context)
        self._matched = 0  # characters of the header read
        self._error = ""

    def feed(self, text: str) -> int:
        if self.done:
            return 0
        i = 0
        while self._matched < len(self._header) and i < len(text):
            char = text[i]
            if self._matched == 0 and char in WS and char != self._header[0]:
                i += 1
                continue
            if char != self._header[self._matched]:
                self._error = "the body does not begin with the call's header"
                self.done = True
                return i
            self._matched += 1
            i += 1
        if self._matched < len(self._header):
            return i
        used = i + self._inner.feed(text[i:])
        self.name, self.call_id, self.done = self._inner.name, self._inner.call_id, self._inner.done
        return used

    def arguments(self) -> str:
        return "" if self._error else self._inner.arguments()

    def close(self) -> None:
        if self._error:
            raise Reject(self._error)
        if self._matched < len(self._header):
            raise Reject("the body ended inside the call's header")
        self._inner.close()
