"""A JSON call object whose arguments may also be a JSON string holding the object.

    {"name": "get_weather", "arguments": {"city": "Paris"}}
    {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}

Some models (Granite 4) write the second form now and then. Both are one call; the
arguments returned are always JSON object text: the model's own bytes for an object,
the decoded string for a string (which must itself be a JSON object). An object's
fragments stream as `JsonEnvelope` streams them; a string's are held until the body
closes, since its decoded text is known only whole.
"""

from __future__ import annotations

import json

from toolwire.syntax.base import WS
from toolwire.syntax.json_envelope import JsonEnvelope
from toolwire.syntax.protocol import CallContext, Reject

__all__ = ["EscapedArguments"]


class EscapedArguments(JsonEnvelope):
    """`JsonEnvelope`, accepting arguments given as a string that holds the object."""

    def __init__(self, context: CallContext, *, self_ending: bool = False) -> None:
        super().__init__(context, self_ending=self_ending)
        self._quoted = False  # the arguments value is a JSON string

    def _take(self, text: str) -> None:
        if self._key in self.argument_keys and self._args is None and not self._raw:
            self._quoted = text.lstrip(WS)[:1] == '"'
        super()._take(text)
        if self._quoted:
            self._out.clear()  # released decoded, at close

    def plain(self, text: str) -> str | None:
        """`JsonEnvelope.plain`, except inside an arguments string (held whole)."""
        return None if self._quoted else super().plain(text)

    def close(self) -> None:
        if self._quoted and self._args is not None:
            try:
                inner = json.loads(self._args)
                value = json.loads(inner)
            except (ValueError, TypeError, RecursionError):
                raise Reject("the arguments string does not hold JSON") from None
            if not isinstance(value, dict):
                raise Reject("the arguments string does not hold a JSON object")
            self._quoted = False
            self._args = inner.strip(WS)
            self._parsed = value
            self._out[:] = [self._args]
        super().close()
