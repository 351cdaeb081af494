"""OpenAI chat messages -> the plain data a chat template reads.

Data flow::

    caller's messages (OpenAI shapes) --prepare()--> private plain copy for the template

Each step follows what `transformers.apply_chat_template` or vLLM does before
rendering, so that templates see what they were written for:

- a private copy of JSON-like data (dicts, lists, str, int, float, bool, None); the
  caller's objects are never touched, whatever the template mutates;
- keys whose value is None are dropped (templates test for a missing key, and some
  print a literal "None");
- reasoning given as `reasoning_content`, `reasoning` or `thinking` is offered under
  `reasoning_content` and `thinking` (gpt-oss reads `thinking`);
- an assistant's tool-call `arguments` given as a JSON string is parsed into an object
  (vLLM does the same; templates iterate or `tojson` it), an empty one becomes `{}`;
- text-part lists (`[{"type": "text", "text": ...}]`) stay lists for templates that
  iterate content, and are joined with "\\n" into one string for the others (vLLM's
  rule). Only text parts are supported.

Every problem raises `PromptError` naming the message by index and role.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.errors import PromptError
from toolwire.nesting import MAX_DEPTH, json_too_deep

__all__ = ["plain", "prepare", "where"]

_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
_SURROGATE = re.compile("[\ud800-\udfff]")


def where(index: int, message: Any) -> str:
    """How errors name a message: `message 2 (tool)`."""
    role = message.get("role") if isinstance(message, Mapping) else None
    return f"message {index} ({role})" if isinstance(role, str) else f"message {index}"


def plain(value: Any, path: str, depth: int = 0) -> Any:
    """A private copy of JSON-like data; anything else is a `PromptError` naming `path`.

    Refused too: nesting deeper than `nesting.MAX_DEPTH` (templates and the copies made
    for them recurse), and strings holding a lone surrogate (no UTF-8 text can).
    """
    if value is None or type(value) in (int, float, bool):
        return value
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise PromptError(f"{path}: a string holds a lone surrogate, which is not text")
        return value if type(value) is str else str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if depth >= MAX_DEPTH and isinstance(value, Mapping | list | tuple):
        raise PromptError(f"{path}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        return {plain(k, path, depth + 1): plain(v, path, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, path, depth + 1) for v in value]
    raise PromptError(f"{path}: {type(value).__name__} is not JSON data")


def prepare(messages: Sequence[Any], *, list_content: bool) -> list[dict[str, Any]]:
    """The messages as the template will read them (see the module docstring)."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise PromptError("messages must be a non-empty list of message objects")
    out = []
    for index, raw in enumerate(messages):
        name = where(index, raw)
        if not isinstance(raw, Mapping):
            raise PromptError(f"{name}: a message must be an object, got {type(raw).__name__}")
        if not isinstance(raw.get("role"), str):
            raise PromptError(f"{name}: a message needs a string 'role'")
        # None fields are dropped; `"content": null` (what OpenAI clients send beside
        # tool calls) becomes "", as vLLM renders it: templates test `'x' in content`.
        message = {k: v for k, v in plain(raw, name).items() if v is not None or k == "content"}
        if message.get("content", "") is None:
            message["content"] = ""
        reasoning = next((message[k] for k in _REASONING_FIELDS if k in message), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        if "content" in message:
            message["content"] = _content(message["content"], name, list_content)
        if message["role"] == "assistant" and isinstance(message.get("tool_calls"), list):
            for call in message["tool_calls"]:
                _parse_arguments(call, name)
        out.append(message)
    return out


def _content(content: Any, name: str, list_content: bool) -> Any:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise PromptError(f"{name}: content must be a string or a list of text parts")
    texts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type", "text") != "text":
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise PromptError(f"{name}: only text content parts are supported, got {kind!r}")
        if not isinstance(part.get("text"), str):
            raise PromptError(f"{name}: a text part needs a string 'text'")
        texts.append(part["text"])
    if list_content:
        return [{**part, "type": "text"} for part in content]
    return "\n".join(texts)


def _parse_arguments(call: Any, name: str) -> None:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise PromptError(f"{name}: each tool call needs a 'function' object")
    arguments = function.get("arguments")
    if not arguments:
        function["arguments"] = {}
    elif isinstance(arguments, str):
        if json_too_deep(arguments):
            raise PromptError(f"{name}: tool call arguments nested deeper than {MAX_DEPTH} levels")
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise PromptError(
                f"{name}: the arguments of tool call {function.get('name')!r} are not valid "
                f"JSON ({exc.msg} at offset {exc.pos}); send them as a JSON object string"
            ) from exc
        # Checked as the rest of the message was (a `\\ud800` escape decodes to a
        # lone surrogate); the arguments sit 4 levels down in their message.
        function["arguments"] = plain(parsed, name, 4)
