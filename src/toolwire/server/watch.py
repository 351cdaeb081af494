"""Counting what the parser neutralized: calls released as content, echoed delimiters.

Neither changes the output; both are worth a metric. Data flow, per choice::

    engine ids --ids()-----> genuine call-opening ids (gated formats)
    events     --events()--> calls returned; call-opening text seen in text events

* Parse fallbacks. Gated: every genuine opening id becomes a call or is released as
  content, so fallbacks = opening ids - calls. Ungated: the opening text always opens a
  call, so each occurrence that reaches content is a released call.
* Echoes (gated only). The opening delimiter spelled from ordinary ids is text: each
  occurrence in content, reasoning or arguments, beyond those released calls brought
  back, is an injected call that did not happen.

A tail shorter than the delimiter is kept, so text split across events counts once.
With `tool_choice="none"` tool markup is consumed by design: nothing is counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from toolwire.events import Content, Event, Reasoning, ToolCallArguments, ToolCallBegin

__all__ = ["CallWatch"]


class CallWatch:
    """Per-choice counters of parse fallbacks and neutralized echoes."""

    __slots__ = ("_calls", "_id", "_opened", "_seen", "_tail", "_text", "enabled", "gated")

    def __init__(self, opener: str, opener_id: int | None, *, enabled: bool = True) -> None:
        self._text = opener
        self._id = opener_id
        self.gated = opener_id is not None
        self.enabled = enabled and bool(opener)
        self._opened = 0
        self._calls = 0
        self._seen = 0
        self._tail = ""

    def ids(self, ids: Sequence[int]) -> None:
        if self.enabled and self.gated:
            self._opened += ids.count(self._id)

    def events(self, events: Iterable[Event]) -> None:
        if not self.enabled:
            return
        opener = self._text
        for event in events:
            if isinstance(event, ToolCallBegin):
                self._calls += 1
                continue
            if not self.gated and not isinstance(event, Content):
                continue
            if not isinstance(event, Content | Reasoning | ToolCallArguments):
                continue
            text = self._tail + event.text
            start = max(0, len(self._tail) - len(opener) + 1)
            self._seen += text.count(opener, start)
            self._tail = text[-(len(opener) - 1) :] if len(opener) > 1 else ""

    @property
    def fallbacks(self) -> int:
        """Calls released as content."""
        if self.gated:
            return max(0, self._opened - self._calls)
        return self._seen

    @property
    def echoes(self) -> int:
        """Opening delimiters spelled as text and kept as text (gated formats)."""
        return max(0, self._seen - self.fallbacks) if self.gated else 0
