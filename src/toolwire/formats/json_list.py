"""A JSON list of calls between a token and the list's end mark: the pieces of a format.

    START [{"name": "get_weather", "arguments": {...}}, {...}] END

(Jamba's `<tool_calls>`, Apertus's `<|tools_prefix|>` with keyed items.) Each item is
one call (`syntax.json_calls` with the given envelope, the model's own argument
bytes); END ends the list (`syntax.end_marked`). `JsonList` holds the format's
`render`, `syntax` and structural-tag `Shape`; the format module registers them with
its own delimiters' data (reasoning, aliases). Pure data and hooks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.formats.spec import CallContext, RenderedCall, Shape
from toolwire.syntax.end_marked import EndMarked
from toolwire.syntax.json_calls import JsonCall
from toolwire.syntax.json_envelope import JsonEnvelope

__all__ = ["JsonList"]


def _named(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": args}


@dataclass(frozen=True)
class JsonList:
    """The list between `start` and `end`; items written by `item` and read by
    `envelope` (`{"name", "arguments"}` objects by default)."""

    start: str
    end: str
    envelope: type[JsonEnvelope] = JsonEnvelope
    item: Callable[[str, dict[str, Any]], dict[str, Any]] = _named
    #: The structural tag's text before an item's arguments.
    head: str = '{"name": "{name}", "arguments": '

    def render(self, calls: Sequence[RenderedCall]) -> str:
        items = [json.dumps(self.item(n, dict(a)), ensure_ascii=False) for n, a in calls]
        return self.start + "[" + ", ".join(items) + "]" + self.end

    def _item(self, context: CallContext) -> JsonCall:
        return JsonCall(context, separator=",", envelope=self.envelope)

    def syntax(self, context: CallContext) -> EndMarked:
        return EndMarked(context, self._item, self.end)

    @property
    def shape(self) -> Shape:
        return Shape(
            head=self.head,
            tail="}",
            name="json",
            items=("[", "]"),
            separator=", ",
            list_end=self.end,
        )
