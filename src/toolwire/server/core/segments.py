"""Parser events as a sequence of segments: what the agent APIs call items and blocks.

The Responses API (output items) and the Messages API (content blocks) both present one
assistant turn as an ordered list of parts, each opened, grown and closed: reasoning,
text, and tool calls. This module is the API-neutral step between the parser's events
and those parts; each API's module names them in its own vocabulary.

Data flow::

    events --Segmenter.feed()/finish()--> Opened(kind, call) | Grew(text) | Closed
    events --assemble()-----------------> [Segment(kind, text, call)]  (the same, whole)

Rules (one table, applied per merged event):

* `Reasoning` grows an open reasoning segment, else closes what is open and opens one;
  `Content` does the same with a text segment.
* `ToolCallBegin` closes what is open and opens a call segment (with the call's id and
  name); `ToolCallArguments` grows it; `ToolCallEnd` closes it. A held call arrives
  as all three at once: its segment opens only when the parser releases the call.
* `finish()` closes what is still open (a call cut off while its arguments streamed).

Every opened segment is closed exactly once, and a segment's growths concatenate to
its whole text, so streaming and non-streaming agree by construction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from toolwire.events import (
    Content,
    Event,
    Reasoning,
    ToolCallArguments,
    ToolCallBegin,
    ToolCallEnd,
    merge,
)

__all__ = ["Closed", "Grew", "Kind", "Opened", "Segment", "SegmentEvent", "Segmenter", "assemble"]

Kind: TypeAlias = Literal["reasoning", "text", "call"]


@dataclass(frozen=True, slots=True)
class Opened:
    """A segment starts."""

    kind: Kind
    #: The call's begin event (id, name) for a call segment, else None.
    call: ToolCallBegin | None = None


@dataclass(frozen=True, slots=True)
class Grew:
    """Text appended to the open segment (argument text for a call); never empty."""

    text: str


@dataclass(frozen=True, slots=True)
class Closed:
    """The open segment ends."""


SegmentEvent: TypeAlias = Opened | Grew | Closed


@dataclass(frozen=True)
class Segment:
    """One whole segment of a finished turn."""

    kind: Kind
    text: str
    call: ToolCallBegin | None = None


class Segmenter:
    """Turns a turn's events, in any chunking, into segment events."""

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: Kind | None = None

    @property
    def open(self) -> Kind | None:
        """The kind of the segment that is open, if any."""
        return self._open

    def feed(self, events: Iterable[Event]) -> list[SegmentEvent]:
        out: list[SegmentEvent] = []
        for event in merge(list(events)):
            if isinstance(event, Reasoning | Content):
                kind: Kind = "reasoning" if isinstance(event, Reasoning) else "text"
                if self._open != kind:
                    out += self.finish()
                    out.append(Opened(kind))
                    self._open = kind
                out.append(Grew(event.text))
            elif isinstance(event, ToolCallBegin):
                out += self.finish()
                out.append(Opened("call", event))
                self._open = "call"
            elif isinstance(event, ToolCallArguments):
                if self._open == "call":
                    out.append(Grew(event.text))
            elif isinstance(event, ToolCallEnd) and self._open == "call":
                out += self.finish()
        return out

    def finish(self) -> list[SegmentEvent]:
        """Close the open segment, if any."""
        if self._open is None:
            return []
        self._open = None
        return [Closed()]


def assemble(events: Iterable[Event]) -> list[Segment]:
    """The whole segments of a finished turn, in order."""
    segmenter = Segmenter()
    out: list[Segment] = []
    for item in [*segmenter.feed(events), *segmenter.finish()]:
        if isinstance(item, Opened):
            out.append(Segment(item.kind, "", item.call))
        elif isinstance(item, Grew):
            last = out[-1]
            out[-1] = Segment(last.kind, last.text + item.text, last.call)
    return out
