"""A list of calls whose end is a mark: `[a(...), b(...)]` then the list's end token.

    <|tool_call_start|>[get_weather(city="Paris"), get_time()]<|tool_call_end|>
    <|START_ACTION|>[{"tool_call_id": "0", "tool_name": ...}, {...}]<|END_ACTION|>

The call's opening delimiter opens the list; each item is one body, read by a
self-ending list syntax (`PythonicCall`, `JsonCall`: `follows` after a separator, so
the next item begins at once); after the last item's `]`, whitespace and then the
end mark (a format `mark`, in its structural form) belong to that last body. The end
mark is optional (a model may stop right after `]`); any other text ends the body
before it. Decided character by character, so any chunking gives the same result:
where the mark is several characters (matched as text), a character after `]` that
begins the mark must go on to complete it, or the call is rejected (released whole
as content), never cut between a held prefix and the text after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from toolwire.syntax.base import WS
from toolwire.syntax.protocol import CallContext, CallSyntax, Reject

__all__ = ["EndMarked", "ListItem"]


class ListItem(CallSyntax, Protocol):
    """A self-ending syntax for one item of a list (`formats.spec.Chained`)."""

    follows: bool


class EndMarked:
    """One item of a list ended by `mark`; the last item also takes the mark."""

    def __init__(
        self, context: CallContext, item: Callable[[CallContext], ListItem], mark: str
    ) -> None:
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self.follows = False
        self._item = item(context)
        self._mark = context.marks[mark]
        self._matched = 0  # characters of the mark seen after the list (0: none yet)
        self._error = ""

    def feed(self, text: str) -> int:
        if self.done:
            return 0
        item = self._item
        i = 0
        if not item.done:
            i = item.feed(text)
            self.name, self.call_id = item.name, item.call_id
            if not item.done:
                return len(text)
            if item.follows:
                self.done = self.follows = True
                return i
        mark, n = self._mark, len(text)
        while i < n:
            c = text[i]
            if self._matched:
                if c != mark[self._matched]:
                    self._error = "the list is followed by an incomplete end mark"
                    self.done = True
                    return i
                self._matched += 1
                i += 1
                if self._matched == len(mark):
                    self.done = True
                    return i
            elif c in WS:
                i += 1
            elif c == mark[0]:
                self._matched = 1
                i += 1
                if len(mark) == 1:
                    self.done = True
                    return i
            else:
                self.done = True  # text after the list: the body ends before it
                return i
        return n

    def arguments(self) -> str:
        return self._item.arguments()

    def close(self) -> None:
        if self._error or 0 < self._matched < len(self._mark):
            raise Reject(self._error or "the list is followed by an incomplete end mark")
        self._item.close()
