"""The one place events become OpenAI Chat Completions objects.

Data flow::

    parser events (one choice) --ChunkWriter.chunks()--> `chat.completion.chunk` dicts
    all events of a choice     --completion()---------> one `chat.completion` dict

Mapping, per event: `Content` -> `delta.content`; `Reasoning` -> `delta.reasoning_content`;
`ToolCallBegin` -> a `tool_calls` delta with `index`, `id`, `type` and the name (arguments
""); `ToolCallArguments` -> a `tool_calls` delta with `index` and an argument fragment;
`ToolCallEnd` -> nothing (OpenAI has no such delta). The first chunk carries the role;
the last carries `finish_reason`; with `include_usage`, a final chunk with no choices
carries `usage`. With `n` > 1 each choice has its writer (its `index`), and the chunks
of the choices interleave as their engine output comes.

With `logprobs`, each returned token's entry (`token` and `bytes` are the id's text as
the parser read it; `top_logprobs` the best alternatives; special tokens, which never
reach the answer, have none) rides on the first chunk sent after its id was fed to the
parser: the ids of a held call arrive with the call's chunk. Joined, the streamed
entries are the whole response's `logprobs.content`, every returned token in order
(reasoning and call tokens included, as vLLM's).

A streamed call (`stream_arguments=True`) whose arguments turned out cut or malformed
ends with `ToolCallEnd(valid=False)`; its fragments were already sent. The choice that
carries `finish_reason` then lists those calls' indexes in `invalid_tool_calls` (a
toolwire extension, absent when every call is valid), streamed and not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
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
from toolwire.server.core.pipeline import Chosen

__all__ = ["Answer", "ChunkWriter", "choice", "completion", "logprob_entries", "usage"]


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


def _token(text: str, logprob: float) -> dict[str, Any]:
    return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}


def logprob_entries(chosen: Iterable[Chosen]) -> list[dict[str, Any]]:
    """OpenAI's `logprobs.content` entries: token, logprob, bytes, top_logprobs."""
    return [
        {**_token(c.text, c.logprob), "top_logprobs": [_token(t, p) for t, p in c.top]}
        for c in chosen
    ]


class ChunkWriter:
    """Builds the chunks of one streamed choice (`index`) of a completion."""

    def __init__(
        self,
        completion_id: str,
        model: str,
        created: int,
        *,
        index: int = 0,
        logprobs: bool = False,
    ) -> None:
        self._base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }
        self._index = index
        self._invalid: list[int] = []
        #: Whether chunks carry `logprobs.content`; the entries not yet sent (the ids of
        #: a held call come before its chunk).
        self._logprobs = logprobs
        self._pending: list[Chosen] = []

    def _chunk(self, delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        logprobs = None
        if self._logprobs and self._pending:
            logprobs = {"content": logprob_entries(self._pending)}
            self._pending = []
        choice = {"index": self._index, "delta": delta, "logprobs": logprobs}
        choice["finish_reason"] = reason
        return {**self._base, "choices": [choice]}

    def role(self) -> dict[str, Any]:
        """The first chunk: the assistant role, empty content."""
        return self._chunk({"role": "assistant", "content": ""})

    def chunks(
        self, events: Iterable[Event], logprobs: Iterable[Chosen] = ()
    ) -> list[dict[str, Any]]:
        """One chunk per merged event (adjacent events of one kind are joined); the
        first carries the log probabilities of the ids fed since the last chunk."""
        self._pending += logprobs
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


@dataclass(frozen=True)
class Answer:
    """One finished choice: its events, why it ended, its log probabilities (None: not
    asked)."""

    events: list[Event]
    reason: str
    logprobs: list[Chosen] | None = None


def choice(index: int, answer: Answer) -> dict[str, Any]:
    """One choice of the non-streaming response: its events assembled into a message."""
    parsed = Message.from_events(answer.events)
    logprobs = None
    if answer.logprobs is not None:
        logprobs = {"content": logprob_entries(answer.logprobs)}
    out: dict[str, Any] = {
        "index": index,
        "message": parsed.to_openai(),
        "logprobs": logprobs,
        "finish_reason": answer.reason,
    }
    invalid = [i for i, call in enumerate(parsed.tool_calls) if not call.valid]
    if invalid:
        out["invalid_tool_calls"] = invalid
    return out


def completion(
    completion_id: str,
    model: str,
    created: int,
    answers: list[Answer],
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    """The non-streaming response: one choice per answer."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice(i, answer) for i, answer in enumerate(answers)],
        "usage": usage(prompt_tokens, completion_tokens),
    }
