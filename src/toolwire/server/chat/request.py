"""Validation of a Chat Completions request body into the neutral `ChatRequest`.

Data flow::

    body (bounded by the turn: nesting, Unicode) --parse_request()--> ChatRequest

The neutral request speaks Chat Completions' names and shapes, so messages and tools
pass as the client wrote them once checked. Every rejection is a `FieldError` naming
the offending field in `param`, as OpenAI does (`messages[2].role`, `tool_choice`,
`max_tokens`). Unknown fields are ignored; fields whose meaning the server cannot
honour (`n` > 1, `logprobs`) are rejected rather than silently dropped.
`response_format` is kept as the JSON schema the answer must follow (`json_object`:
any object), or rejected; it is never ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolwire.server.core import fields
from toolwire.server.core.errors import FieldError
from toolwire.server.core.request import ChatRequest

__all__ = ["parse_request"]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high"})
_MAX_STOPS = 4
_TOOLS = fields.ToolFields(
    type="function",
    default_type="function",
    nested=True,
    schema="parameters",
    schema_required=False,
    served="only 'function' tools",
)


def _content_ok(content: Any) -> bool:
    if content is None or isinstance(content, str):
        return True
    if not isinstance(content, list):
        return False
    return all(
        isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str)
        for p in content
    )


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise FieldError(("messages",), "must be a non-empty list of message objects")
    out = []
    for i, message in enumerate(messages):
        where = ("messages", i)
        if not isinstance(message, Mapping):
            raise FieldError(where, "must be an object")
        role = fields.one_of(message, "role", _ROLES, where, required=True)
        if not _content_ok(message.get("content")):
            raise FieldError((*where, "content"), "must be a string or a list of text parts")
        calls = message.get("tool_calls")
        if calls is not None and (role != "assistant" or not isinstance(calls, list)):
            raise FieldError((*where, "tool_calls"), "must be a list, on assistant messages")
        out.append(dict(message))
    return out


def _template_kwargs(body: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    effort = fields.one_of(body, "reasoning_effort", _EFFORTS)
    if effort is not None:
        out["reasoning_effort"] = effort
        out["enable_thinking"] = effort != "none"
    out.update(fields.mapping(body, "chat_template_kwargs") or {})
    return out


def parse_request(body: Any, *, max_tools: int = 128) -> ChatRequest:
    """Validate a decoded JSON body; raises `FieldError` (a 400) naming the field."""
    body = fields.request_object(body)
    model = fields.string(body, "model")
    messages = _messages(body)
    tools = fields.tools(body, _TOOLS, max_tools)
    tool_choice = fields.tool_choice(body, fields.tool_names(tools), nested=True)
    response_format = fields.answer_format(
        body.get("response_format"), ("response_format",), schema_at=("json_schema", "schema")
    )
    if fields.integer(body, "n") not in (None, 1):
        raise FieldError(("n",), "must be 1 (one choice per request is supported)")
    if body.get("logprobs"):
        raise FieldError(("logprobs",), "is not supported")
    max_tokens = fields.integer(body, "max_completion_tokens", low=1)
    if max_tokens is None:
        max_tokens = fields.integer(body, "max_tokens", low=1)
    stream = fields.boolean(body, "stream", False)
    options = fields.mapping(body, "stream_options")
    if options is not None and not stream:
        raise FieldError(("stream_options",), "is only allowed with stream=true")
    return ChatRequest(
        model=model,
        messages=messages,
        tools=tools or None,
        tool_choice=tool_choice,
        parallel_tool_calls=fields.boolean(body, "parallel_tool_calls", True),
        max_tokens=max_tokens,
        temperature=fields.number(body, "temperature", 0.0, 2.0),
        top_p=fields.number(body, "top_p", 0.0, 1.0),
        seed=fields.integer(body, "seed"),
        stop=fields.strings(body, "stop", _MAX_STOPS, single=True),
        stream=stream,
        include_usage=fields.boolean(options or {}, "include_usage", False, ("stream_options",)),
        template_kwargs=_template_kwargs(body),
        response_format=response_format,
    )
