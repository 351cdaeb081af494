"""How deep data may nest: one fixed limit, checked iteratively.

Recursive code (`copy.deepcopy`, json's C codec, Jinja, schema walks) fails with a
`RecursionError` at a depth that depends on how deep the caller's stack already is, so
the same input could pass in one place and crash in another. toolwire checks nesting
itself, without recursion, against one fixed limit, before any recursive code runs:

* request data (messages, tools, template kwargs) nested deeper is a `PromptError`;
* a tool schema nested deeper gets no schema constraint in the structural tag (a
  reason says so);
* model output whose arguments nest deeper is a call that cannot be completed:
  content, or `MalformedOutput` when strict.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_DEPTH", "data_too_deep", "json_too_deep"]

#: The deepest nesting of lists and objects toolwire accepts anywhere.
MAX_DEPTH = 100

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[{}\[\]]', re.S)


def data_too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when `value` (dicts, lists, tuples) nests more than `limit` levels deep."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend(
            (child, depth + 1) for child in children if isinstance(child, dict | list | tuple)
        )
    return False


def json_too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """True when the JSON (or Python literal) `text` opens more than `limit` brackets at once.

    Strings are skipped; the text need not be valid. Linear, and free for the common
    case: a text with at most `limit` opening brackets in all cannot nest deeper.
    """
    if text.count("{") + text.count("[") <= limit:
        return False
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        char = text[match.start()]
        if char in "{[":
            depth += 1
            if depth > limit:
                return True
        elif char in "}]":
            depth = max(0, depth - 1)
    return False
