"""What the model is offered and may call: the neutral request's tools as the prompt, the
grammar and the parser read them.

The neutral request keeps tools and `tool_choice` in Chat Completions' shapes, with its
two extensions of them: custom (freeform) tools, `{"type": "custom", "custom": {"name",
"description", "format"}}`, and `allowed_tools`, `{"type": "allowed_tools",
"allowed_tools": {"mode", "tools": [references]}}` (a named custom tool is `{"type":
"custom", "custom": {"name"}}`). The prompt, the parser and the grammar know function
tools only, so the turn offers what the request declares as functions::

    ChatRequest --offer()--> Offer
        prompt_tools  every declared tool as a function; a custom tool takes one string,
                      `input`, whose description states its format (the grammar's text)
        call_tools    the tools a call may name: `allowed_tools`' list, else all; a
                      custom tool with a grammar carries it (`grammar.freeform.FREEFORM`)
                      so the structural tag keeps the input to it
        tool_choice   "auto" | "none" | "required" | a named function (`allowed_tools`'
                      mode; a named custom tool as the function it is offered as)
        messages      earlier custom calls as calls of those functions, `{"input": ...}`
        custom        the custom tools' names: each API returns their calls as custom
                      calls, the input unwrapped (`unwrap`)

`allowed_tools` keeps every tool in the prompt (as OpenAI does: the prompt, and its
cache, do not change with the choice) and lets calls name only the listed ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from toolwire.grammar.freeform import FREEFORM, INPUT
from toolwire.server.core.request import ChatRequest
from toolwire.tools import tool_function

__all__ = ["Offer", "arguments", "is_custom", "name_of", "offer", "unwrap"]


@dataclass(frozen=True)
class Offer:
    """A request's tools, choice and history as the prompt, grammar and parser read them."""

    prompt_tools: list[dict[str, Any]]
    call_tools: list[dict[str, Any]]
    tool_choice: Any
    messages: list[dict[str, Any]]
    custom: frozenset[str]


def is_custom(tool: Any) -> bool:
    """A custom tool (or a reference to one) in the neutral shape."""
    return isinstance(tool, Mapping) and tool.get("type") == "custom"


def name_of(tool: Mapping[str, Any]) -> str:
    """The name of a neutral tool or tool reference."""
    if is_custom(tool):
        return str(tool["custom"]["name"])
    return str(tool_function(tool)["name"])


def _described(custom: Mapping[str, Any]) -> str:
    spec = custom.get("format") or {}
    if spec.get("type") != "grammar":
        return "The tool's whole input, as raw text."
    grammar = spec["grammar"]
    kind = "Lark grammar" if grammar["syntax"] == "lark" else "regular expression"
    return f"The tool's whole input, as raw text that this {kind} matches:\n{grammar['definition']}"


def _function(tool: Mapping[str, Any], *, marked: bool) -> dict[str, Any]:
    """A custom tool as the function it is offered as; `marked`: with its grammar."""
    custom = tool["custom"]
    name = custom["name"]
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {INPUT: {"type": "string", "description": _described(custom)}},
        "required": [INPUT],
        "additionalProperties": False,
    }
    spec = custom.get("format") or {}
    if marked and spec.get("type") == "grammar":
        parameters[FREEFORM] = {"name": name, **spec["grammar"]}
    function: dict[str, Any] = {"name": name, "parameters": parameters, "strict": True}
    if custom.get("description"):
        function["description"] = custom["description"]
    return {"type": "function", "function": function}


def arguments(text: str) -> str:
    """A custom call's input as the arguments of the function it is offered as."""
    return json.dumps({INPUT: text}, ensure_ascii=False)


_HEAD = re.compile(r'\s*\{\s*"' + INPUT + r'"\s*:\s*"')


def unwrap(text: str) -> str:
    """A custom call's input from its arguments (`{"input": "..."}`); for arguments cut
    off, the input as far as it was written."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, Mapping) and isinstance(value.get(INPUT), str):
        return str(value[INPUT])
    head = _HEAD.match(text)
    if head is None:
        return ""
    try:
        return str(scanstring(text, head.end())[0])
    except ValueError:  # cut inside the string: decode what was written
        rest = text[head.end() :]
        for end in range(len(rest), max(len(rest) - 6, 0) - 1, -1):
            try:
                return str(json.loads('"' + rest[:end] + '"'))
            except ValueError:
                continue
    return ""


def _message(message: dict[str, Any]) -> dict[str, Any]:
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not any(is_custom(c) for c in calls):
        return message
    offered = []
    for call in calls:
        if is_custom(call):
            custom = call.get("custom") or {}
            function = {"name": custom.get("name"), "arguments": arguments(custom.get("input", ""))}
            call = {"id": call.get("id"), "type": "function", "function": function}
        offered.append(call)
    return {**message, "tool_calls": offered}


def _choice(choice: Any) -> tuple[Any, set[str] | None]:
    """The neutral choice as the parser's and grammar's, and the names calls may use
    (None: any declared tool)."""
    if not isinstance(choice, Mapping):
        return choice, None
    if choice.get("type") == "allowed_tools":
        allowed = choice["allowed_tools"]
        names = {name_of(ref) for ref in allowed["tools"]}
        return (allowed["mode"] if names else "none"), names
    return {"type": "function", "function": {"name": name_of(choice)}}, None


def offer(request: ChatRequest) -> Offer:
    """What `request` offers the model (see the module docstring)."""
    tools = request.tools or []
    custom = frozenset(name_of(t) for t in tools if is_custom(t))
    choice, allowed = _choice(request.tool_choice)
    prompt = [_function(t, marked=False) if is_custom(t) else t for t in tools]
    calls = [
        _function(t, marked=True) if is_custom(t) else t
        for t in tools
        if allowed is None or name_of(t) in allowed
    ]
    messages = request.messages
    if any(isinstance(m.get("tool_calls"), list) for m in messages):
        messages = [_message(m) for m in messages]
    return Offer(prompt, calls, choice, messages, custom)
