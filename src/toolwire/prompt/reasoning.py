"""Whether a rendered prompt ends inside an opened reasoning block.

Templates differ: Qwen3 leaves the generation prompt open (the model writes `<think>`
itself) or, with thinking off, writes an empty closed block; DeepSeek V3.1/V3.2 end the
prompt with `<think>` when thinking is on and `</think>` when off. The answer is read
from the rendered text: the prompt is in reasoning when the last opening delimiter comes
after the last closing one. Occurrences inside the request's own text (the ranges
isolation marked) do not count: they are text, not structure.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ends_in_reasoning"]


def ends_in_reasoning(
    text: str, delimiters: tuple[str, str] | None, content: Sequence[tuple[int, int]] = ()
) -> bool:
    """True when `text` ends inside a `delimiters` block the template opened."""
    if delimiters is None:
        return False
    opener, closer = delimiters
    return _last(text, opener, content) > _last(text, closer, content)


def _last(text: str, needle: str, content: Sequence[tuple[int, int]]) -> int:
    """Start of the last occurrence of `needle` outside `content` ranges, or -1."""
    end = len(text)
    while True:
        at = text.rfind(needle, 0, end)
        if at < 0:
            return -1
        stop = at + len(needle)
        if not any(start < stop and at < finish for start, finish in content):
            return at
        end = stop - 1
