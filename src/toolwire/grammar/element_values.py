"""Arguments as nested elements (MiniMax M3), built from the schema element by element.

    NS<city>ParisNS</city>  NS<days>3NS</days>  NS<tags>NS<item>xNS</item>NS</tags>

NS (the namespace token, by id at token level) stands before every tag. What an
element holds follows its schema, as `syntax.elements` reads it back:

    string            text holding no delimiter (an enum: one of its values)
    integer, number,  the JSON scalar, written bare (XGrammar's json_schema of it)
    boolean, null
    object            its properties' elements, required ones always, others
                      optional, in schema order (none declared: empty, as a grammar
                      cannot make a close repeat a name it did not fix)
    array             `item` elements of the items schema (`minItems`/`maxItems` kept)
    anything else     text holding no delimiter

Depth is bounded (`MAX_DEPTH` levels; deeper schemas take text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolwire.tools import schema_type

__all__ = ["ElementValues"]

Element = dict[str, Any]

#: Schema levels written element by element; deeper ones are text.
MAX_DEPTH = 6
#: Up to this many array items are spelled out as optional; beyond, a star.
_SPELLED = 8
_SCALARS = ("integer", "number", "boolean", "null")


def _seq(elements: list[Element]) -> Element:
    if not elements:
        return {"type": "const_string", "value": ""}
    return elements[0] if len(elements) == 1 else {"type": "sequence", "elements": elements}


class ElementValues:
    """`ns`: the namespace element; `text`: free text holding no delimiter."""

    def __init__(self, ns: Element, text: Element) -> None:
        self.ns = ns
        self.text = text
        #: The namespace as a tag's end: a string, or the token element.
        self.ns_end: str | Element = ns["value"] if ns["type"] == "const_string" else ns

    def element(self, name: str, schema: Any, depth: int, after: str = "") -> Element:
        """`NS<name>` value `NS</name>`, then `after`."""
        opening = [self.ns, {"type": "const_string", "value": f"<{name}>"}]
        closing = {"type": "const_string", "value": f"</{name}>{after}"}
        value = self.value(schema, depth + 1)
        if value is self.text:  # unbounded text ends at the namespace token (a tag)
            value = {"type": "tag", "begin": "", "content": self.text, "end": self.ns_end}
            return _seq([*opening, value, closing])
        return _seq([*opening, value, self.ns, closing])

    def value(self, schema: Any, depth: int) -> Element:
        kind = schema_type(schema) if depth <= MAX_DEPTH else None
        sub = schema if isinstance(schema, Mapping) else {}
        if kind == "string":
            enum = sub.get("enum")
            if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
                options = [{"type": "const_string", "value": v} for v in enum]
                return options[0] if len(options) == 1 else {"type": "or", "elements": options}
            return self.text
        if kind in _SCALARS:
            return {"type": "json_schema", "json_schema": dict(sub)}
        if kind == "object":
            return self.members(sub, depth)
        if kind == "array":
            return self.items(sub, depth)
        return self.text

    def members(self, schema: Mapping[str, Any], depth: int, after: str = "") -> Element:
        """An object's properties as elements (each followed by `after`)."""
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            # No names declared: an element's close must repeat its name, which a
            # grammar cannot capture, so such an object is written empty.
            return {"type": "const_string", "value": ""}
        required = set(schema.get("required") or ())
        out: list[Element] = []
        for key, sub in props.items():
            one = self.element(str(key), sub, depth, after)
            out.append(one if key in required else {"type": "optional", "content": one})
        return _seq(out)

    def items(self, schema: Mapping[str, Any], depth: int) -> Element:
        item = self.element("item", schema.get("items"), depth)
        low = schema.get("minItems")
        high = schema.get("maxItems")
        low = low if isinstance(low, int) and 0 <= low <= _SPELLED else 0
        out: list[Element] = [item] * low
        if isinstance(high, int) and low <= high <= _SPELLED:
            out += [{"type": "optional", "content": item}] * (high - low)
        else:
            out.append({"type": "star", "content": item})
        return _seq(out)
