"""One list item in either of two syntaxes, chosen by its first character.

    [get_weather(city="Paris")]                          (a pythonic call)
    [{"name": "get_weather", "arguments": {...}}]        (a JSON call object)

LFM2 writes its call lists in either form (Liquid's documentation: pythonic by
default, JSON when the system prompt asks for it). Whitespace and the list's opening
`[` are held until the item's first other character: `{` begins a JSON call, anything
else the other syntax; the held text is then fed to the chosen one, so the choice is
the same in any chunking. Both syntaxes read the optional `[` themselves.
"""

from __future__ import annotations

from collections.abc import Callable

from toolwire.syntax.base import WS
from toolwire.syntax.end_marked import ListItem
from toolwire.syntax.protocol import CallContext, Reject

__all__ = ["Either"]


class Either:
    """`json` for an item that begins with `{`, `other` for any other."""

    def __init__(
        self,
        context: CallContext,
        *,
        json: Callable[[CallContext], ListItem],
        other: Callable[[CallContext], ListItem],
    ) -> None:
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self.follows = False
        self._context = context
        self._json, self._other = json, other
        self._chosen: ListItem | None = None
        self._held = ""  # whitespace and the opening `[` before the first character
        self._bracket = False

    def feed(self, text: str) -> int:
        if self._chosen is None:
            for c in text:
                if c in WS or (c == "[" and not self._bracket):
                    self._bracket = self._bracket or c == "["
                    continue
                build = self._json if c == "{" else self._other
                self._chosen = build(self._context)
                held, self._held = self._held, ""
                return self._sync(max(self._chosen.feed(held + text) - len(held), 0))
            self._held += text
            return len(text)
        return self._sync(self._chosen.feed(text))

    def _sync(self, used: int) -> int:
        chosen = self._chosen
        assert chosen is not None
        self.name, self.call_id = chosen.name, chosen.call_id
        self.done, self.follows = chosen.done, chosen.follows
        return used

    def arguments(self) -> str:
        return "" if self._chosen is None else self._chosen.arguments()

    def close(self) -> None:
        if self._chosen is None:
            raise Reject("the call list holds no call")
        self._chosen.close()
