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

#: What the depth scan stops at: a bracket, or a quote that opens a string.
_JSON_STRUCT = re.compile(r'["{}\[\]]')
#: What ends a string's run of plain characters: its closing quote or an escape.
_STRING_END = re.compile(r'["\\]')


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
    depth, pos, size = 0, 0, len(text)
    while True:
        match = _JSON_STRUCT.search(text, pos)
        if match is None:
            return False
        pos = match.end()
        char = match.group()
        if char == '"':
            pos = _skip_string(text, pos)
        elif char in "{[":
            depth += 1
            if depth > limit:
                return True
        else:
            depth = max(0, depth - 1)
        if pos >= size:
            return False


def _skip_string(text: str, pos: int) -> int:
    """The index just past the string whose body starts at `pos` (or the text's end).

    One C search per plain run: a single regex over the whole string literal would
    hold backtracking state for every character (memory ~140x the string)."""
    while True:
        match = _STRING_END.search(text, pos)
        if match is None:
            return len(text)
        if match.group() == '"':
            return match.end()
        pos = match.end() + 1  # the escaped character, whatever it is
