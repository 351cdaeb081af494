"""Validation of a Chat Completions request body into a `ChatRequest`.

Every rejection is an `ApiError(400)` that names the offending field in `param`, as
OpenAI does (`messages[2].role`, `tool_choice`, `max_tokens`). Unknown fields are
ignored; fields whose meaning the server cannot honour (`n` > 1, `logprobs`) are
rejected rather than silently dropped.

Bounds come first (`check_body`): nesting depth anywhere in the body, and strings that
are not Unicode text (lone surrogates, which JSON's `\\ud800` escapes can produce);
then the number of tools. Each bound is a server option.
`response_format` is kept as the JSON schema the answer must follow (`json_object`:
any object), or rejected; it is never ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import UsageError
from toolwire.server.errors import ApiError
from toolwire.tools import tool_function

__all__ = ["ChatRequest", "check_body", "number", "parse_request"]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high"})
_MAX_STOPS = 4
_SURROGATE = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True)
class ChatRequest:
    """A validated request; fields keep OpenAI's names and shapes."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    #: The JSON schema the answer must follow (`response_format`), or None.
    response_format: dict[str, Any] | None = None


def _bad(param: str, message: str) -> ApiError:
    return ApiError(400, message, param=param)


def number(body: Mapping[str, Any], name: str, low: float, high: float) -> float | None:
    """`body[name]` as a float in [low, high], None when absent; a 400 naming it otherwise."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(name, f"'{name}' must be a number")
    if not low <= value <= high:
        raise _bad(name, f"'{name}' must be between {low:g} and {high:g}, got {value}")
    return float(value)


def _integer(body: Mapping[str, Any], name: str, low: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(name, f"'{name}' must be an integer")
    if value < low:
        raise _bad(name, f"'{name}' must be at least {low}, got {value}")
    return value


def _boolean(body: Mapping[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _bad(name, f"'{name}' must be a boolean")
    return value


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
        raise _bad("messages", "'messages' must be a non-empty list of message objects")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise _bad(where, f"'{where}' must be an object")
        role = message.get("role")
        if role not in _ROLES:
            raise _bad(f"{where}.role", f"'{where}.role' must be one of {sorted(_ROLES)}")
        if not _content_ok(message.get("content")):
            raise _bad(
                f"{where}.content",
                f"'{where}.content' must be a string or a list of text parts",
            )
        calls = message.get("tool_calls")
        if calls is not None and (role != "assistant" or not isinstance(calls, list)):
            raise _bad(f"{where}.tool_calls", "'tool_calls' must be a list on assistant messages")
        out.append(dict(message))
    return out


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise _bad("tools", "'tools' must be a list of tool objects")
    for i, tool in enumerate(tools):
        try:
            tool_function(tool)
        except UsageError as exc:
            raise _bad(f"tools[{i}]", str(exc)) from exc
    return [dict(t) for t in tools] or None


def _tool_choice(body: Mapping[str, Any], tools: list[dict[str, Any]] | None) -> Any:
    choice = body.get("tool_choice")
    if choice is None:
        return "auto"
    names = {str(tool_function(t)["name"]) for t in tools or []}
    if choice in ("auto", "none", "required"):
        if choice == "required" and not names:
            raise _bad("tool_choice", "tool_choice 'required' needs a non-empty 'tools' list")
        return choice
    function = choice.get("function") if isinstance(choice, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str) or choice.get("type", "function") != "function":
        raise _bad(
            "tool_choice",
            "'tool_choice' must be 'auto', 'none', 'required' or "
            '{"type": "function", "function": {"name": ...}}',
        )
    if name not in names:
        raise _bad("tool_choice", f"tool_choice names {name!r}, which is not in 'tools'")
    return {"type": "function", "function": {"name": name}}


def _stop(body: Mapping[str, Any]) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise _bad("stop", "'stop' must be a non-empty string or a list of them")
    if len(stops) > _MAX_STOPS:
        raise _bad("stop", f"'stop' takes at most {_MAX_STOPS} strings")
    return list(stops)


def _template_kwargs(body: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    effort = body.get("reasoning_effort")
    if effort is not None:
        if effort not in _EFFORTS:
            raise _bad("reasoning_effort", f"'reasoning_effort' must be one of {sorted(_EFFORTS)}")
        out["reasoning_effort"] = effort
        out["enable_thinking"] = effort != "none"
    extra = body.get("chat_template_kwargs")
    if extra is not None:
        if not isinstance(extra, Mapping):
            raise _bad("chat_template_kwargs", "'chat_template_kwargs' must be an object")
        out.update(extra)
    return out


def _path(parts: tuple[str | int, ...]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "body"


def check_body(body: Any, max_nesting: int) -> None:
    """Reject a body nested deeper than `max_nesting`, or holding a string that is not
    Unicode text; the error names the field. Iterative: no depth reaches the stack."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(body, ())]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise _bad(_path(where), f"'{_path(where)}' holds a lone surrogate")
            continue
        if not isinstance(value, dict | list):
            continue
        if len(where) >= max_nesting:
            raise _bad(_path(where), f"'{_path(where)}' is nested deeper than {max_nesting} levels")
        if isinstance(value, list):
            stack.extend((item, (*where, i)) for i, item in enumerate(value))
            continue
        for key, item in value.items():
            if _SURROGATE.search(key):
                raise _bad(_path(where), f"a key of '{_path(where)}' holds a lone surrogate")
            stack.append((item, (*where, key)))


