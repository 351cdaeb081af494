"""Stop strings, matched on what the parser routes to content.

Data flow::

    parser events --StopMatcher.feed()--> events with content cut at the first stop string

Only `Content` text is searched: a stop string can neither cut into a tool call (its
text never reaches content) nor hide one (a delimiter the parser is still deciding is
held by the parser, not here). Content that could be the start of a stop string is held
until the next content decides it; any other event first releases what is held, since
a stop string cannot span structure.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.events import Content, Event
from toolwire.holdback import Holdback

__all__ = ["StopMatcher"]


class StopMatcher:
    """Cuts content at the first stop string; `stopped` turns True when one matched."""

    __slots__ = ("_held", "_holdback", "_stops", "matched", "stopped")

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = [s for s in stops if s]
        self._holdback = Holdback(self._stops)
        self._held = ""
        self.stopped = False
        #: The stop string that matched (the earliest in the text), once one has.
        self.matched: str | None = None

    def feed(self, events: Sequence[Event]) -> list[Event]:
        """Pass events through; after a stop string matches, nothing more passes."""
        if not self._stops:
            return list(events)
        out: list[Event] = []
        for event in events:
            if self.stopped:
                break
            if isinstance(event, Content):
                self._content(self._held + event.text, out)
            else:
                out.extend(self.flush())
                out.append(event)
        return out

    def flush(self) -> list[Event]:
        """End of content (structure, or end of output): release what is held."""
        held, self._held = self._held, ""
        return [Content(held)] if held and not self.stopped else []

    def _content(self, text: str, out: list[Event]) -> None:
        found = [(i, s) for s in self._stops if (i := text.find(s)) >= 0]
        if found:
            cut, self.matched = min(found, key=lambda hit: hit[0])
            self.stopped = True
            self._held = ""
            if cut:
                out.append(Content(text[:cut]))
            return
        keep = self._holdback.tail(text)
        self._held = text[len(text) - keep :]
        if len(text) > keep:
            out.append(Content(text[: len(text) - keep]))
