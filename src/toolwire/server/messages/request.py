"""Validation of an Anthropic Messages request into the neutral `ChatRequest`.

Data flow::

    body --parse_messages()--> the neutral ChatRequest the turn runs

Content blocks map to chat messages as the model's chat template expects them:

- `system` (a string or text blocks, joined with "\\n") is a system message, first;
- a user message's `text` blocks are one user message; each `tool_result` block is a
  `tool` message (`tool_use_id` as its call id; string or text-block content; with
  `is_error` its text is prefixed `Error: `), in block order;
- an assistant message's `text` blocks are its content, `thinking` blocks its
  `reasoning_content`, `tool_use` blocks its `tool_calls` (`input` as JSON arguments);
  `redacted_thinking` is Anthropic-encrypted and cannot be read: it is dropped;
- `thinking` sets the template's `enable_thinking`, `output_config.effort` its
  `reasoning_effort`; `temperature` and `top_p` are honoured when sent (current
  Anthropic SDKs send them only through `extra_body`).

All of it goes through `render_prompt` with isolation on: delimiter text in a tool
result reaches the model as ordinary sub-word ids.

Every rejection is a `FieldError` (a 400) naming the field; Anthropic's error shape
spells it first in the message, dotted (`messages.1.content.0.tool_use_id: ...`).
Features this server cannot honour (images, documents, server tools, a final
assistant message to continue, `top_k`) are rejected by name.
`output_config.format` (a JSON schema) becomes the pipeline's `response_format` (the
API's field table names it back in errors).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from toolwire.server.core import fields
from toolwire.server.core.errors import FieldError, Path
from toolwire.server.core.request import ChatRequest

__all__ = ["parse_messages"]

_MAX_STOPS = 16
_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
_TEXT = {"text": "text"}
_TOOLS = fields.ToolFields(
    type="custom",
    default_type="custom",
    nested=False,
    schema="input_schema",
    schema_required=True,
    served="only client tools (name, description, input_schema)",
)
#: Anthropic's tool_choice types, as the neutral tool_choice's kinds.
_CHOICES = {"auto": "auto", "none": "none", "any": "required", "tool": "named"}


def _blocks(content: list[Any], where: Path) -> Iterator[tuple[Path, Any, Any]]:
    """Each block of a message's content: its path, its type, the block."""
    for j, block in enumerate(content):
        yield (*where, j), block.get("type") if isinstance(block, Mapping) else None, block