def _response_format(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The schema `response_format` asks for (None for text); 400 for anything else."""
    spec = body.get("response_format")
    if spec is None:
        return None
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        inner = spec.get("json_schema")
        schema = inner.get("schema") if isinstance(inner, Mapping) else None
        if not isinstance(schema, Mapping):
            raise _bad(
                "response_format.json_schema.schema",
                "'response_format.json_schema.schema' must be a JSON schema object",
            )
        return dict(schema)
    raise _bad(
        "response_format",
        "'response_format.type' must be 'text', 'json_object' or 'json_schema'",
    )


def parse_request(body: Any, *, max_tools: int = 128, max_nesting: int = 64) -> ChatRequest:
    """Validate a decoded JSON body; raises `ApiError(400)` naming the field."""
    if not isinstance(body, Mapping):
        raise _bad("body", "the request body must be a JSON object")
    check_body(body, max_nesting)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model", "'model' is required")
    messages = _messages(body)
    declared = body.get("tools")
    if isinstance(declared, list) and len(declared) > max_tools:
        raise _bad("tools", f"'tools' holds {len(declared)} tools; at most {max_tools}")
    tools = _tools(body)
    tool_choice = _tool_choice(body, tools)
    response_format = _response_format(body)
    if response_format is not None and tools and tool_choice != "none":
        raise _bad(
            "response_format",
            "response_format cannot be combined with tools (unless tool_choice is 'none')",
        )
    n = _integer(body, "n", 1)
    if n not in (None, 1):
        raise _bad("n", "only n=1 is supported")
    if body.get("logprobs"):
        raise _bad("logprobs", "logprobs are not supported")
    max_tokens = _integer(body, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", 1)
    stream = _boolean(body, "stream", False)
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not isinstance(options, Mapping):
            raise _bad("stream_options", "'stream_options' must be an object")
        if not stream:
            raise _bad("stream_options", "'stream_options' is only allowed with stream=true")
        include_usage = _boolean(options, "include_usage", False)
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise _bad("seed", "'seed' must be an integer")
    return ChatRequest(
        model=model,
        messages=messages,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=_boolean(body, "parallel_tool_calls", True),
        max_tokens=max_tokens,
        temperature=number(body, "temperature", 0.0, 2.0),
        top_p=number(body, "top_p", 0.0, 1.0),
        seed=seed,
        stop=_stop(body),
        stream=stream,
        include_usage=include_usage,
        template_kwargs=_template_kwargs(body),
        response_format=response_format,
    )
