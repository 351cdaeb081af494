"""Counting delimiters that a gated parser kept as text (echoes neutralized).

With a gated format, structure comes only from delimiter ids; the same characters
spelled from ordinary ids (a model copying a tool result) are plain text. Seeing such
text in content, reasoning or arguments is worth counting: each is an injected call
that did not happen. The watch keeps a tail shorter than the longest delimiter, so a
delimiter split across events is counted once.
"""

from __future__ import annotations

from collections.abc import Iterable

from toolwire.events import Content, Event, Reasoning, ToolCallArguments

__all__ = ["EchoWatch"]


class EchoWatch:
    """Counts occurrences of delimiter text in the text events of one output."""

    __slots__ = ("_delimiters", "_keep", "_tail", "count")

    def __init__(self, delimiters: Iterable[str]) -> None:
        self._delimiters = sorted({d for d in delimiters if d.strip()}, key=len, reverse=True)
        self._keep = max((len(d) for d in self._delimiters), default=1) - 1
        self._tail = ""
        self.count = 0

    def observe(self, events: Iterable[Event]) -> None:
        if not self._delimiters:
            return
        for event in events:
            if not isinstance(event, Content | Reasoning | ToolCallArguments):
                continue
            text = self._tail + event.text
            for delimiter in self._delimiters:
                # only occurrences that end in the new text: the tail's were counted
                start = max(0, len(self._tail) - len(delimiter) + 1)
                self.count += text.count(delimiter, start)
            self._tail = text[-self._keep :] if self._keep else ""
