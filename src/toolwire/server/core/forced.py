"""The output of a forced turn: calls (and reasoning) only, each call whole or cut.

A turn is forced when `tool_choice` is `required` or names a tool and the engine
applies the structural tag: the grammar lets the model write reasoning and calls, no
content. The parser's rule for a held call that cannot be completed is to release it
as content (DESIGN.md, invariant 4), which is right where prose was allowed; here the
server knows none was, so that text would be tool markup shown as an answer. Instead:

* the turn's parser streams arguments (`Parser(stream_arguments=True)`), so a call
  is a call from the moment its declared name is known, and a call cut by the token
  limit or an engine failure ends as a cut call (`ToolCallEnd(valid=False)`) with the
  arguments written so far;
* `ForcedOutput` holds each call's events until the call ends and releases them
  together, so a client sees whole calls, as in any held turn (unless the server
  streams arguments, `--stream-tool-arguments`: then events pass as they come);
* content is dropped: in a forced turn it can only be markup the parser gave back
  (a call cut before its name was complete, or one the grammar did not shape). The
  parser counts it as a released call (`toolwire_parse_fallbacks_total`).

Data flow::

    parser events --ForcedOutput.feed()--> reasoning as it comes; each call's
                                           Begin, Arguments*, End released at its End;
                                           content dropped

Each API then reports a cut call in its own shape: Chat Completions lists it in
`invalid_tool_calls` with `finish_reason: "length"`, Responses marks its item
`incomplete` (the response `incomplete`, `incomplete_details.reason:
"max_output_tokens"`), Messages returns its `tool_use` block with `stop_reason:
"max_tokens"`. None of them shows it as text.
"""

from __future__ import annotations

from collections.abc import Iterable

from toolwire.events import Content, Event, ToolCallBegin, ToolCallEnd

__all__ = ["ForcedOutput"]


class ForcedOutput:
    """Filters one forced turn's events: content dropped, calls held until they end."""

    __slots__ = ("_held", "_hold", "dropped")

    def __init__(self, *, hold: bool = True) -> None:
        self._hold = hold
        self._held: list[Event] = []
        #: Characters of content dropped (markup the parser released).
        self.dropped = 0

    def feed(self, events: Iterable[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if isinstance(event, Content):
                self.dropped += len(event.text)
            elif self._held or (self._hold and isinstance(event, ToolCallBegin)):
                self._held.append(event)
                if isinstance(event, ToolCallEnd):
                    out += self._held
                    self._held = []
            else:
                out.append(event)
        return out

    def flush(self) -> list[Event]:
        """End of output: what is still held (a call the parser did not end; it ends
        every call it began when it finishes, so this is empty after `finish()`)."""
        held, self._held = self._held, []
        return held