def _user(content: list[Any], where: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            out.append({"role": "user", "content": "\n".join(texts)})
            texts.clear()

    for at, kind, block in _blocks(content, where):
        if kind == "text":
            texts.append(fields.string(block, "text", at, empty=True))
        elif kind == "tool_result":
            flush()
            call_id = fields.string(block, "tool_use_id", at)
            result = block.get("content", "")
            text = fields.content(result, (*at, "content"), _TEXT) if result is not None else ""
            if fields.boolean(block, "is_error", False, at):
                text = f"Error: {text}"
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
        else:
            raise FieldError(
                (*at, "type"),
                f"is {kind!r}, which is not supported in user messages (text, tool_result)",
            )
    flush()
    return out


def _assistant(content: list[Any], where: Path) -> dict[str, Any]:
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for at, kind, block in _blocks(content, where):
        if kind == "text":
            texts.append(fields.string(block, "text", at, empty=True))
        elif kind == "thinking":
            thinking.append(fields.string(block, "thinking", at, empty=True))
        elif kind == "redacted_thinking":
            continue
        elif kind == "tool_use":
            arguments = fields.mapping(block, "input", at)
            if arguments is None:
                raise FieldError((*at, "input"), "must be an object")
            calls.append(
                {
                    "id": fields.string(block, "id", at),
                    "type": "function",
                    "function": {
                        "name": fields.string(block, "name", at),
                        "arguments": json.dumps(arguments, ensure_ascii=False),
                    },
                }
            )
        else:
            raise FieldError(
                (*at, "type"),
                f"is {kind!r}, which is not supported in assistant messages "
                "(text, thinking, tool_use)",
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if thinking:
        message["reasoning_content"] = "".join(thinking)
    if calls:
        message["tool_calls"] = calls
    return message


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise FieldError(("messages",), "must be a non-empty list of messages")
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        text = fields.content(system, ("system",), _TEXT)
        if text:
            out.append({"role": "system", "content": text})
    for i, message in enumerate(raw):
        where: Path = ("messages", i)
        if not isinstance(message, Mapping):
            raise FieldError(where, "must be an object")
        role = fields.one_of(message, "role", ("user", "assistant"), where, required=True)
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise FieldError((*where, "content"), "must be a string or a list of content blocks")
        if role == "user":
            out += _user(content, (*where, "content"))
        else:
            out.append(_assistant(content, (*where, "content")))
    if raw[-1].get("role") == "assistant":
        raise FieldError(
            ("messages", len(raw) - 1),
            "is an assistant message: continuing a prefilled response is not supported",
        )
    return out


def _tool_choice(body: Mapping[str, Any], tools: list[dict[str, Any]]) -> tuple[Any, bool]:
    """The neutral tool_choice and parallel_tool_calls."""
    choice = fields.mapping(body, "tool_choice")
    if choice is None:
        return "auto", True
    at: Path = ("tool_choice",)
    disable = fields.boolean(choice, "disable_parallel_tool_use", False, at)
    kind = choice.get("type")
    kind = _CHOICES.get(kind) if isinstance(kind, str) else None
    if kind is None:
        raise FieldError((*at, "type"), "must be 'auto', 'any', 'tool' or 'none'")
    named = fields.chosen(kind, choice.get("name"), fields.tool_names(tools), at, (*at, "name"))
    return named, kind == "none" or not disable


def _thinking(body: Mapping[str, Any], max_tokens: int | None) -> dict[str, Any]:
    thinking = fields.mapping(body, "thinking")
    if thinking is None:
        return {}
    at: Path = ("thinking",)
    kind = fields.one_of(
        thinking, "type", ("enabled", "disabled", "adaptive", "between_tools"), at, required=True
    )
    if kind != "enabled":
        return {"enable_thinking": kind != "disabled"}
    budget = fields.integer(thinking, "budget_tokens", at, low=1)
    if budget is None:
        raise FieldError((*at, "budget_tokens"), "is required")
    if max_tokens is not None and budget >= max_tokens:
        raise FieldError((*at, "budget_tokens"), "must be less than max_tokens")
    return {"enable_thinking": True}


def _output_config(body: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The template's `reasoning_effort` and the JSON schema `output_config.format` asks
    the answer to follow (or None)."""
    config = fields.mapping(body, "output_config")
    if config is None:
        return {}, None
    at: Path = ("output_config",)
    effort = fields.one_of(config, "effort", _EFFORTS, at)
    schema = fields.answer_format(config.get("format"), (*at, "format"), kinds=("json_schema",))
    return ({} if effort is None else {"reasoning_effort": effort}), schema


def _unsupported(body: Mapping[str, Any]) -> None:
    if body.get("top_k") is not None:
        raise FieldError(("top_k",), "is not supported (no top_k sampling)")
    if body.get("mcp_servers"):
        raise FieldError(("mcp_servers",), "is not supported (no MCP servers)")
    if body.get("container") is not None:
        raise FieldError(("container",), "is not supported (no containers)")


def parse_messages(body: Any, *, count_only: bool = False, max_tools: int = 128) -> ChatRequest:
    """Validate a decoded body; `count_only` for count_tokens (no max_tokens needed)."""
    body = fields.request_object(body)
    model = fields.string(body, "model")
    _unsupported(body)
    max_tokens = fields.integer(body, "max_tokens", low=1)
    if max_tokens is None and not count_only:
        raise FieldError(("max_tokens",), "is required")
    messages = _messages(body)
    tools = fields.tools(body, _TOOLS, max_tools)
    choice, parallel = _tool_choice(body, tools)
    fields.mapping(body, "metadata")  # checked; this server keeps no metadata
    effort, output_format = _output_config(body)
    return ChatRequest(
        model=model,
        messages=messages,
        tools=tools or None,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        max_tokens=max_tokens,
        temperature=fields.number(body, "temperature", 0.0, 1.0),
        top_p=fields.number(body, "top_p", 0.0, 1.0),
        stop=fields.strings(body, "stop_sequences", _MAX_STOPS),
        stream=fields.boolean(body, "stream", False),
        template_kwargs={**effort, **_thinking(body, max_tokens)},
        response_format=output_format,
    )
