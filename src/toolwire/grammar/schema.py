"""Schema normalization: a tool's `parameters` made safe to compile and to validate.

Data flow: a tool's declared `parameters` (OpenAI JSON Schema or BFCL-typed) ->
`normalize()` -> (a JSON Schema object, reasons). The result is a new object; the
caller's schema is never mutated. Rules:

* no `parameters` (or not an object) -> the empty object schema `{"type": "object",
  "properties": {}}`;
* BFCL type names map to JSON Schema (`dict` -> object, `float` -> number, `tuple` ->
  array, `any` -> no type constraint; also `int`, `bool`, `str`, `list`);
* look-around in a `pattern` (`(?=`, `(?!`, `(?<=`, `(?<!`) is removed, which only
  widens the language (look-around only ever restricts). XGrammar versions either
  reject the whole tag or silently drop the constraint; removing it here makes the
  outcome the same everywhere, and each removal is recorded as a reason.

Every reason is a short string for the caller to log and count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["EMPTY_OBJECT", "normalize", "sort_properties", "strip_lookaround"]

#: The schema of a tool that declares no parameters.
EMPTY_OBJECT: Mapping[str, Any] = {"type": "object", "properties": {}}

_TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "list": "array",
    "int": "integer",
    "bool": "boolean",
    "str": "string",
}
#: Keywords whose value is one schema.
_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")
#: Keywords whose value is a list of schemas.
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
#: Keywords whose value maps names to schemas.
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def normalize(parameters: Any, where: str = "parameters") -> tuple[dict[str, Any], list[str]]:
    """The compilable JSON Schema for a tool's `parameters`, and why it differs."""
    reasons: list[str] = []
    if not isinstance(parameters, Mapping) or not parameters:
        return dict(EMPTY_OBJECT), ([] if parameters is None else [f"{where}: not an object"])
    out = _walk(parameters, where, reasons)
    if out.get("type") in (None, "object") and "properties" not in out:
        out.setdefault("type", "object")
    return out, reasons


def _walk(schema: Mapping[str, Any], where: str, reasons: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            mapped = _map_type(value)
            if mapped is not None:
                out["type"] = mapped
        elif key == "pattern" and isinstance(value, str):
            stripped = strip_lookaround(value)
            if stripped != value:
                reasons.append(f"{where}: look-around removed from pattern {value!r}")
            if stripped:
                out["pattern"] = stripped
        elif key in _ONE and isinstance(value, Mapping):
            out[key] = _walk(value, f"{where}.{key}", reasons)
        elif key in _MANY and isinstance(value, list):
            out[key] = [
                _walk(v, f"{where}.{key}[{i}]", reasons) if isinstance(v, Mapping) else v
                for i, v in enumerate(value)
            ]
        elif key == "items" and isinstance(value, list):  # draft-4 tuple items
            out["prefixItems"] = [
                _walk(v, f"{where}.items[{i}]", reasons) if isinstance(v, Mapping) else v
                for i, v in enumerate(value)
            ]
        elif key in _NAMED and isinstance(value, Mapping):
            out[key] = {
                name: _walk(v, f"{where}.{name}", reasons) if isinstance(v, Mapping) else v
                for name, v in value.items()
            }
        else:
            out[key] = value
    return out


def _map_type(value: Any) -> Any:
    """A JSON Schema `type` for a declared one; None when any value is allowed."""
    if isinstance(value, str):
        if value == "any":
            return None
        return _TYPES.get(value, value)
    if isinstance(value, list):
        mapped = [_map_type(v) for v in value]
        if any(m is None for m in mapped):
            return None
        return list(dict.fromkeys(mapped))
    return value


def strip_lookaround(pattern: str) -> str:
    """`pattern` without its look-around groups (a superset of what it matched)."""
    out: list[str] = []
    depth_skip = 0  # >0 while inside a removed group: counts open parentheses
    i, size = 0, len(pattern)
    in_class = False
    while i < size:
        char = pattern[i]
        if char == "\\" and i + 1 < size:
            if not depth_skip:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
            if not depth_skip:
                out.append(char)
            i += 1
            continue
        if char == "[":
            in_class = True
        elif char == "(":
            if depth_skip:
                depth_skip += 1
            elif pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), i):
                depth_skip = 1
                i += 1
                continue
        elif char == ")" and depth_skip:
            depth_skip -= 1
            i += 1
            continue
        if not depth_skip:
            out.append(char)
        i += 1
    return "".join(out)


def sort_properties(schema: Any) -> Any:
    """`schema` with every `properties` mapping in key order (formats that sort keys)."""
    if isinstance(schema, Mapping):
        out = {k: sort_properties(v) for k, v in schema.items()}
        props = out.get("properties")
        if isinstance(props, Mapping):
            out["properties"] = dict(sorted(props.items()))
        return out
    if isinstance(schema, list):
        return [sort_properties(v) for v in schema]
    return schema
