"""Validation of an Anthropic Messages request into the neutral `ChatRequest`.

Data flow::

    body --parse_messages()--> MessagesRequest (`chat`: what the pipeline runs)

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

Every rejection is an `ApiError(400)` whose message starts with the field's path in
Anthropic's dotted form (`messages.1.content.0.tool_use_id: ...`); the route renders
it in Anthropic's error shape. Features this server cannot honour (images, documents,
server tools, a final assistant message to continue, `top_k`) are rejected by name.
`output_config.format` (a JSON schema) becomes the pipeline's `response_format`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolwire.server.errors import ApiError
from toolwire.server.request import ChatRequest

__all__ = ["MessagesRequest", "parse_messages"]

_MAX_STOPS = 16
_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})


def _bad(param: str, message: str) -> ApiError:
    return ApiError(400, f"{param}: {message}", param=param)


@dataclass(frozen=True)
class MessagesRequest:
    """A validated Messages request."""

    model: str
    chat: ChatRequest
    stream: bool


def _text_blocks(value: Any, where: str) -> str:
    """A string, or text blocks joined with "\\n"."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _bad(where, "must be a string or a list of text blocks")
    texts = []
    for j, block in enumerate(value):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            kind = block.get("type") if isinstance(block, Mapping) else None
            raise _bad(f"{where}.{j}", f"block type {kind!r} is not supported here (text only)")
        if not isinstance(block.get("text"), str):
            raise _bad(f"{where}.{j}.text", "must be a string")
        texts.append(block["text"])
    return "\n".join(texts)


def _string(block: Mapping[str, Any], key: str, where: str) -> str:
    value = block.get(key)
    if not isinstance(value, str) or not value:
        raise _bad(f"{where}.{key}", "must be a non-empty string")
    return value


