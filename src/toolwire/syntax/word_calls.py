"""Calls that begin with a word, not a token: a JSON list, or one body of another syntax.

    functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]
    <tool_call> [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    <function name="get_weather"><param name="city">Paris</param></function>

Phi-4-mini writes `functools[`, Granite 3.1 the text `<tool_call>` (then the list),
MiniCPM `<function name="` (then its tagged body, `inner`).
The first body of the list reads the word character by character (a body that only
begins like it, `for ...`, is rejected and released as content); a word that ends
with the list's `[` hands it on. The rest is `inner`'s, by default `syntax.json_calls` (one body per
item, the model's own argument bytes; whitespace before the `[`); a body that follows
a call in the same list (after its `,`) begins at the object, without the word.
"""

from __future__ import annotations

from collections.abc import Callable

from toolwire.syntax.json_calls import JsonCall
from toolwire.syntax.protocol import CallContext, CallSyntax, Reject

__all__ = ["WordCall"]


class WordCall:
    """`word`, then a JSON call object of a list (`JsonCall`), or `inner`'s body."""

    def __init__(
        self,
        context: CallContext,
        word: str,
        inner: Callable[[CallContext], CallSyntax] | None = None,
    ) -> None:
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self.follows = False
        self._word = word
        self._inner: CallSyntax = (
            JsonCall(context, separator=",") if inner is None else inner(context)
        )
        self._matched = 0  # characters of the word read; -1: the body is a list's next item
        self._error = ""

    def feed(self, text: str) -> int:
        word = self._word
        i = 0
        if self._matched == 0 and text and text[0] != word[0]:
            self._matched = -1
        while 0 <= self._matched < len(word) and i < len(text):
            if text[i] != word[self._matched]:
                self._error = f"the call list does not begin with {word!r}"
                self.done = True
                return i
            self._matched += 1
            i += 1
            if self._matched == len(word) and word.endswith("["):
                self._inner.feed("[")
        if 0 <= self._matched < len(word):
            return i
        used = i + self._inner.feed(text[i:])
        self.name, self.done = self._inner.name, self._inner.done
        # (`Chained`, looked up: a runtime protocol check per feed costs ~20 µs)
        self.follows = bool(getattr(self._inner, "follows", False))
        return used

    def arguments(self) -> str:
        return self._inner.arguments()

    def close(self) -> None:
        if self._error:
            raise Reject(self._error)
        if 0 <= self._matched < len(self._word):
            raise Reject(f"the body ended inside {self._word!r}")
        self._inner.close()
