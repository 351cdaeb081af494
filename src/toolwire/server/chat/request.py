"""Validation of a Chat Completions request body into the neutral `ChatRequest`.

Data flow::

    body (bounded by the turn: nesting, Unicode) --parse_request()--> ChatRequest

The neutral request speaks Chat Completions' names and shapes, so messages and tools
pass as the client wrote them once checked. Every rejection is a `FieldError` naming
the offending field in `param`, as OpenAI does (`messages[2].role`, `tool_choice`,
`max_tokens`). Every field is in `SURFACE` (acted on, accepted, or refused by name);
a field it does not name is logged and counted by the turn, never silently dropped.
`n` and `logprobs`/`top_logprobs` become the neutral request's `n` and
`top_logprobs`; an engine that cannot honour them refuses them at planning.
`response_format` is kept as the JSON schema the answer must follow (`json_object`:
any object), or rejected; it is never ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolwire.server.core import custom, fields
from toolwire.server.core.errors import FieldError, Path
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.surface import Surface, accepts, acts, refuse, refuses, unknown

__all__ = ["MAX_CHOICES", "MAX_TOP_LOGPROBS", "SURFACE", "parse_request"]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})
_MAX_STOPS = 4
#: The fields an assistant message's reasoning may come in (the prompt layer's).
_REASONING = ("reasoning_content", "reasoning", "thinking")
#: The most choices one request may ask for, and the most alternatives per token.
MAX_CHOICES = 16
MAX_TOP_LOGPROBS = 20

#: Every top-level field of a Chat Completions request (docs/server.md's table is made
#: from it).
SURFACE: Surface = {
    "model": acts("must be a served model name (`--served-model-name`)"),
    "messages": acts(
        "`system`, `developer`, `user`, `assistant` (its `content` may be absent or null) "
        "and `tool` messages, with string or text-part content"
    ),
    "tools": acts("`function` and `custom` (freeform: text, Lark or regex grammar) tools"),
    "tool_choice": acts(
        "`auto`, `none`, `required`, a named function or custom tool, `allowed_tools`"
    ),
    "parallel_tool_calls": acts("`false`: at most one call"),
    "max_completion_tokens": acts("bounded by the context left after the prompt"),
    "max_tokens": acts("the same, when `max_completion_tokens` is absent"),
    "n": acts(f"up to {MAX_CHOICES} choices, each its own generation"),
    "logprobs": acts("each returned token's log probability, from the ids the parser saw"),
    "top_logprobs": acts(f"up to {MAX_TOP_LOGPROBS} alternatives per token"),
    "temperature": acts("sampling"),
    "top_p": acts("sampling"),
    "seed": acts("sampling (choice `i` of `n` uses `seed + i`)"),
    "stop": acts("up to 4, matched on the answer's text"),
    "stream": acts("server-sent events"),
    "stream_options": acts("`include_usage`"),
    "reasoning_effort": acts("the template's `reasoning_effort` and `enable_thinking`"),
    "chat_template_kwargs": acts("passed to the chat template"),
    "response_format": acts("`json_object`, `json_schema`: the answer kept to the schema"),
    "web_search_options": acts(
        "a hosted tool: not offered, named in the `toolwire-hosted-tools-dropped` header "
        "(or a 400 with `--hosted-tools refuse`)"
    ),
    "metadata": accepts("kept no further"),
    "store": accepts("nothing is stored (no stored-completions routes)"),
    "user": accepts("kept no further"),
    "safety_identifier": accepts("kept no further"),
    "service_tier": accepts("one tier here"),
    "prompt_cache_key": accepts("the engine's prefix cache needs no key"),
    "prompt_cache_retention": accepts("the engine's prefix cache decides"),
    "prompt_cache_options": accepts("the engine's prefix cache decides"),
    "verbosity": accepts("the model's own length"),
    "functions": refuses("legacy function calling: send `tools`"),
    "function_call": refuses("legacy function calling: send `tool_choice`"),
    "frequency_penalty": refuses("no penalties in sampling here", 0, 0.0),
    "presence_penalty": refuses("no penalties in sampling here", 0, 0.0),
    "logit_bias": refuses("no logit bias here", {}),
    "audio": refuses("no audio output"),
    "modalities": refuses("text only", ["text"]),
    "prediction": refuses("no predicted outputs"),
    "moderation": refuses("no moderation"),
}
_TOOLS = fields.ToolFields(
    type="function",
    default_type="function",
    nested=True,
    schema="parameters",
    schema_required=False,
    served="only 'function' and 'custom' tools",
    custom=custom.reader(nested=True),
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
        for key in (*_REASONING, "name", "tool_call_id"):
            fields.optional_string(message, key, where)
        copy = dict(message)
        calls = message.get("tool_calls")
        if calls is not None:
            if role != "assistant" or not isinstance(calls, list):
                raise FieldError((*where, "tool_calls"), "must be a list, on assistant messages")
            copy["tool_calls"] = [_call(c, (*where, "tool_calls", j)) for j, c in enumerate(calls)]
        if message.get("content") is None and role != "assistant":
            raise FieldError((*where, "content"), "must be a string or a list of text parts")
        # an assistant turn that only called tools may omit its content (model_dump's
        # exclude_none): templates read `message.content`, so it is there, null
        copy["content"] = message.get("content")
        out.append(copy)
    return out


def _call(call: Any, at: Path) -> dict[str, Any]:
    """A history call, checked (its arguments as JSON text: `fields.arguments`; a custom
    call's input as text)."""
    if not isinstance(call, Mapping):
        raise FieldError(at, "must be an object")
    fields.optional_string(call, "id", at)
    if fields.one_of(call, "type", ("function", "custom"), at) == "custom":
        spec = fields.mapping(call, "custom", at)
        if spec is None:
            raise FieldError((*at, "custom"), "must be an object")
        where = (*at, "custom")
        name = fields.string(spec, "name", where)
        text = fields.string(spec, "input", where, empty=True)
        return {**call, "custom": {**spec, "name": name, "input": text}}
    function = fields.mapping(call, "function", at)
    if function is None:
        raise FieldError((*at, "function"), "must be an object")
    where = (*at, "function")
    checked = {**function, "name": fields.string(function, "name", where)}
    checked["arguments"] = fields.arguments(function, "arguments", where)
    return {**call, "function": checked}


def _logprobs(body: Mapping[str, Any]) -> int | None:
    """The alternatives per token when `logprobs` is on (0: only the chosen one)."""
    top = fields.integer(body, "top_logprobs", low=0)
    if top is not None and top > MAX_TOP_LOGPROBS:
        raise FieldError(("top_logprobs",), f"must be at most {MAX_TOP_LOGPROBS}, got {top}")
    if not fields.boolean(body, "logprobs", False):
        if top is not None:
            raise FieldError(("top_logprobs",), "needs logprobs=true")
        return None
    return top or 0


def _hosted(body: Mapping[str, Any]) -> tuple[fields.HostedTool, ...]:
    if fields.mapping(body, "web_search_options") is None:
        return ()
    return (fields.HostedTool(("web_search_options",), "web_search"),)


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
    refuse(body, SURFACE)
    messages = _messages(body)
    tools = fields.tools(body, _TOOLS, max_tools)
    customs = {t["custom"]["name"] for t in tools if t.get("type") == "custom"}
    tool_choice = custom.tool_choice(body, fields.tool_names(tools), customs, nested=True)
    response_format = fields.answer_format(
        body.get("response_format"), ("response_format",), schema_at=("json_schema", "schema")
    )
    n = fields.integer(body, "n", low=1) or 1
    if n > MAX_CHOICES:
        raise FieldError(("n",), f"must be at most {MAX_CHOICES}, got {n}")
    max_tokens = fields.budget(body, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = fields.budget(body, "max_tokens")
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
        seed=fields.seed(body, "seed"),
        stop=fields.stops(body, "stop", _MAX_STOPS, single=True),
        stream=stream,
        include_usage=fields.boolean(options or {}, "include_usage", False, ("stream_options",)),
        template_kwargs=_template_kwargs(body),
        response_format=response_format,
        hosted_tools=_hosted(body),
        unknown_fields=unknown(body, SURFACE),
        n=n,
        top_logprobs=_logprobs(body),
    )
