"""Events: what a parser returns. Small frozen values, one per kind of output.

Delta boundaries carry no meaning: adjacent events of one kind (same call index for
arguments) may be merged, and `merge()` does so. A call's events come in order:
`ToolCallBegin`, any number of `ToolCallArguments`, `ToolCallEnd`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeAlias

__all__ = [
    "Content",
    "Event",
    "Reasoning",
    "ToolCallArguments",
    "ToolCallBegin",
    "ToolCallEnd",
    "merge",
]


@dataclass(frozen=True, slots=True)
class Content:
    """Text for the assistant message's `content`."""

    #: The text, never empty.
    text: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Text for the assistant message's `reasoning_content`."""

    #: The text, never empty.
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallBegin:
    """A tool call starts; its name is known and declared."""

    #: Position of the call among this output's calls, from 0.
    index: int
    #: The call's id (the model's own where the format carries one).
    id: str
    #: The declared tool's name.
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallArguments:
    """A fragment of a call's arguments; fragments concatenate to a JSON object."""

    #: The call this fragment belongs to.
    index: int
    #: The fragment, never empty.
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """The call ended: no more fragments of its arguments follow."""

    #: The call that ended.
    index: int
    #: True when the arguments are a complete, valid JSON object. Always True for a
    #: held call (the default). False only with `stream_arguments=True`, for a call
    #: whose name was already streamed and whose arguments then turned out cut off or
    #: malformed: its fragments stay as sent, and do not form valid JSON.
    valid: bool = True


Event: TypeAlias = Content | Reasoning | ToolCallBegin | ToolCallArguments | ToolCallEnd


def merge(events: list[Event]) -> list[Event]:
    """Merge adjacent events of one kind, so chunk boundaries leave no trace."""
    out: list[Event] = []
    for event in events:
        last = out[-1] if out else None
        if isinstance(event, Content) and isinstance(last, Content):
            out[-1] = Content(last.text + event.text)
        elif isinstance(event, Reasoning) and isinstance(last, Reasoning):
            out[-1] = Reasoning(last.text + event.text)
        elif (
            isinstance(event, ToolCallArguments)
            and isinstance(last, ToolCallArguments)
            and last.index == event.index
        ):
            out[-1] = replace(last, text=last.text + event.text)
        else:
            out.append(event)
    return out
