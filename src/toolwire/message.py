"""The assistant message assembled from events, and its OpenAI shape."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import UsageError
from toolwire.events import Content, Event, Reasoning, ToolCallArguments, ToolCallBegin, ToolCallEnd

__all__ = ["Message", "ToolCall"]


@dataclass(frozen=True)
class ToolCall:
    """One complete tool call."""

    #: The call's id.
    id: str
    #: The declared tool's name.
    name: str
    #: The arguments as a JSON string (an object), unless `valid` is False.
    arguments: str
    #: False for a streamed call (`stream_arguments=True`) whose arguments were cut off
    #: or malformed: `arguments` is then the text sent so far, not valid JSON.
    valid: bool = True

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class Message:
    """An assistant message: content, reasoning and tool calls."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> Message:
        """Assemble a message; raises `UsageError` when events are out of order."""
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, tuple[str, str, list[str]]] = {}
        invalid: set[int] = set()
        order: list[int] = []
        for event in events:  # (the commonest kinds first: streamed arguments, content)
            if isinstance(event, ToolCallArguments):
                if event.index not in calls:
                    raise UsageError(f"arguments for tool call {event.index} before it began")
                calls[event.index][2].append(event.text)
            elif isinstance(event, Content):
                content.append(event.text)
            elif isinstance(event, Reasoning):
                reasoning.append(event.text)
            elif isinstance(event, ToolCallBegin):
                if event.index in calls:
                    raise UsageError(f"tool call {event.index} begins twice")
                calls[event.index] = (event.id, event.name, [])
                order.append(event.index)
            elif isinstance(event, ToolCallEnd):
                if event.index not in calls:
                    raise UsageError(f"tool call {event.index} ends before it began")
                if not event.valid:
                    invalid.add(event.index)
        tool_calls = [
            ToolCall(calls[i][0], calls[i][1], "".join(calls[i][2]), valid=i not in invalid)
            for i in order
        ]
        return cls(
            content="".join(content) or None,
            reasoning="".join(reasoning) or None,
            tool_calls=tool_calls,
        )

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat completion `message` object."""
        out: dict[str, Any] = {
            "role": "assistant",
            "content": self.content,
            "reasoning_content": self.reasoning,
        }
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return out
