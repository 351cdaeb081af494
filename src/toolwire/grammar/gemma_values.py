"""Gemma arguments element by element, so the string quote is written as its token id.

XGrammar's `gemma` json_schema style writes Gemma 4's string quote `<|"|>` as text; a
token-level tag must write the id the parser (gated by it) reads, and a format with
another quote (FunctionGemma's `<escape>`) needs it written at either level. Data flow: a
schema (properties already sorted, as the template writes keys) -> elements:

    string     QUOTE TEXT QUOTE      (QUOTE the token; TEXT holds no delimiter id)
    enum       each value as the template writes it
    integer, number, boolean, null   XGrammar `json_schema` (no strings inside)
    array      "[" [v ("," v)*] "]"
    object     "{" key:v ("," key:v)* "}"   keys unquoted, in order, required present,
               optional ones may go; without `properties`: any keys, scalar values
    other      a string or a JSON scalar

Objects are expanded without named rules: one alternative per possible first entry
(quadratic in the leading optional entries). Pure: no xgrammar import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolwire.tools import schema_type

__all__ = ["GemmaValues"]

Element = dict[str, Any]
_KEY = "[A-Za-z_][A-Za-z0-9_]{0,15}"


def _seq(elements: list[Element]) -> Element:
    return elements[0] if len(elements) == 1 else {"type": "sequence", "elements": elements}


def _text(value: str) -> Element:
    return {"type": "const_string", "value": value}


class GemmaValues:
    """Elements for Gemma values; `quote` is the string quote's id (`<|"|>`,
    `<escape>`), or its text for a text-level tag; `free` free text."""

    def __init__(self, quote: int | str, free: Element) -> None:
        self.quote: Element = (
            {"type": "token", "token": quote} if isinstance(quote, int) else _text(quote)
        )
        # A string's text ends at the quote: its id, or its text.
        self.end: Element | str = self.quote if isinstance(quote, int) else quote
        self.free = free

    def string(self) -> Element:
        return _seq(
            [self.quote, {"type": "tag", "begin": "", "content": self.free, "end": self.end}]
        )

    def literal(self, value: Any) -> Element:
        if isinstance(value, str):
            return _seq([self.quote, _text(value), self.quote] if value else [self.quote] * 2)
        return _text(json.dumps(value))

    def scalar(self) -> Element:
        json_scalar = {"type": ["number", "boolean", "null"]}
        return {
            "type": "or",
            "elements": [self.string(), {"type": "json_schema", "json_schema": json_scalar}],
        }

    def value(self, schema: Any) -> Element:
        if not isinstance(schema, Mapping):
            return self.scalar()
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return {"type": "or", "elements": [self.literal(v) for v in schema["enum"]]}
        kind = schema_type(schema)
        if kind == "string":
            return self.string()
        if kind in ("integer", "number", "boolean", "null"):
            return {"type": "json_schema", "json_schema": dict(schema)}
        if kind == "array":
            item = self.value(schema.get("items"))
            more = {"type": "star", "content": _seq([_text(","), item])}
            body = {"type": "optional", "content": _seq([item, more])}
            return _seq([_text("["), body, _text("]")])
        if kind == "object":
            return self.object(schema)
        return self.scalar()

    def object(self, schema: Mapping[str, Any]) -> Element:
        props = schema.get("properties")
        if not isinstance(props, Mapping):
            entry = _seq([{"type": "regex", "pattern": _KEY}, _text(":"), self.scalar()])
            more = {"type": "star", "content": _seq([_text(","), entry])}
            body: Element = {"type": "optional", "content": _seq([entry, more])}
            return _seq([_text("{"), body, _text("}")])
        required = set(schema.get("required") or ())
        keys = list(props)
        entries = [_seq([_text(f"{k}:"), self.value(props[k])]) for k in keys]

        def tail(start: int) -> list[Element]:
            out: list[Element] = []
            for n in range(start, len(keys)):
                one = _seq([_text(","), entries[n]])
                out.append(one if keys[n] in required else {"type": "optional", "content": one})
            return out

        options: list[Element] = []
        for n, key in enumerate(keys):  # the first entry written
            options.append(_seq([entries[n], *tail(n + 1)]))
            if key in required:
                break
        else:
            options.append(_text(""))  # no entry at all
        body = options[0] if len(options) == 1 else {"type": "or", "elements": options}
        return _seq([_text("{"), body, _text("}")])
