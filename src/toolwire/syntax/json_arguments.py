"""A call body that is the arguments alone: the tool's name came before the body.

    {"city": "Paris", "days": 3}

Harmony (gpt-oss) names the tool in the message header (`to=functions.get_weather`),
which the parser hands over as `CallContext.name`. The body is one JSON object passed
through as the model's own bytes: fragments are slices of the output, and the whole is
checked to be a JSON object when the body closes.
"""

from __future__ import annotations

from toolwire.syntax.base import WS, ArgumentsDrain, check_object
from toolwire.syntax.jsonscan import JsonValue
from toolwire.syntax.protocol import CallContext, Reject

__all__ = ["JsonArguments"]


class JsonArguments(ArgumentsDrain):
    """Passes one JSON object through; the name is `context.name`."""

    def __init__(self, context: CallContext) -> None:
        super().__init__()
        self.name: str | None = context.name
        self.call_id: str | None = None
        self.done = False
        self._value = JsonValue()
        self._args: list[str] = []  # every fragment, for the check at close
        self._trailing = False  # non-space text after the value

    def feed(self, text: str) -> int:
        if self._value.done:
            self._trailing = self._trailing or bool(text.strip(WS))
            return len(text)
        end = self._value.feed(text)
        piece = text[:end] if self._args else text[:end].lstrip(WS)
        if piece:
            self._args.append(piece)
            self._out.append(piece)
        if end < len(text):
            self._trailing = bool(text[end:].strip(WS))
        return len(text)

    def close(self) -> None:
        if self.name is None:
            raise Reject("the call names no tool")
        if not self._value.end():
            raise Reject("the call's arguments are incomplete")
        if self._trailing:
            raise Reject("text after the call's arguments")
        check_object("".join(self._args))
