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

- a `system` message inside `messages` is a system message in its place (hidden by
  `clear_at: next_user_message` once a later user message exists; its
  `output_config.effort`, the last one given, is the template's `reasoning_effort`);
- a `tool_reference` block in a tool result loads the deferred (`defer_loading`) tool
  it names: offered from then on; in the prompt it reads `Tool loaded: NAME`;
- `context_management`'s `clear_thinking_20251015` keeps the thinking of the last
  `keep` turns that thought (default 1) and drops the rest from the prompt;
- server tools (a versioned type, `mcp_toolset`) are hosted tools: not offered.

Every rejection is a `FieldError` (a 400) naming the field; Anthropic's error shape
spells it first in the message, dotted (`messages.1.content.0.tool_use_id: ...`).
Every top-level field is in `SURFACE` (images, documents, a final assistant message
to continue, `top_k` and the like are refused by name); the turn reports any other.
A tool with a `format` (OpenAI's custom, freeform tools: the Messages API has none; its
tools take an `input_schema`) is refused by name (`_freeform`).
`output_config.format` (a JSON schema) becomes the pipeline's `response_format` (the
API's field table names it back in errors).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolwire.server.core import fields
from toolwire.server.core.errors import FieldError, Path
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.surface import Surface, accepts, acts, refuse, refuses, unknown

__all__ = ["SURFACE", "parse_messages", "thinking_omitted"]

_MAX_STOPS = 16
_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
_TEXT = {"text": "text"}
#: Anthropic's server and Anthropic-defined tools: a versioned type
#: (`web_search_20250305`, `bash_20250124`, `code_execution_20250825`...) or MCP's.
_SERVER_TOOL = re.compile(r"[a-z][a-z0-9_]*_\d{8}|mcp_toolset")
_TOOLS = fields.ToolFields(
    type="custom",
    default_type="custom",
    nested=False,
    schema="input_schema",
    schema_required=True,
    served="only client tools (name, description, input_schema)",
    hosted=lambda kind: _SERVER_TOOL.fullmatch(kind) is not None,
)
#: Context-management edits: the one applied, and those refused (with why).
_CLEAR_THINKING = "clear_thinking_20251015"
_EDITS_REFUSED = {
    "clear_tool_uses_20250919": "tool results are not cleared here: the client keeps its context",
    "compact_20260112": "no server-side compaction",
}

#: Every top-level field of a Messages request (docs/server.md's table is made from it).
SURFACE: Surface = {
    "model": acts("must be a served model name (`--served-model-name`)"),
    "max_tokens": acts("required; bounded by the context left after the prompt"),
    "messages": acts(
        "`user` (`text`, `tool_result` with text and `tool_reference` blocks), `assistant` "
        "(`text`, `thinking`, `tool_use`; `redacted_thinking` dropped) and `system` "
        "messages anywhere, in order (`clear_at`, `output_config.effort` per message); "
        "`cache_control` on any block is accepted (the engine's prefix cache needs no mark)"
    ),
    "system": acts("a system message, first"),
    "tools": acts(
        "client tools (`name`, `description`, `input_schema`, `strict`); a "
        "`defer_loading` tool is offered once a `tool_reference` names it; server tools "
        "(`web_search_*`, `code_execution_*`, `bash_*`, `computer_*`, `mcp_toolset`...) are "
        "not offered, and named in the `toolwire-hosted-tools-dropped` header (or a 400 with "
        "`--hosted-tools refuse`); a tool with a `format` (a freeform tool) is refused"
    ),
    "tool_choice": acts("`auto`, `any`, `tool`, `none`, `disable_parallel_tool_use`"),
    "stop_sequences": acts("matched on the answer's text"),
    "temperature": acts("sampling"),
    "top_p": acts("sampling"),
    "stream": acts("server-sent events"),
    "thinking": acts(
        "`enabled`/`adaptive`/`disabled` is the template's `enable_thinking`; "
        "`budget_tokens` is checked; `display: omitted` returns thinking blocks without "
        "their text"
    ),
    "output_config": acts(
        "`effort` is the template's `reasoning_effort`; `format` keeps the answer to the schema"
    ),
    "context_management": acts(
        "`clear_thinking_20251015` (`keep`) drops older turns' thinking from the prompt; "
        "`clear_tool_uses_20250919` and `compact_20260112` are refused"
    ),
    "metadata": accepts("kept no further"),
    "cache_control": accepts("the engine's prefix cache needs no mark"),
    "service_tier": accepts("one tier here"),
    "speed": accepts("one speed here"),
    "inference_geo": accepts("served here"),
    "diagnostics": accepts("kept no further"),
    "user_profile_id": accepts("kept no further"),
    "workspace_id": accepts("kept no further"),
    "top_k": refuses("no top_k sampling"),
    "mcp_servers": refuses("no MCP servers", []),
    "container": refuses("no containers"),
    "compaction": refuses("no server-side compaction"),
    "fallbacks": refuses("one model here"),
    "fallback_credit_token": refuses("no credits here"),
    "billing_policy": refuses("no billing here"),
    "thread": refuses("no threads: send the conversation"),
}
#: Anthropic's tool_choice types, as the neutral tool_choice's kinds.
_CHOICES = {"auto": "auto", "none": "none", "any": "required", "tool": "named"}


def _blocks(content: list[Any], where: Path) -> Iterator[tuple[Path, Any, Any]]:
    """Each block of a message's content: its path, its type, the block."""
    for j, block in enumerate(content):
        if not isinstance(block, Mapping):
            raise FieldError((*where, j), "must be an object (a content block)")
        yield (*where, j), block.get("type"), block


def _result(result: Any, at: Path, referenced: list[str]) -> str:
    """A tool result's text; a `tool_reference` block names a tool it loads."""
    if not isinstance(result, list):
        return fields.content(result, at, _TEXT)
    texts = []
    for j, part in enumerate(result):
        if isinstance(part, Mapping) and part.get("type") == "tool_reference":
            name = fields.string(part, "tool_name", (*at, j))
            referenced.append(name)
            texts.append(f"Tool loaded: {name}")
        else:
            texts.append(fields.content([part], (*at, j), _TEXT) if part is not None else "")
    return "\n".join(texts)


def _user(content: list[Any], where: Path, referenced: list[str]) -> list[dict[str, Any]]:
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
            text = _result(result, (*at, "content"), referenced) if result is not None else ""
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


@dataclass
class _Conversation:
    """What the messages say besides the chat messages themselves."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    #: Tools named by `tool_reference` blocks (deferred tools to offer).
    referenced: list[str] = field(default_factory=list)
    #: The effort of the last system message that sets one (per-turn control).
    effort: str | None = None


def _system(message: Mapping[str, Any], where: Path, later_user: bool) -> str | None:
    """A system message's text, None when `clear_at` hides it by now."""
    clear = fields.one_of(message, "clear_at", ("next_user_message", "never"), where)
    content = message.get("content")
    text = "" if content is None else fields.content(content, (*where, "content"), _TEXT)
    return None if clear == "next_user_message" and later_user else text


def _messages(body: Mapping[str, Any]) -> _Conversation:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise FieldError(("messages",), "must be a non-empty list of messages")
    out = _Conversation()
    system = body.get("system")
    if system is not None:
        text = fields.content(system, ("system",), _TEXT)
        if text:
            out.messages.append({"role": "system", "content": text})
    roles = [m.get("role") if isinstance(m, Mapping) else None for m in raw]
    for i, message in enumerate(raw):
        where: Path = ("messages", i)
        if not isinstance(message, Mapping):
            raise FieldError(where, "must be an object")
        role = fields.one_of(message, "role", ("user", "assistant", "system"), where, required=True)
        if role == "system":
            config = fields.mapping(message, "output_config", where) or {}
            effort = fields.one_of(config, "effort", _EFFORTS, (*where, "output_config"))
            out.effort = effort or out.effort
            said = _system(message, where, "user" in roles[i + 1 :])
            if said:
                out.messages.append({"role": "system", "content": said})
            continue
        content = message.get("content")
        if content is None and role == "assistant":
            content = []
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise FieldError((*where, "content"), "must be a string or a list of content blocks")
        if role == "user":
            out.messages += _user(content, (*where, "content"), out.referenced)
        else:
            out.messages.append(_assistant(content, (*where, "content")))
    if roles[-1] == "assistant":
        raise FieldError(
            ("messages", len(raw) - 1),
            "is an assistant message: continuing a prefilled response is not supported",
        )
    return out


def _context_management(body: Mapping[str, Any], messages: list[dict[str, Any]]) -> None:
    """Apply `clear_thinking_20251015`: only the last `keep` assistant turns that
    thought keep their reasoning in the prompt (`all`: every one)."""
    config = fields.mapping(body, "context_management")
    if config is None:
        return
    at: Path = ("context_management",)
    edits = config.get("edits") or []
    if not isinstance(edits, list):
        raise FieldError((*at, "edits"), "must be a list of edits")
    for i, edit in enumerate(edits):
        where: Path = (*at, "edits", i)
        if not isinstance(edit, Mapping):
            raise FieldError(where, "must be an object")
        kind = edit.get("type")
        if isinstance(kind, str) and kind in _EDITS_REFUSED:
            raise FieldError((*where, "type"), f"is {kind!r}: {_EDITS_REFUSED[kind]}")
        if kind != _CLEAR_THINKING:
            choices = [_CLEAR_THINKING, *_EDITS_REFUSED]
            raise FieldError((*where, "type"), f"must be one of {choices}")
        keep = _kept_turns(edit.get("keep", {"type": "thinking_turns", "value": 1}), where)
        if keep is None:
            continue
        thinking = [m for m in messages if m.get("reasoning_content")]
        for message in thinking[: max(len(thinking) - keep, 0)]:
            del message["reasoning_content"]


def _kept_turns(keep: Any, where: Path) -> int | None:
    """`keep` as a number of turns (None: all)."""
    if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return None
    if isinstance(keep, Mapping) and keep.get("type") == "thinking_turns":
        turns = fields.integer(keep, "value", (*where, "keep"), low=0)
        if turns is not None:
            return turns
    shapes = """'all', {"type": "all"} or {"type": "thinking_turns", "value": n}"""
    raise FieldError((*where, "keep"), f"must be {shapes}")


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
    fields.one_of(thinking, "display", ("summarized", "omitted"), at)
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


def _freeform(body: Mapping[str, Any]) -> None:
    """A 400 for a tool declared with a `format`: a freeform tool, which this API has not."""
    declared = body.get("tools")
    for i, tool in enumerate(declared if isinstance(declared, list) else []):
        if isinstance(tool, Mapping) and "format" in tool:
            raise FieldError(
                ("tools", i, "format"),
                "is not supported: the Messages API has no freeform (grammar) tools; "
                "declare the tool's input with an input_schema",
            )


def thinking_omitted(body: Mapping[str, Any]) -> bool:
    """Whether thinking blocks are returned without their text (`display: omitted`)."""
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("display") == "omitted"


def _offered(declared: fields.ToolSet, referenced: list[str]) -> list[dict[str, Any]]:
    """The tools offered: the declared ones, and the deferred ones a `tool_reference`
    named (in declaration order)."""
    for name in referenced:
        if name not in declared.deferred and name not in fields.tool_names(declared.tools):
            raise FieldError(("messages",), f"references the tool {name!r}, not in 'tools'")
    loaded = [tool for name, tool in declared.deferred.items() if name in referenced]
    return [*declared.tools, *loaded]


def parse_messages(body: Any, *, count_only: bool = False, max_tools: int = 128) -> ChatRequest:
    """Validate a decoded body; `count_only` for count_tokens (no max_tokens needed)."""
    body = fields.request_object(body)
    model = fields.string(body, "model")
    refuse(body, SURFACE)
    _freeform(body)
    max_tokens = fields.budget(body, "max_tokens")
    if max_tokens is None and not count_only:
        raise FieldError(("max_tokens",), "is required")
    conversation = _messages(body)
    messages = conversation.messages
    _context_management(body, messages)
    declared = fields.toolset(body, _TOOLS, max_tools)
    tools = _offered(declared, conversation.referenced)
    choice, parallel = _tool_choice(body, tools)
    fields.mapping(body, "metadata")  # checked; this server keeps no metadata
    effort, output_format = _output_config(body)
    if conversation.effort is not None:
        effort = {"reasoning_effort": conversation.effort}
    return ChatRequest(
        model=model,
        messages=messages,
        tools=tools or None,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        max_tokens=max_tokens,
        temperature=fields.number(body, "temperature", 0.0, 1.0),
        top_p=fields.number(body, "top_p", 0.0, 1.0),
        stop=fields.stops(body, "stop_sequences", _MAX_STOPS),
        stream=fields.boolean(body, "stream", False),
        template_kwargs={**effort, **_thinking(body, max_tokens)},
        response_format=output_format,
        hosted_tools=declared.hosted,
        unknown_fields=unknown(body, SURFACE),
    )
