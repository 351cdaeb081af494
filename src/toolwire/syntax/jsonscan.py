"""Incremental scanning of JSON text: where a value ends, without parsing it twice.

`JsonValue.feed(text)` consumes text until the value that started in it is complete
and says where it ended. Strings are skipped with one regex search per chunk, so
scanning costs O(length) however the text is cut.
"""

from __future__ import annotations

import re

__all__ = ["STRING", "JsonValue"]

_STRUCT = re.compile(r'["{}\[\]]')
_STRING_END = re.compile(r'["\\]')
_SCALAR_END = re.compile(r"[\s,}\]]")
#: One complete JSON string literal at the start of a text.
STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
#: Text inside a string that leaves it inside (no bare quote), escapes whole but for
#: a last lone backslash (group 1), whose escaped character the next text begins with.
_STRING_PART = re.compile(r'(?:[^"\\]|\\.)*(\\?)', re.S).fullmatch


class JsonValue:
    """Tracks one JSON value across chunks. `done` once it is complete."""

    __slots__ = ("_depth", "_in_string", "_scalar", "done", "escape", "started")

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        #: Inside a string, after a backslash: its escaped character comes next.
        self.escape = False
        self._scalar = False
        self.started = False
        self.done = False

    @property
    def in_text(self) -> bool:
        """Inside a string, an escape pending or not."""
        return self._in_string

    def within(self, text: str) -> bool:
        """Inside a string: consume `text` when the value stays inside it (no bare
        quote; a code token's `\\n`, or the `\\` the next text's `n` ends), as `feed`
        would consume it; else False, nothing consumed. (`PlainStep`'s check.)"""
        if not self._in_string:
            return False
        if self.escape:  # the pending escape's character begins the text
            if not text:
                return True
            match = _STRING_PART(text, 1)
        else:
            match = _STRING_PART(text)
        if match is None:
            return False
        self.escape = match.end(1) > match.start(1)
        return True

    def feed(self, text: str) -> int:
        """Consume text; return the index just past the value's end, or len(text)."""
        pos, size = 0, len(text)
        if not self.started:
            while pos < size and text[pos] in " \t\r\n":
                pos += 1
            if pos == size:
                return size
            self.started = True
            if text[pos] not in '{["':
                self._scalar = True
        if self._scalar:
            match = _SCALAR_END.search(text, pos)
            if match is None:
                return size
            self.done = True
            return match.start()
        while pos < size:
            if self._in_string:
                if self.escape:
                    self.escape = False
                    pos += 1
                    continue
                match = _STRING_END.search(text, pos)
                if match is None:
                    return size
                pos = match.end()
                if match.group() == "\\":
                    self.escape = True
                    continue
                self._in_string = False
                if self._depth == 0:
                    self.done = True
                    return pos
                continue
            match = _STRUCT.search(text, pos)
            if match is None:
                return size
            pos = match.end()
            char = match.group()
            if char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth <= 0:
                    self.done = True
                    return pos
        return size

    def end(self) -> bool:
        """End of text: a scalar ends here; True when the value is complete."""
        if self._scalar and self.started:
            self.done = True
        return self.done
