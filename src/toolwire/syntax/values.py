"""Typing text values by the declared schema, for formats whose arguments are text.

XML-parameter formats write every value as raw text. The declared JSON type decides
what it becomes: a `string` parameter stays a string even when it looks like a
number; numbers, booleans, objects and arrays are parsed (JSON first, then a Python
literal, which models often write); `null` is null for any type but string, and for
a string too where the schema allows null (`nullable`); anything that does not parse
stays a string.
"""

from __future__ import annotations

import ast
import json
import warnings
from json.encoder import encode_basestring
from typing import Any

from toolwire.nesting import json_too_deep

__all__ = ["as_json", "literal", "quote_fragment"]


def quote_fragment(text: str) -> str:
    """JSON string-escape a fragment; fragments escape independently of each other."""
    return encode_basestring(text)[1:-1]  # what json.dumps(text, ensure_ascii=False) does


def _parse(text: str) -> tuple[bool, Any]:
    if json_too_deep(text):  # what does not parse stays a string, at any depth
        return False, None
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return True, literal(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return False, None


_JSON_NAMES: dict[str, Any] = {"null": None, "true": True, "false": False}


class _JsonNames(ast.NodeTransformer):
    """JSON's `null`, `true` and `false`, written as bare names, as Python's constants."""

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in _JSON_NAMES:
            return ast.copy_location(ast.Constant(_JSON_NAMES[node.id]), node)
        return node


def literal(source: str, *, json_names: bool = False) -> Any:
    """`ast.literal_eval` without its warnings: model text such as `"a\\E"` makes
    Python warn about an invalid escape, which would print from a sans-I/O core.
    `json_names`: `null`, `true` and `false` are read as JSON's, at any depth (models
    that write JSON literals in Python calls: OLMo 3)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not json_names:
            return ast.literal_eval(source)
        tree = ast.parse(source.strip(" \t"), mode="eval")
        return ast.literal_eval(_JsonNames().visit(tree))


def as_json(text: str, kind: str | None, nullable: bool = False) -> str:
    """The JSON text for a raw value of the given schema type (`nullable`: the schema
    also allows null, so `null` is null whatever the type)."""
    stripped = text.strip()
    if nullable and stripped == "null":
        return "null"
    if kind == "string":
        return json.dumps(text, ensure_ascii=False)
    if stripped == "null" and kind is not None:  # an optional parameter given no value
        return "null"
    if kind in ("integer", "number"):
        ok, value = _parse(stripped)
        if ok and isinstance(value, (int, float)) and not isinstance(value, bool):
            return stripped if _is_json(stripped) else json.dumps(value)
    elif kind == "boolean":
        if stripped.lower() in ("true", "false"):
            return stripped.lower()
    elif kind == "null":
        if stripped.lower() in ("null", "none"):
            return "null"
    elif kind in ("object", "array", "any", None):
        ok, value = _parse(stripped)
        wanted: type | tuple[type, ...] = object
        if kind == "object":
            wanted = dict
        elif kind == "array":
            wanted = (list, tuple)
        if ok and isinstance(value, wanted) and (kind is not None or not isinstance(value, str)):
            if _is_json(stripped):
                return stripped
            try:
                return json.dumps(value, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError):
                pass
    return json.dumps(text, ensure_ascii=False)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True