def _user(content: list[Any], where: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            out.append({"role": "user", "content": "\n".join(texts)})
            texts.clear()

    for j, block in enumerate(content):
        at = f"{where}.{j}"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise _bad(f"{at}.text", "must be a string")
            texts.append(block["text"])
        elif kind == "tool_result":
            flush()
            call_id = _string(block, "tool_use_id", at)
            result = block.get("content", "")
            text = _text_blocks(result, f"{at}.content") if result is not None else ""
            is_error = block.get("is_error", False)
            if not isinstance(is_error, bool):
                raise _bad(f"{at}.is_error", "must be a boolean")
            if is_error:
                text = f"Error: {text}"
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
        else:
            raise _bad(
                f"{at}.type",
                f"block type {kind!r} is not supported in user messages (text, tool_result)",
            )
    flush()
    return out


def _assistant(content: list[Any], where: str) -> dict[str, Any]:
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        at = f"{where}.{j}"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise _bad(f"{at}.text", "must be a string")
            texts.append(block["text"])
        elif kind == "thinking":
            if not isinstance(block.get("thinking"), str):
                raise _bad(f"{at}.thinking", "must be a string")
            thinking.append(block["thinking"])
        elif kind == "redacted_thinking":
            continue
        elif kind == "tool_use":
            arguments = block.get("input")
            if not isinstance(arguments, Mapping):
                raise _bad(f"{at}.input", "must be an object")
            calls.append(
                {
                    "id": _string(block, "id", at),
                    "type": "function",
                    "function": {
                        "name": _string(block, "name", at),
                        "arguments": json.dumps(arguments, ensure_ascii=False),
                    },
                }
            )
        else:
            raise _bad(
                f"{at}.type",
                f"block type {kind!r} is not supported in assistant messages "
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
        raise _bad("messages", "must be a non-empty list of messages")
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        text = _text_blocks(system, "system")
        if text:
            out.append({"role": "system", "content": text})
    for i, message in enumerate(raw):
        where = f"messages.{i}"
        if not isinstance(message, Mapping):
            raise _bad(where, "must be an object")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise _bad(f"{where}.role", "must be 'user' or 'assistant'")
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise _bad(f"{where}.content", "must be a string or a list of content blocks")
        if role == "user":
            out += _user(content, f"{where}.content")
        else:
            out.append(_assistant(content, f"{where}.content"))
    if raw[-1].get("role") == "assistant":
        raise _bad(
            f"messages.{len(raw) - 1}",
            "a final assistant message (continuing a prefilled response) is not supported",
        )
    return out


def _tools(body: Mapping[str, Any], max_tools: int) -> list[dict[str, Any]] | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise _bad("tools", "must be a list of tools")
    if len(tools) > max_tools:
        raise _bad("tools", f"holds {len(tools)} tools; at most {max_tools}")
    out = []
    names: set[str] = set()
    for i, tool in enumerate(tools):
        where = f"tools.{i}"
        if not isinstance(tool, Mapping):
            raise _bad(where, "must be an object")
        if tool.get("type", "custom") != "custom":
            raise _bad(
                f"{where}.type",
                f"tool type {tool.get('type')!r} is not supported: only client tools "
                "(name, description, input_schema)",
            )
        name = _string(tool, "name", where)
        if name in names:
            raise _bad(f"{where}.name", f"tool name {name!r} is declared twice")
        names.add(name)
        schema = tool.get("input_schema")
        if not isinstance(schema, Mapping):
            raise _bad(f"{where}.input_schema", "must be a JSON schema object")
        function: dict[str, Any] = {"name": name, "parameters": dict(schema)}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out or None


def _tool_choice(body: Mapping[str, Any], tools: list[dict[str, Any]] | None) -> tuple[Any, bool]:
    """The chat tool_choice and parallel_tool_calls."""
    choice = body.get("tool_choice")
    if choice is None:
        return "auto", True
    if not isinstance(choice, Mapping):
        raise _bad("tool_choice", "must be an object with a 'type'")
    names = {t["function"]["name"] for t in tools or []}
    disable = choice.get("disable_parallel_tool_use", False)
    if not isinstance(disable, bool):
        raise _bad("tool_choice.disable_parallel_tool_use", "must be a boolean")
    kind = choice.get("type")
    if kind in ("any", "tool") and not names:
        raise _bad("tool_choice", f"tool_choice {kind!r} needs a non-empty 'tools' list")
    if kind == "auto":
        return "auto", not disable
    if kind == "none":
        return "none", True
    if kind == "any":
        return "required", not disable
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str) or name not in names:
            raise _bad("tool_choice.name", f"names {name!r}, which is not in 'tools'")
        return {"type": "function", "function": {"name": name}}, not disable
    raise _bad("tool_choice.type", "must be 'auto', 'any', 'tool' or 'none'")


def _number(body: Mapping[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(name, "must be a number")
    if not low <= value <= high:
        raise _bad(name, f"must be between {low:g} and {high:g}, got {value}")
    return float(value)


def _stops(body: Mapping[str, Any]) -> list[str]:
    stops = body.get("stop_sequences")
    if stops is None:
        return []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise _bad("stop_sequences", "must be a list of non-empty strings")
    if len(stops) > _MAX_STOPS:
        raise _bad("stop_sequences", f"takes at most {_MAX_STOPS} strings")
    return list(stops)


def _thinking(body: Mapping[str, Any], max_tokens: int | None) -> dict[str, Any]:
    thinking = body.get("thinking")
    if thinking is None:
        return {}
    if not isinstance(thinking, Mapping):
        raise _bad("thinking", "must be an object")
    kind = thinking.get("type")
    if kind == "disabled":
        return {"enable_thinking": False}
    if kind in ("adaptive", "between_tools"):
        return {"enable_thinking": True}
    if kind != "enabled":
        raise _bad("thinking.type", "must be 'enabled', 'disabled', 'adaptive' or 'between_tools'")
    budget = thinking.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise _bad("thinking.budget_tokens", "must be a positive integer")
    if max_tokens is not None and budget >= max_tokens:
        raise _bad("thinking.budget_tokens", "must be less than max_tokens")
    return {"enable_thinking": True}


def _output_format(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON schema `output_config.format` asks the answer to follow, or None."""
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, Mapping) else None
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        raise _bad("output_config.format.type", "must be 'json_schema'")
    schema = fmt.get("schema")
    if not isinstance(schema, Mapping):
        raise _bad("output_config.format.schema", "must be a JSON schema object")
    return dict(schema)


def _effort(body: Mapping[str, Any]) -> dict[str, Any]:
    config = body.get("output_config")
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise _bad("output_config", "must be an object")
    effort = config.get("effort")
    if effort is None:
        return {}
    if effort not in _EFFORTS:
        raise _bad("output_config.effort", f"must be one of {sorted(_EFFORTS)}")
    return {"reasoning_effort": effort}


def _unsupported(body: Mapping[str, Any]) -> None:
    if body.get("top_k") is not None:
        raise _bad("top_k", "top_k sampling is not supported")
    if body.get("mcp_servers"):
        raise _bad("mcp_servers", "MCP servers are not supported")
    if body.get("container") is not None:
        raise _bad("container", "containers are not supported")


def parse_messages(body: Any, *, count_only: bool = False, max_tools: int = 128) -> MessagesRequest:
    """Validate a decoded body; `count_only` for count_tokens (no max_tokens needed)."""
    if not isinstance(body, Mapping):
        raise _bad("body", "the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model", "Field required")
    _unsupported(body)
    max_tokens = body.get("max_tokens")
    if max_tokens is None and not count_only:
        raise _bad("max_tokens", "Field required")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise _bad("max_tokens", "must be a positive integer")
    messages = _messages(body)
    tools = _tools(body, max_tools)
    choice, parallel = _tool_choice(body, tools)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("stream", "must be a boolean")
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise _bad("metadata", "must be an object")
    output_format = _output_format(body)
    if output_format is not None and tools and choice != "none":
        raise _bad(
            "output_config.format",
            "cannot be combined with tools (unless tool_choice is 'none')",
        )
    chat = ChatRequest(
        model=model,
        messages=messages,
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 0.0, 1.0),
        top_p=_number(body, "top_p", 0.0, 1.0),
        stop=_stops(body),
        template_kwargs={**_effort(body), **_thinking(body, max_tokens)},
        response_format=output_format,
    )
    return MessagesRequest(model=model, chat=chat, stream=stream)
