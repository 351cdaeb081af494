"""A call body of named elements that nest, converted to JSON by the declared schema.

    "get_weather">
    NS<city>ParisNS</city>
    NS<days>3NS</days>
    NS<tags>NS<item>xNS</item>NS<item>yNS</item>NS</tags>
    NS</invoke>

That is MiniMax M3, where NS is its namespace token (`]<]minimax[>[`) standing before
every tag. Each parameter is an element named after it; an element holding elements
is an object, or an array where its schema says so or where its children are all
`<item>` (the template's list items) and the schema wants no object; an empty
element is an empty array or object where the schema wants one. Text values are
typed by the schema (`values.as_json`); a name repeated at one level collects its
values in a list.

The body begins with the tool's name, after `name=`: in double quotes, in single
quotes, or unquoted up to `>` (the three forms vLLM's M3 parser reads). The body ends
itself at `end` (NS`</invoke>`). Text is collected until then (the
search resumes where it stopped, so each character is scanned once) and converted
once, when the body closes: arguments are all emitted then, so the output is
append-only however the body was cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolwire.nesting import MAX_DEPTH
from toolwire.syntax.base import WS, ArgumentsDrain
from toolwire.syntax.protocol import CallContext, Reject
from toolwire.syntax.values import as_json
from toolwire.tools import schema_nullable, schema_type

__all__ = ["Elements"]

ITEM = "item"
# An element's value: its text, or its (name, value) children in order.
_Value = str | list[tuple[str, "_Value"]]


class Elements(ArgumentsDrain):
    """Parses one element-tree call body; `ns` and `end` are structural forms."""

    def __init__(self, context: CallContext, *, ns: str, end: str) -> None:
        super().__init__()
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self._schemas = context.tools.schemas
        self._ns = ns
        self._end = end
        self._spacing = re.compile(re.escape(ns) + r"[ \t\r\n]+(?=<)")
        self._buf = ""
        self._searched = 0  # the end tag does not begin before this offset

    # -- CallSyntax ------------------------------------------------------------------

    def feed(self, text: str) -> int:
        if self.done:
            return 0
        self._buf += text
        if self.name is None:
            head = _head(self._buf)
            if head is not None:
                name = head[0].strip()
                self.name = name if name and self._ns not in name else ""
        at = self._buf.find(self._end, self._searched)
        if at < 0:
            self._searched = max(0, len(self._buf) - len(self._end) + 1)
            return len(text)
        rest = len(self._buf) - at - len(self._end)
        self._buf = self._buf[:at]
        self.done = True
        return len(text) - rest

    def close(self) -> None:
        head = _head(self._buf)
        if not self.name or head is None:
            raise Reject("the call names no tool")
        body = self._spacing.sub(self._ns, self._buf[head[1] :])
        params: list[tuple[str, _Value]] = []
        pos = _skip_space(body, 0)
        while pos < len(body):
            name, value, pos = self._element(body, pos, 1)
            params.append((name, value))
            pos = _skip_space(body, pos)
        schema = self._schemas.get(self.name) or {}
        self._out.append(json.dumps(_object(params, schema), ensure_ascii=False))

    # -- parsing -----------------------------------------------------------------------

    def _element(self, text: str, pos: int, depth: int) -> tuple[str, _Value, int]:
        """The element at `pos`: its name, value and the offset after its close."""
        ns = self._ns
        if depth > MAX_DEPTH:
            raise Reject("the arguments nest too deeply")
        if not text.startswith(ns + "<", pos) or text.startswith(ns + "</", pos):
            raise Reject("expected a parameter element in the call body")
        start = pos + len(ns) + 1
        stop = text.find(">", start)
        name = text[start:stop] if stop >= 0 else ""
        if not name.strip() or ns in name:
            raise Reject("a parameter element has no name")
        close = f"{ns}</{name}>"
        pos = stop + 1
        parts: list[str] = []
        children: list[tuple[str, _Value]] = []
        while True:
            marker = text.find(ns, pos)
            if marker < 0:
                raise Reject(f"the element {name!r} does not end")
            parts.append(text[pos:marker])
            if text.startswith(close, marker):
                pos = marker + len(close)
                break
            child, value, pos = self._element(text, marker, depth + 1)
            children.append((child, value))
        body = "".join(parts)
        if not children:
            return name, body, pos
        if body.strip():
            raise Reject(f"the element {name!r} holds both text and elements")
        return name, children, pos


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in WS:
        pos += 1
    return pos


def _convert(value: _Value, schema: Any) -> Any:
    kind = schema_type(schema)
    if isinstance(value, str):
        if kind in ("object", "array") and not value.strip():
            return [] if kind == "array" else {}
        return json.loads(as_json(value, kind, schema_nullable(schema)))
    if kind == "array" or (kind != "object" and all(n == ITEM for n, _ in value)):
        items = schema.get("items") if isinstance(schema, Mapping) else None
        return [_convert(child, items) for _, child in value]
    return _object(value, schema)


def _object(elements: list[tuple[str, _Value]], schema: Any) -> dict[str, Any]:
    """Named elements as an object; a repeated name collects its values in a list."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    out: dict[str, Any] = {}
    repeated: set[str] = set()
    for name, element in elements:
        value = _convert(element, props.get(name))
        if name not in out:
            out[name] = value
        elif name in repeated:
            out[name].append(value)
        else:
            out[name] = [out[name], value]
            repeated.add(name)
    return out


def _head(text: str) -> tuple[str, int] | None:
    """The tool's name at the start of `text` and the offset after its `>`: `"NAME">`,
    `'NAME'>` or `NAME>`; None while it has not ended."""
    quote = text[:1]
    if quote in ('"', "'"):
        end = text.find(quote + ">", 1)
        return None if end < 0 else (text[1:end], end + 2)
    end = text.find(">")
    return None if end < 0 else (text[:end], end + 1)
