"""Validation of an OpenAI Responses request into the neutral `ChatRequest`.

Data flow::

    body --parse_responses()--> ResponsesRequest: the validated fields, and `items`
                                (the request's input as a list of input items)
    history items + items --to_messages()--> chat messages for render_prompt

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
the answer is kept to the schema by the structural tag.

Every rejection is an `ApiError(400)` naming the field (`input[2].call_id`,
`tools[0].type`, `max_output_tokens`). Features this server cannot honour (hosted
tools, images and files, background mode) are rejected by name rather than ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolwire.server.errors import ApiError
from toolwire.server.request import ChatRequest, number

__all__ = ["ResponsesRequest", "parse_responses", "to_messages"]

_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})
_ROLES = frozenset({"user", "assistant", "system", "developer"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_ENCRYPTED = "reasoning.encrypted_content"
_PLAIN: dict[str, Any] = {"format": {"type": "text"}}


def _bad(param: str, message: str) -> ApiError:
    return ApiError(400, message, param=param)


@dataclass(frozen=True)
class ResponsesRequest:
    """A validated Responses request; `chat` holds what the pipeline runs."""

    model: str
    items: list[dict[str, Any]]
    instructions: str | None
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
        tools = [
            {"type": "function", "function": {k: v for k, v in t.items() if k != "type"}}
            for t in self.tools
        ]
        choice = self.tool_choice
        if isinstance(choice, Mapping):
            choice = {"type": "function", "function": {"name": choice["name"]}}
        return ChatRequest(
            model=self.model,
            messages=messages,
            tools=tools or None,
            tool_choice=choice,
            parallel_tool_calls=self.parallel_tool_calls,
            max_tokens=self.max_output_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            template_kwargs=kwargs,
            response_format=self.text_format,
        )


def _boolean(body: Mapping[str, Any], name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _bad(name, f"'{name}' must be a boolean")
    return value


def _text(content: Any, where: str, parts: frozenset[str]) -> str:
    """A message's content: a string, or a list of text parts joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(where, f"'{where}' must be a string or a list of content parts")
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, Mapping):
            raise _bad(f"{where}[{j}]", f"'{where}[{j}]' must be an object")
        kind = part.get("type")
        if kind not in parts:
            raise _bad(
                f"{where}[{j}].type",
                f"content part type {kind!r} is not supported here (text parts only: "
                f"{', '.join(sorted(parts))})",
            )
        key = "refusal" if kind == "refusal" else "text"
        if not isinstance(part.get(key), str):
            raise _bad(f"{where}[{j}].{key}", f"'{where}[{j}].{key}' must be a string")
        texts.append(part[key])
    return "\n".join(texts)


