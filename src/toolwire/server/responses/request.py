"""Validation of an OpenAI Responses request into the neutral `ChatRequest`.

Data flow::

    body --parse_responses()--> ResponsesRequest: the validated fields (tools and
                                tool_choice in the neutral shapes), and `items` (the
                                request's input as a list of input items)
    history items + items --to_messages()--> chat messages for render_prompt
    ResponsesRequest.chat(history) --> the neutral ChatRequest the turn runs

Input items map to messages as the model's chat template expects them:

- a string `input` is one user message; `instructions` is a system message placed
  first (it is not carried over by `previous_response_id`, as OpenAI specifies);
- `message` items (`input_text` / `output_text` parts, or a string) keep their role
  (`developer` is rendered as `system`; system text at the start, `instructions`
  included, is joined into one system message, as templates expect one);
- consecutive `function_call` items join the assistant message before them as its
  `tool_calls` (`call_id` becomes the call's id);
- `function_call_output` becomes a `tool` message (its `output` a string or text parts);
- a `reasoning` item's text (`content[].text`, else `encrypted_content`, which this
  server fills with the plain reasoning text) becomes the `reasoning_content` of the
  assistant message that follows it.

All of it goes through `render_prompt` with isolation on: delimiter text in a tool's
output or a user's text reaches the model as ordinary sub-word ids.

`text.format` (`json_object`, `json_schema`) becomes the pipeline's `response_format`:
the answer is kept to the schema by the structural tag (the API's field table names
it back `text.format` in errors, and the pipeline's `messages` `input`).

Every rejection is a `FieldError` (a 400) naming the field (`input[2].call_id`,
`tools[0].type`, `max_output_tokens`). Features this server cannot honour (hosted
tools, images and files, background mode) are rejected by name rather than ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolwire.server.core import fields
from toolwire.server.core.errors import FieldError, Path
from toolwire.server.core.request import ChatRequest

__all__ = ["ResponsesRequest", "parse_responses", "to_messages"]

_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})
_SUMMARIES = frozenset({"auto", "concise", "detailed"})
_ROLES = frozenset({"user", "assistant", "system", "developer"})
#: Text part types, and the key of their text.
_TEXT_PARTS = {"input_text": "text", "output_text": "text", "text": "text"}
_ENCRYPTED = "reasoning.encrypted_content"
_PLAIN: dict[str, Any] = {"format": {"type": "text"}}
_TOOLS = fields.ToolFields(
    type="function",
    default_type=None,
    nested=False,
    schema="parameters",
    schema_required=False,
    served="only 'function' tools (hosted tools such as web_search or file_search are "
    "not available here)",
)


@dataclass(frozen=True)
class ResponsesRequest:
    """A validated Responses request; `chat` holds what the pipeline runs."""

    model: str
    items: list[dict[str, Any]]
    instructions: str | None
    #: The declared tools and tool_choice, in the neutral shapes.
    tools: list[dict[str, Any]]
    tool_choice: Any
    parallel_tool_calls: bool
    max_output_tokens: int | None
    temperature: float | None
    top_p: float | None
    effort: str | None
    summary: str | None
    stream: bool
    store: bool
    previous_response_id: str | None
    #: Return reasoning text in `encrypted_content` too (the client asked to include it).
    include_reasoning: bool
    metadata: dict[str, Any] = field(default_factory=dict)
    #: The JSON schema the answer must follow (`text.format`), or None.
    text_format: dict[str, Any] | None = None
    #: The request's `text` object, echoed in the response.
    text: dict[str, Any] = field(default_factory=lambda: dict(_PLAIN))

    def chat(self, history: list[dict[str, Any]]) -> ChatRequest:
        """The neutral request for this turn, after `history` (the stored earlier items)."""
        messages = to_messages([*history, *self.items], self.instructions)
        kwargs: dict[str, Any] = {}
        if self.effort is not None:
            kwargs = {"reasoning_effort": self.effort, "enable_thinking": self.effort != "none"}
        return ChatRequest(
            model=self.model,
            messages=messages,
            tools=self.tools or None,
            tool_choice=self.tool_choice,
            parallel_tool_calls=self.parallel_tool_calls,
            max_tokens=self.max_output_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stream=self.stream,
            template_kwargs=kwargs,
            response_format=self.text_format,
        )


def _item(raw: Any, where: Path) -> dict[str, Any]:
    """One input item, checked and normalized (a role-only message gets its type)."""
    if not isinstance(raw, Mapping):
        raise FieldError(where, "must be an object")
    kind = raw.get("type", "message" if "role" in raw else None)
    if kind == "message":
        role = fields.one_of(raw, "role", _ROLES, where, required=True)
        parts = {**_TEXT_PARTS, "refusal": "refusal"}
        text = fields.content(raw.get("content"), (*where, "content"), parts)
        return {"type": "message", "role": role, "content": text}
    if kind == "function_call":
        arguments = fields.string(raw, "arguments", where, empty=True)
        try:
            json.loads(arguments or "{}")
        except ValueError:
            raise FieldError((*where, "arguments"), "is not valid JSON") from None
        return {
            "type": "function_call",
            "call_id": fields.string(raw, "call_id", where),
            "name": fields.string(raw, "name", where),
            "arguments": arguments,
        }
    if kind == "function_call_output":
        output = fields.content(raw.get("output"), (*where, "output"), _TEXT_PARTS)
        return {
            "type": "function_call_output",
            "call_id": fields.string(raw, "call_id", where),
            "output": output,
        }
    if kind == "reasoning":
        texts = []
        for j, part in enumerate(raw.get("content") or []):
            if not isinstance(part, Mapping):
                raise FieldError((*where, "content", j), "must be an object")
            texts.append(fields.string(part, "text", (*where, "content", j), empty=True))
        text = "".join(texts)
        encrypted = raw.get("encrypted_content")
        if not text and isinstance(encrypted, str):
            text = encrypted
        return {"type": "reasoning", "text": text}
    raise FieldError(
        (*where, "type"),
        f"is {kind!r}, which is not supported (supported: message, function_call, "
        "function_call_output, reasoning)",
    )


def _items(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise FieldError(("input",), "must be a string or a list of input items")
    return [_item(item, ("input", i)) for i, item in enumerate(raw)]


def _reasoning(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    reasoning = fields.mapping(body, "reasoning")
    if reasoning is None:
        return None, None
    at: Path = ("reasoning",)
    effort = fields.one_of(reasoning, "effort", _EFFORTS, at)
    key = "summary" if reasoning.get("summary") is not None else "generate_summary"
    return effort, fields.one_of(reasoning, key, _SUMMARIES, at)


def _unsupported(body: Mapping[str, Any]) -> None:
    if body.get("background"):
        raise FieldError(("background",), "is not supported (no background mode)")
    if body.get("conversation") is not None:
        raise FieldError(("conversation",), "is not supported: use previous_response_id")
    if body.get("prompt") is not None:
        raise FieldError(("prompt",), "is not supported (no prompt templates)")
    if body.get("top_logprobs"):
        raise FieldError(("top_logprobs",), "is not supported (no logprobs)")
    if body.get("truncation") not in (None, "disabled"):
        raise FieldError(("truncation",), "must be 'disabled' (the only one supported)")


def parse_responses(body: Any, *, max_tools: int = 128) -> ResponsesRequest:
    """Validate a decoded JSON body; raises `FieldError` (a 400) naming the field."""
    body = fields.request_object(body)
    model = fields.string(body, "model")
    _unsupported(body)
    instructions = fields.optional_string(body, "instructions")
    tools = fields.tools(body, _TOOLS, max_tools)
    include = body.get("include") or []
    if not isinstance(include, list) or not all(isinstance(x, str) for x in include):
        raise FieldError(("include",), "must be a list of strings")
    effort, summary = _reasoning(body)
    text = fields.mapping(body, "text") or {}
    text_format = fields.answer_format(text.get("format"), ("text", "format"))
    return ResponsesRequest(
        model=model,
        items=_items(body),
        instructions=instructions,
        tools=tools,
        tool_choice=fields.tool_choice(body, fields.tool_names(tools), nested=False),
        parallel_tool_calls=fields.boolean(body, "parallel_tool_calls", True),
        max_output_tokens=fields.integer(body, "max_output_tokens", low=1),
        temperature=fields.number(body, "temperature", 0.0, 2.0),
        top_p=fields.number(body, "top_p", 0.0, 1.0),
        effort=effort,
        summary=summary,
        stream=fields.boolean(body, "stream", False),
        store=fields.boolean(body, "store", True),
        previous_response_id=fields.optional_string(body, "previous_response_id", empty=False),
        include_reasoning=_ENCRYPTED in include,
        metadata=dict(fields.mapping(body, "metadata") or {}),
        text_format=text_format,
        text=dict(text) if text.get("format") else dict(_PLAIN),
    )


def to_messages(items: list[dict[str, Any]], instructions: str | None) -> list[dict[str, Any]]:
    """Normalized input items as chat messages (see the module docstring)."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    reasoning: str | None = None
    for item in items:
        kind = item["type"]
        if kind == "reasoning":
            reasoning = (reasoning or "") + item["text"]
            continue
        role = "system" if item.get("role") == "developer" else item.get("role", "assistant")
        if reasoning and (kind == "function_call_output" or role != "assistant"):
            # reasoning that ended its turn without output stays in that turn
            messages.append({"role": "assistant", "content": "", "reasoning_content": reasoning})
            reasoning = None
        if kind == "message" and role == "system" and len(messages) == 1:
            first = messages[0]
            if first["role"] == "system":  # one leading system message: templates want one
                first["content"] += "\n\n" + item["content"]
                continue
        last = messages[-1] if messages else None
        if kind == "message":
            message: dict[str, Any] = {"role": role, "content": item["content"]}
            if role == "assistant" and reasoning:
                message["reasoning_content"] = reasoning
                reasoning = None
            messages.append(message)
        elif kind == "function_call":
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"] or "{}"},
            }
            joins = last is not None and last["role"] == "assistant" and not reasoning
            if joins and last is not None:
                last.setdefault("tool_calls", []).append(call)
            else:
                message = {"role": "assistant", "content": None, "tool_calls": [call]}
                if reasoning:
                    message["reasoning_content"] = reasoning
                    reasoning = None
                messages.append(message)
        else:  # function_call_output
            messages.append(
                {"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]}
            )
    if reasoning:
        messages.append({"role": "assistant", "content": "", "reasoning_content": reasoning})
    return messages
