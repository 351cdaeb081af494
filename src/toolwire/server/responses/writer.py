"""The one place events become OpenAI Responses objects: stream events and the response.

Data flow::

    parser events --Segmenter--> segments --ResponseWriter.feed()--> stream event dicts
    end of output --ResponseWriter.finish()--> the last events; `.response` is final

Non-streaming runs the same writer over all events and returns its final `response`,
so a streamed response and a whole one are the same object by construction.

Mapping, per segment (see `segments`):

- reasoning -> a `reasoning` item (`rs_...`) whose one content part is `reasoning_text`:
  `output_item.added`, `content_part.added`, `reasoning_text.delta`*,
  `reasoning_text.done`, `content_part.done`, `output_item.done`;
- text -> a `message` item (`msg_...`, role assistant) with one `output_text` part:
  the same sequence with `output_text.delta` / `.done`;
- call -> a `function_call` item (`fc_...`; `call_id` is the parser's call id, `name`,
  `arguments`): `output_item.added` (arguments ""), `function_call_arguments.delta`*,
  `function_call_arguments.done`, `output_item.done`. A held call's item is added
  when the parser releases the call, whole. A call cut off while its arguments
  streamed (`--stream-tool-arguments`) is marked `incomplete`. A call to a namespace's
  member carries the member's own `name` and its `namespace`, as the client declared.

The stream opens with `response.created` and `response.in_progress` and ends with one
of `response.completed`, `response.incomplete` (`max_output_tokens`; the item open at
the cut is marked incomplete) or `response.failed` (the engine failed mid-stream; what
it produced is kept). Every event carries `sequence_number`, from 0, consecutive.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from toolwire.events import Event
from toolwire.server.core.segments import Closed, Grew, Opened, Segmenter
from toolwire.server.responses.request import ResponsesRequest

__all__ = ["ResponseWriter", "new_id", "output_items"]


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _choice(choice: Any) -> Any:
    """The neutral tool_choice as the Responses API writes it (a name at the top)."""
    if isinstance(choice, Mapping):
        return {"type": "function", "name": choice["function"]["name"]}
    return choice


def _complete(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False


class ResponseWriter:
    """Builds one response, streamed or whole, from the events of one turn."""

    def __init__(
        self, request: ResponsesRequest, response_id: str, model: str, created_at: int
    ) -> None:
        self._request = request
        self._segmenter = Segmenter()
        self._sequence = 0
        self._item: dict[str, Any] | None = None
        self._text: list[str] = []
        self.output: list[dict[str, Any]] = []
        self.response: dict[str, Any] = {
            "id": response_id,
            "object": "response",
            "created_at": created_at,
            "status": "in_progress",
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": request.instructions,
            "max_output_tokens": request.max_output_tokens,
            "max_tool_calls": None,
            "model": model,
            "output": [],
            "parallel_tool_calls": request.parallel_tool_calls,
            "previous_response_id": request.previous_response_id,
            "reasoning": {"effort": request.effort, "summary": request.summary},
            "service_tier": "default",
            "store": request.store,
            "temperature": 1.0 if request.temperature is None else request.temperature,
            "text": request.text,
            "tool_choice": _choice(request.tool_choice),
            "tools": [{"type": "function", **tool["function"]} for tool in request.tools],
            "top_p": 1.0 if request.top_p is None else request.top_p,
            "truncation": "disabled",
            "usage": None,
            "user": None,
            "metadata": request.metadata,
        }

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _snapshot(self) -> dict[str, Any]:
        return {**self.response, "output": list(self.output)}

    def start(self) -> list[dict[str, Any]]:
        """`response.created` and `response.in_progress`."""
        return [
            self._event("response.created", response=self._snapshot()),
            self._event("response.in_progress", response=self._snapshot()),
        ]

    def feed(self, events: Iterable[Event]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for item in self._segmenter.feed(events):
            if isinstance(item, Opened):
                out += self._open(item)
            elif isinstance(item, Grew):
                out += self._grow(item.text)
            elif isinstance(item, Closed):
                out += self._close("completed")
        return out

    def _where(self) -> dict[str, Any]:
        assert self._item is not None
        return {"item_id": self._item["id"], "output_index": len(self.output)}

    def _open(self, opened: Opened) -> list[dict[str, Any]]:
        self._text = []
        if opened.kind == "call":
            call = opened.call
            assert call is not None
            self._item = {
                "id": new_id("fc"),
                "type": "function_call",
                "status": "in_progress",
                "call_id": call.id,
                "name": call.name,
                "arguments": "",
            }
            if call.name in self._request.namespaced:  # the name the client declared
                namespace, name = self._request.namespaced[call.name]
                self._item.update(name=name, namespace=namespace)
            return [
                self._event(
                    "response.output_item.added",
                    output_index=len(self.output),
                    item=dict(self._item),
                )
            ]
        if opened.kind == "text":
            self._item = {
                "id": new_id("msg"),
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        else:
            self._item = {
                "id": new_id("rs"),
                "type": "reasoning",
                "status": "in_progress",
                "summary": [],
                "content": [],
            }
            part = {"type": "reasoning_text", "text": ""}
        return [
            self._event(
                "response.output_item.added", output_index=len(self.output), item=dict(self._item)
            ),
            self._event("response.content_part.added", **self._where(), content_index=0, part=part),
        ]

    def _grow(self, text: str) -> list[dict[str, Any]]:
        assert self._item is not None
        self._text.append(text)
        kind = self._item["type"]
        if kind == "function_call":
            return [
                self._event("response.function_call_arguments.delta", **self._where(), delta=text)
            ]
        if kind == "message":
            return [
                self._event(
                    "response.output_text.delta",
                    **self._where(),
                    content_index=0,
                    delta=text,
                    logprobs=[],
                )
            ]
        return [
            self._event(
                "response.reasoning_text.delta", **self._where(), content_index=0, delta=text
            )
        ]

    def _close(self, status: str) -> list[dict[str, Any]]:
        item = self._item
        assert item is not None
        text = "".join(self._text)
        out: list[dict[str, Any]] = []
        where = self._where()
        if item["type"] == "function_call":
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    **where,
                    name=item["name"],
                    arguments=text,
                )
            )
            if not _complete(text):  # a call cut while its arguments streamed
                status = "incomplete"
            done = {**item, "status": status, "arguments": text}
        else:
            if item["type"] == "message":
                part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
                out.append(
                    self._event(
                        "response.output_text.done",
                        **where,
                        content_index=0,
                        text=text,
                        logprobs=[],
                    )
                )
            else:
                part = {"type": "reasoning_text", "text": text}
                out.append(
                    self._event("response.reasoning_text.done", **where, content_index=0, text=text)
                )
            out.append(
                self._event("response.content_part.done", **where, content_index=0, part=part)
            )
            done = {**item, "status": status, "content": [part]}
            if item["type"] == "reasoning" and self._request.include_reasoning:
                done["encrypted_content"] = text  # plain text: it only round-trips here
        out.append(
            self._event("response.output_item.done", output_index=len(self.output), item=done)
        )
        self.output.append(done)
        self._item = None
        return out

    def finish(
        self, finish_reason: str, prompt_tokens: int, completion_tokens: int
    ) -> list[dict[str, Any]]:
        """End of output: close what is open; `response.completed` or `.incomplete`."""
        incomplete = finish_reason == "length"
        out: list[dict[str, Any]] = []
        if self._segmenter.finish():
            out += self._close("incomplete" if incomplete else "completed")
        self.response["status"] = "incomplete" if incomplete else "completed"
        if incomplete:
            self.response["incomplete_details"] = {"reason": "max_output_tokens"}
        self.response["usage"] = _usage(prompt_tokens, completion_tokens)
        self.response = self._snapshot()
        kind = "response.incomplete" if incomplete else "response.completed"
        out.append(self._event(kind, response=self.response))
        return out

    def fail(
        self, message: str, code: str, prompt_tokens: int, completion_tokens: int
    ) -> list[dict[str, Any]]:
        """The engine failed mid-stream: close what is open, then `response.failed`."""
        out: list[dict[str, Any]] = []
        if self._segmenter.finish():
            out += self._close("incomplete")
        self.response["status"] = "failed"
        self.response["error"] = {"code": code, "message": message}
        self.response["usage"] = _usage(prompt_tokens, completion_tokens)
        self.response = self._snapshot()
        out.append(self._event("response.failed", response=self.response))
        return out


def output_items(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A response's output as normalized input items, for the next turn's history."""
    items: list[dict[str, Any]] = []
    for item in output:
        if item["type"] == "message":
            text = "".join(part["text"] for part in item["content"])
            items.append({"type": "message", "role": "assistant", "content": text})
        elif item["type"] == "reasoning":
            text = "".join(part["text"] for part in item["content"])
            items.append({"type": "reasoning", "text": text})
        else:
            call = {
                "type": "function_call",
                "call_id": item["call_id"],
                "name": item["name"],
                "arguments": item["arguments"],
            }
            if "namespace" in item:
                call["namespace"] = item["namespace"]
            items.append(call)
    return items
