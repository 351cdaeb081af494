"""The one place events become OpenAI Chat Completions objects.

Data flow::

    parser events (one choice) --ChunkWriter.chunks()--> `chat.completion.chunk` dicts
    all events of a choice     --completion()---------> one `chat.completion` dict

Mapping, per event: `Content` -> `delta.content`; `Reasoning` -> `delta.reasoning_content`;
`ToolCallBegin` -> a `tool_calls` delta with `index`, `id`, `type` and the name (arguments
""); `ToolCallArguments` -> a `tool_calls` delta with `index` and an argument fragment;
`ToolCallEnd` -> nothing (OpenAI has no such delta). The first chunk carries the role;
the last carries `finish_reason`; with `include_usage`, a final chunk with no choices
carries `usage`.

A streamed call (`stream_arguments=True`) whose arguments turned out cut or malformed
ends with `ToolCallEnd(valid=False)`; its fragments were already sent. The choice that
carries `finish_reason` then lists those calls' indexes in `invalid_tool_calls` (a
toolwire extension, absent when every call is valid), streamed and not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolwire.events import (
    Content,
    Event,
    Reasoning,
    ToolCallArguments,
    ToolCallBegin,
    ToolCallEnd,
    merge,
)
from toolwire.message import Message

__all__ = ["ChunkWriter", "completion", "usage"]


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _delta(event: Event) -> dict[str, Any] | None:
    if isinstance(event, Content):
        return {"content": event.text}
    if isinstance(event, Reasoning):
        return {"reasoning_content": event.text}
    if isinstance(event, ToolCallBegin):
        call = {
            "index": event.index,
            "id": event.id,
            "type": "function",
            "function": {"name": event.name, "arguments": ""},
        }
        return {"tool_calls": [call]}
    if isinstance(event, ToolCallArguments):
        return {"tool_calls": [{"index": event.index, "function": {"arguments": event.text}}]}
    return None  # ToolCallEnd


class ChunkWriter:
    """Builds the chunks of one streamed completion (one choice, index 0)."""

    def __init__(self, completion_id: str, model: str, created: int) -> None:
        self._base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }
        self._invalid: list[int] = []

    def _chunk(self, delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        return {**self._base, "choices": [choice]}

    def role(self) -> dict[str, Any]:
        """The first chunk: the assistant role, empty content."""
        return self._chunk({"role": "assistant", "content": ""})

    def chunks(self, events: Iterable[Event]) -> list[dict[str, Any]]:
        """One chunk per merged event (adjacent events of one kind are joined)."""
        out = []
        for event in merge(list(events)):
            if isinstance(event, ToolCallEnd) and not event.valid:
                self._invalid.append(event.index)
            delta = _delta(event)
            if delta is not None:
                out.append(self._chunk(delta))
        return out

    def finish(self, reason: str) -> dict[str, Any]:
        chunk = self._chunk({}, reason)
        if self._invalid:
            chunk["choices"][0]["invalid_tool_calls"] = list(self._invalid)
        return chunk

    def usage(self, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        return {**self._base, "choices": [], "usage": usage(prompt_tokens, completion_tokens)}


def completion(
    completion_id: str,
    model: str,
    created: int,
    events: Iterable[Event],
    reason: str,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    """The non-streaming response: the events assembled into one message."""
    parsed = Message.from_events(events)
    choice: dict[str, Any] = {
        "index": 0,
        "message": parsed.to_openai(),
        "logprobs": None,
        "finish_reason": reason,
    }
    invalid = [i for i, call in enumerate(parsed.tool_calls) if not call.valid]
    if invalid:
        choice["invalid_tool_calls"] = invalid
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage(prompt_tokens, completion_tokens),
    }
