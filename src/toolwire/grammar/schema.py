"""Schema normalization: a tool's `parameters` made safe to compile and to validate.

Data flow: a tool's declared `parameters` (OpenAI JSON Schema or BFCL-typed) ->
`normalize()` -> (a JSON Schema object, reasons). The result is a new object; the
caller's schema is never mutated. Rules:

* no `parameters` (or not an object) -> the empty object schema `{"type": "object",
  "properties": {}}`;
* BFCL type names map to JSON Schema (`dict` -> object, `float` -> number, `tuple` ->
  array, `any` -> no type constraint; also `int`, `bool`, `str`, `list`);
* a keyword whose value has the wrong shape (`"type": [{...}]`, `"required": 5`,
  `"enum": 5`, a property schema that is not an object) is dropped, and a schema
  nested deeper than `nesting.MAX_DEPTH` becomes any JSON object, each with a reason,
  so no schema a request can send makes building the tag fail;
* look-around in a `pattern` (`(?=`, `(?!`, `(?<=`, `(?<!`) is removed, which only
  widens the language (look-around only ever restricts). XGrammar versions either
  reject the whole tag or silently drop the constraint; removing it here makes the
  outcome the same everywhere, and each removal is recorded as a reason.

Every reason is a short string for the caller to log and count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolwire.nesting import MAX_DEPTH, data_too_deep
from toolwire.tools import TYPE_ALIASES

__all__ = ["EMPTY_OBJECT", "normalize", "sort_properties", "strip_lookaround"]

#: The schema of a tool that declares no parameters.
EMPTY_OBJECT: Mapping[str, Any] = {"type": "object", "properties": {}}

#: Keywords whose value is one schema.
_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")
#: Keywords whose value is a list of schemas.
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
#: Keywords whose value maps names to schemas.
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
#: Keywords whose value is a count, and whose value is a number.
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def normalize(parameters: Any, where: str = "parameters") -> tuple[dict[str, Any], list[str]]:
    """The compilable JSON Schema for a tool's `parameters`, and why it differs."""
    reasons: list[str] = []
    if not isinstance(parameters, Mapping) or not parameters:
        return dict(EMPTY_OBJECT), ([] if parameters is None else [f"{where}: not an object"])
    if data_too_deep(parameters):  # walks and compilers recurse: take any JSON object
        return {"type": "object"}, [f"{where}: nested deeper than {MAX_DEPTH} levels; relaxed"]
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
            elif not isinstance(value, str | list) or not all(isinstance(v, str) for v in value):
                reasons.append(f"{where}: 'type' {value!r} is not a JSON Schema type; dropped")
        elif key == "pattern" and isinstance(value, str):
            stripped = strip_lookaround(value)
            if stripped != value:
                reasons.append(f"{where}: look-around removed from pattern {value!r}")
            if stripped:
                out["pattern"] = stripped
        elif key in _ONE and isinstance(value, Mapping):
            out[key] = _walk(value, f"{where}.{key}", reasons)
        elif key in _MANY and isinstance(value, list):
            out[key] = [_sub(v, f"{where}.{key}[{i}]", reasons) for i, v in enumerate(value)]
        elif key == "items" and isinstance(value, list):  # draft-4 tuple items
            out["prefixItems"] = [
                _sub(v, f"{where}.items[{i}]", reasons) for i, v in enumerate(value)
            ]
        elif key in _NAMED and isinstance(value, Mapping):
            out[key] = {
                name: _sub(v, f"{where}.{name}", reasons)
                for name, v in value.items()
                if isinstance(name, str)
            }
        elif _well_formed(key, value):
            out[key] = value
        else:
            reasons.append(f"{where}: {key!r} {_short(value)} is malformed; dropped")
    return out


def _sub(value: Any, where: str, reasons: list[str]) -> Any:
    """A subschema: an object walked, a boolean schema kept, anything else any value."""
    if isinstance(value, Mapping):
        return _walk(value, where, reasons)
    if isinstance(value, bool):
        return value
    reasons.append(f"{where}: {_short(value)} is not a schema; any value allowed")
    return {}


def _well_formed(key: Any, value: Any) -> bool:
    """Whether a keyword's value has the shape JSON Schema gives it (other keys pass)."""
    if key in _ONE:
        return isinstance(value, bool)
    if key in _MANY or key in _NAMED or key == "pattern":
        return False  # the right shapes were taken above
    if key == "required":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if key == "enum":
        return isinstance(value, list)
    if key in _COUNTS:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if key in _BOUNDS:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if key in ("format", "$ref"):
        return isinstance(value, str)
    return True


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _map_type(value: Any) -> Any:
    """A JSON Schema `type` for a declared one; None when any value is allowed."""
    if isinstance(value, str):
        if value == "any":
            return None
        return TYPE_ALIASES.get(value, value)
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            return None  # not a list of type names: no type constraint (see `normalize`)
        mapped = [_map_type(v) for v in value]
        if any(m is None for m in mapped):
            return None
        return list(dict.fromkeys(mapped))
    return None  # not a type name: no type constraint


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