def _string(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise _bad(f"{where}.{key}", f"'{where}.{key}' must be a non-empty string")
    return value


def _item(raw: Any, where: str) -> dict[str, Any]:
    """One input item, checked and normalized (a role-only message gets its type)."""
    if not isinstance(raw, Mapping):
        raise _bad(where, f"'{where}' must be an object")
    kind = raw.get("type", "message" if "role" in raw else None)
    if kind == "message":
        role = raw.get("role")
        if role not in _ROLES:
            raise _bad(f"{where}.role", f"'{where}.role' must be one of {sorted(_ROLES)}")
        text = _text(raw.get("content"), f"{where}.content", _TEXT_PARTS | {"refusal"})
        return {"type": "message", "role": role, "content": text}
    if kind == "function_call":
        arguments = raw.get("arguments")
        if not isinstance(arguments, str):
            raise _bad(f"{where}.arguments", f"'{where}.arguments' must be a JSON string")
        try:
            json.loads(arguments or "{}")
        except ValueError:
            raise _bad(f"{where}.arguments", f"'{where}.arguments' is not valid JSON") from None
        return {
            "type": "function_call",
            "call_id": _string(raw, "call_id", where),
            "name": _string(raw, "name", where),
            "arguments": arguments,
        }
    if kind == "function_call_output":
        output = _text(raw.get("output"), f"{where}.output", _TEXT_PARTS)
        return {
            "type": "function_call_output",
            "call_id": _string(raw, "call_id", where),
            "output": output,
        }
    if kind == "reasoning":
        texts = []
        for j, part in enumerate(raw.get("content") or []):
            if not isinstance(part, Mapping) or not isinstance(part.get("text"), str):
                raise _bad(f"{where}.content[{j}]", "reasoning content parts need a 'text'")
            texts.append(part["text"])
        text = "".join(texts)
        encrypted = raw.get("encrypted_content")
        if not text and isinstance(encrypted, str):
            text = encrypted
        return {"type": "reasoning", "text": text}
    raise _bad(
        f"{where}.type",
        f"input item type {kind!r} is not supported (supported: message, function_call, "
        "function_call_output, reasoning)",
    )


def _items(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise _bad("input", "'input' must be a string or a list of input items")
    return [_item(item, f"input[{i}]") for i, item in enumerate(raw)]


def _tools(body: Mapping[str, Any], max_tools: int) -> list[dict[str, Any]]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise _bad("tools", "'tools' must be a list of function tools")
    if len(tools) > max_tools:
        raise _bad("tools", f"'tools' holds {len(tools)} tools; at most {max_tools}")
    out = []
    names: set[str] = set()
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, Mapping):
            raise _bad(where, f"'{where}' must be an object")
        if tool.get("type") != "function":
            raise _bad(
                f"{where}.type",
                f"tool type {tool.get('type')!r} is not supported: only 'function' tools "
                "(hosted tools such as web_search or file_search are not available here)",
            )
        name = _string(tool, "name", where)
        if name in names:
            raise _bad(f"{where}.name", f"tool name {name!r} is declared twice")
        names.add(name)
        parameters = tool.get("parameters")
        if parameters is not None and not isinstance(parameters, Mapping):
            raise _bad(f"{where}.parameters", f"'{where}.parameters' must be a JSON schema")
        strict = tool.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise _bad(f"{where}.strict", f"'{where}.strict' must be a boolean")
        entry: dict[str, Any] = {"type": "function", "name": name}
        if isinstance(tool.get("description"), str):
            entry["description"] = tool["description"]
        if parameters is not None:
            entry["parameters"] = dict(parameters)
        if strict is not None:
            entry["strict"] = strict
        out.append(entry)
    return out


def _tool_choice(body: Mapping[str, Any], tools: list[dict[str, Any]]) -> Any:
    choice = body.get("tool_choice")
    names = {t["name"] for t in tools}
    if choice is None:
        return "auto"
    if choice in ("auto", "none", "required"):
        if choice == "required" and not names:
            raise _bad("tool_choice", "tool_choice 'required' needs a non-empty 'tools' list")
        return choice
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        name = choice.get("name")
        if not isinstance(name, str) or name not in names:
            raise _bad("tool_choice", f"tool_choice names {name!r}, which is not in 'tools'")
        return {"type": "function", "name": name}
    raise _bad(
        "tool_choice",
        "'tool_choice' must be 'auto', 'none', 'required' or "
        '{"type": "function", "name": ...} (other forms are not supported)',
    )


def _text_format(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON schema `text.format` asks the answer to follow (None for plain text)."""
    text = body.get("text")
    if text is None:
        return None
    if not isinstance(text, Mapping):
        raise _bad("text", "'text' must be an object")
    fmt = text.get("format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        schema = fmt.get("schema")
        if not isinstance(schema, Mapping):
            raise _bad("text.format.schema", "'text.format.schema' must be a JSON schema object")
        return dict(schema)
    raise _bad("text.format", "'text.format.type' must be 'text', 'json_object' or 'json_schema'")


def _reasoning(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    reasoning = body.get("reasoning")
    if reasoning is None:
        return None, None
    if not isinstance(reasoning, Mapping):
        raise _bad("reasoning", "'reasoning' must be an object")
    effort = reasoning.get("effort")
    if effort is not None and effort not in _EFFORTS:
        raise _bad("reasoning.effort", f"'reasoning.effort' must be one of {sorted(_EFFORTS)}")
    summary = reasoning.get("summary", reasoning.get("generate_summary"))
    if summary is not None and summary not in ("auto", "concise", "detailed"):
        raise _bad("reasoning.summary", "'reasoning.summary' must be auto, concise or detailed")
    return effort, summary


def _unsupported(body: Mapping[str, Any]) -> None:
    if body.get("background"):
        raise _bad("background", "background mode is not supported")
    if body.get("conversation") is not None:
        raise _bad("conversation", "conversations are not supported; use previous_response_id")
    if body.get("prompt") is not None:
        raise _bad("prompt", "prompt templates are not supported")
    if body.get("top_logprobs"):
        raise _bad("top_logprobs", "logprobs are not supported")
    truncation = body.get("truncation")
    if truncation not in (None, "disabled"):
        raise _bad("truncation", "only truncation 'disabled' is supported")


def parse_responses(body: Any, *, max_tools: int = 128) -> ResponsesRequest:
    """Validate a decoded JSON body; raises `ApiError(400)` naming the field."""
    if not isinstance(body, Mapping):
        raise _bad("body", "the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model", "'model' is required")
    _unsupported(body)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _bad("instructions", "'instructions' must be a string")
    tools = _tools(body, max_tools)
    max_output = body.get("max_output_tokens")
    if max_output is not None and (
        isinstance(max_output, bool) or not isinstance(max_output, int) or max_output < 1
    ):
        raise _bad("max_output_tokens", "'max_output_tokens' must be a positive integer")
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise _bad("previous_response_id", "'previous_response_id' must be a response id")
    include = body.get("include") or []
    if not isinstance(include, list) or not all(isinstance(x, str) for x in include):
        raise _bad("include", "'include' must be a list of strings")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise _bad("metadata", "'metadata' must be an object")
    effort, summary = _reasoning(body)
    tool_choice = _tool_choice(body, tools)
    text_format = _text_format(body)
    if text_format is not None and tools and tool_choice != "none":
        raise _bad(
            "text.format",
            "a structured text.format cannot be combined with tools (unless tool_choice is 'none')",
        )
    text = body.get("text")
    return ResponsesRequest(
        model=model,
        items=_items(body),
        instructions=instructions,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=_boolean(body, "parallel_tool_calls", True),
        max_output_tokens=max_output,
        temperature=number(body, "temperature", 0.0, 2.0),
        top_p=number(body, "top_p", 0.0, 1.0),
        effort=effort,
        summary=summary,
        stream=_boolean(body, "stream", False),
        store=_boolean(body, "store", True),
        previous_response_id=previous,
        include_reasoning=_ENCRYPTED in include,
        metadata=dict(metadata),
        text_format=text_format,
        text=dict(text)
        if isinstance(text, Mapping) and text.get("format")
        else {"format": {"type": "text"}},
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
