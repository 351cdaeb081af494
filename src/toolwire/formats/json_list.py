"""A JSON list of calls between a token and the list's end mark: the pieces of a format.

    START [{"name": "get_weather", "arguments": {...}}, {...}] END

(Jamba's `<tool_calls>`, Apertus's `<|tools_prefix|>` with keyed items.) Each item is
one call (`syntax.json_calls` with the given envelope, the model's own argument
bytes); END ends the list (`syntax.end_marked`). `JsonList` holds the format's
`render`, `syntax` and structural-tag `Shape`; the format module registers them with
its own delimiters' data (reasoning, aliases). Pure data and hooks.

`word_list` is the other kind: a list after a word written as text at a line's start
(Granite 3.1's `<tool_call>[`, Phi-4-mini's `functools[`), ended by its own `]`
(`syntax.word_calls`), line-anchored; `named_items` writes any list's inside.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.formats.spec import (
    Anchor,
    AnchoredShape,
    CallContext,
    Format,
    RenderedCall,
    Shape,
)
from toolwire.syntax.end_marked import EndMarked
from toolwire.syntax.json_calls import JsonCall
from toolwire.syntax.json_envelope import JsonEnvelope
from toolwire.syntax.word_calls import WordCall

__all__ = ["JsonList", "named_items", "word_list"]

#: The structural tag's text before an item's arguments, for `{"name", "arguments"}` items.
NAMED_HEAD = '{"name": "{name}", "arguments": '


def _named(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": args}


def named_items(
    calls: Sequence[RenderedCall],
    item: Callable[[str, dict[str, Any]], dict[str, Any]] = _named,
) -> str:
    """The calls as JSON objects (`{"name", "arguments"}` by default) joined by `, `:
    a list's inside, without its brackets."""
    return ", ".join(json.dumps(item(n, dict(a)), ensure_ascii=False) for n, a in calls)


def word_list(name: str, word: str, start: str, **fields: Any) -> Format:
    """A line-anchored, text-gated format: a JSON list of `{"name", "arguments"}`
    calls opened by `start` (which begins with the body's `word`, and holds the `[`),
    ended by its `]`. `fields` are the format's other fields (aliases are the
    registry's)."""

    def render(calls: Sequence[RenderedCall]) -> str:
        return start + named_items(calls) + "]"

    def syntax(context: CallContext) -> WordCall:
        return WordCall(context, word)

    return Format(
        name=name,
        call=("", None),
        syntax=syntax,
        render=render,
        anchor=Anchor(begins=word[0], word=word),
        grammar=AnchoredShape("json", NAMED_HEAD, "}", separator=", ", items=(start, "]")),
        **fields,
    )


@dataclass(frozen=True)
class JsonList:
    """The list between `start` and `end`; items written by `item` and read by
    `envelope` (`{"name", "arguments"}` objects by default)."""

    start: str
    end: str
    envelope: type[JsonEnvelope] = JsonEnvelope
    item: Callable[[str, dict[str, Any]], dict[str, Any]] = _named
    #: The structural tag's text before an item's arguments.
    head: str = NAMED_HEAD

    def render(self, calls: Sequence[RenderedCall]) -> str:
        return self.start + "[" + named_items(calls, self.item) + "]" + self.end

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
