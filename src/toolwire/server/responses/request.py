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
- `custom_tool_call` (`call_id`, `name`, `input`) and `custom_tool_call_output` are
  the same for a custom tool (its call in the neutral custom shape, `offer`);
- a `reasoning` item's text (`content[].text`, else `encrypted_content`, which this
  server fills with the plain reasoning text) becomes the `reasoning_content` of the
  assistant message that follows it.

All of it goes through `render_prompt` with isolation on: delimiter text in a tool's
output or a user's text reaches the model as ordinary sub-word ids.

`text.format` (`json_object`, `json_schema`) becomes the pipeline's `response_format`:
the answer is kept to the schema by the structural tag (the API's field table names
it back `text.format` in errors, and the pipeline's `messages` `input`).

Tools: `function` tools; `custom` (freeform) tools (`core/custom.py`); `namespace`
tools as their member functions (a
`function_call` item's `namespace` maps back to the name its member was offered as);
hosted tools (`HOSTED`: web search, file search, computer use, MCP...) are not offered
and reach the turn as `hosted_tools`. `developer` and `system` messages anywhere in
`input` keep their place.

Every rejection is a `FieldError` (a 400) naming the field (`input[2].call_id`,
`tools[0].type`, `max_output_tokens`). Every top-level field is in `SURFACE`, acted on,
accepted or refused by name (images and files, background mode...); the turn reports
any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolwire.server.core import custom, fields
from toolwire.server.core.errors import FieldError, Path
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.surface import Surface, accepts, acts, refuse, refuses, unknown

__all__ = ["HOSTED", "SURFACE", "ResponsesRequest", "parse_responses", "to_messages"]

_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})
_SUMMARIES = frozenset({"auto", "concise", "detailed"})
_ROLES = frozenset({"user", "assistant", "system", "developer"})
#: Text part types, and the key of their text.
_TEXT_PARTS = {"input_text": "text", "output_text": "text", "text": "text"}
_ENCRYPTED = "reasoning.encrypted_content"
_PLAIN: dict[str, Any] = {"format": {"type": "text"}}
#: The tool types OpenAI runs itself (the SDK's `Tool` union, less functions,
#: namespaces and custom tools).
HOSTED = frozenset(
    {
        "file_search",
        "computer",
        "computer_use",
        "computer_use_preview",
        "web_search",
        "web_search_2025_08_26",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "mcp",
        "code_interpreter",
        "programmatic_tool_calling",
        "image_generation",
        "local_shell",
        "shell",
        "tool_search",
        "apply_patch",
    }
)
_TOOLS = fields.ToolFields(
    type="function",
    default_type=None,
    nested=False,
    schema="parameters",
    schema_required=False,
    served="only 'function', 'custom' and 'namespace' tools",
    hosted=HOSTED.__contains__,
    namespaces=True,
    custom=custom.reader(nested=False),
)
#: `include` values: acted on, or refused; the others name outputs of hosted tools,
#: which never run here (accepted, nothing to include).
_INCLUDE_REFUSED = {"message.output_text.logprobs": "logprobs are not returned here"}
_VERBOSITY = frozenset({"low", "medium", "high"})

#: Every top-level field of a Responses request (docs/server.md's table is made from it).
SURFACE: Surface = {
    "model": acts("must be a served model name (`--served-model-name`)"),
    "input": acts(
        "a string, or `message` (`input_text`/`output_text`), `function_call` (with "
        "`namespace`), `function_call_output`, `custom_tool_call`, `custom_tool_call_output` "
        "and `reasoning` items; `system` and `developer` messages anywhere, in order"
    ),
    "instructions": acts("a system message, first"),
    "tools": acts(
        "`function` and `custom` (freeform: text, Lark or regex grammar) tools; "
        "`namespace` tools as their member functions (calls come back with `namespace`); "
        "hosted tools (`web_search`, `file_search`, `computer`, `code_interpreter`, `mcp`, "
        "`image_generation`...) are not offered, and named in the "
        "`toolwire-hosted-tools-dropped` header (or a 400 with `--hosted-tools refuse`); "
        "`defer_loading` functions are not offered (no tool search runs here)"
    ),
    "tool_choice": acts(
        '`auto`, `none`, `required`, `{"type": "function", "name"}`, '
        '`{"type": "custom", "name"}`, `allowed_tools`'
    ),
    "parallel_tool_calls": acts("`false`: at most one call"),
    "max_output_tokens": acts("bounded by the context left after the prompt"),
    "max_tool_calls": accepts(
        "bounds calls to built-in tools, none of which run here (function calls are not "
        "counted, as OpenAI's)"
    ),
    "temperature": acts("sampling"),
    "top_p": acts("sampling"),
    "reasoning": acts(
        "`effort` (`none`...`xhigh`, `max`) is the template's `reasoning_effort` and "
        "`enable_thinking`; `summary` is accepted (no summary is generated)"
    ),
    "text": acts(
        "`format` (`json_object`, `json_schema`) keeps the answer to the schema; "
        "`verbosity` is accepted (the model's own length)"
    ),
    "stream": acts("server-sent events"),
    "store": acts("`false`: nothing is kept"),
    "previous_response_id": acts("continues a stored response"),
    "include": acts(
        "`reasoning.encrypted_content` returns the reasoning text there; "
        "`message.output_text.logprobs` is refused; hosted tools' outputs are accepted "
        "(none run)"
    ),
    "metadata": acts("echoed in the response"),
    "prompt_cache_key": accepts("the engine's prefix cache needs no key"),
    "prompt_cache_retention": accepts("the engine's prefix cache decides"),
    "prompt_cache_options": accepts("the engine's prefix cache decides"),
    "client_metadata": accepts("kept no further"),
    "safety_identifier": accepts("kept no further"),
    "user": accepts("kept no further"),
    "service_tier": accepts("one tier here (`default` in the response)"),
    "stream_options": accepts("no obfuscation is added"),
    "truncation": refuses("only `disabled`: a prompt past the context is a 400", "disabled"),
    "top_logprobs": refuses("logprobs are not returned on this API", 0),
    "background": refuses("no background mode", False),
    "background_options": refuses("no background mode"),
    "conversation": refuses("no conversations: use `previous_response_id`"),
    "prompt": refuses("no stored prompt templates"),
    "context_management": refuses("no server-side compaction"),
    "moderation": refuses("no moderation"),
    "access_programs": refuses("no access programs"),
    "image": refuses("no image generation"),
}


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
    #: An offered tool name -> (namespace, the member's name) for namespace members.
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: The hosted tools declared (not offered), and the fields no table names.
    hosted: tuple[fields.HostedTool, ...] = ()
    unknown: tuple[str, ...] = ()

    def chat(self, history: list[dict[str, Any]]) -> ChatRequest:
        """The neutral request for this turn, after `history` (the stored earlier items)."""
        offered = {member: name for name, member in self.namespaced.items()}
        messages = to_messages([*history, *self.items], self.instructions, offered)
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
            hosted_tools=self.hosted,
            unknown_fields=self.unknown,
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
        arguments = fields.arguments(raw, "arguments", where)
        item = {
            "type": "function_call",
            "call_id": fields.string(raw, "call_id", where),
            "name": fields.string(raw, "name", where),
            "arguments": arguments,
        }
        namespace = fields.optional_string(raw, "namespace", where, empty=False)
        if namespace is not None:
            item["namespace"] = namespace
        return item
    if kind == "custom_tool_call":
        return {
            "type": "custom_tool_call",
            "call_id": fields.string(raw, "call_id", where),
            "name": fields.string(raw, "name", where),
            "input": fields.string(raw, "input", where, empty=True),
        }
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = fields.content(raw.get("output"), (*where, "output"), _TEXT_PARTS)
        return {
            "type": "function_call_output",
            "call_id": fields.string(raw, "call_id", where),
            "output": output,
        }
    if kind == "reasoning":
        text = "".join(_texts(raw, "content", where))
        _texts(raw, "summary", where)  # checked; no summary is rendered
        encrypted = fields.optional_string(raw, "encrypted_content", where)
        if not text and encrypted:
            text = encrypted
        return {"type": "reasoning", "text": text}
    raise FieldError(
        (*where, "type"),
        f"is {kind!r}, which is not supported (supported: message, function_call, "
        "function_call_output, custom_tool_call, custom_tool_call_output, reasoning)",
    )


def _texts(raw: Mapping[str, Any], key: str, where: Path) -> list[str]:
    """The texts of a reasoning item's parts (`content`, `summary`): a list of objects
    with a string `text` each; [] when absent or null."""
    parts = raw.get(key)
    if parts is None:
        return []
    if not isinstance(parts, list):
        raise FieldError((*where, key), "must be a list of parts")
    texts = []
    for j, part in enumerate(parts):
        if not isinstance(part, Mapping):
            raise FieldError((*where, key, j), "must be an object")
        texts.append(fields.string(part, "text", (*where, key, j), empty=True))
    return texts


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


def _include(body: Mapping[str, Any]) -> list[str]:
    include = fields.strings(body, "include", 64)
    for i, value in enumerate(include):
        if value in _INCLUDE_REFUSED:
            raise FieldError(("include", i), f"is not supported: {_INCLUDE_REFUSED[value]}")
    return include


def _text(body: Mapping[str, Any]) -> Mapping[str, Any]:
    text = fields.mapping(body, "text") or {}
    fields.one_of(text, "verbosity", _VERBOSITY, ("text",))
    return text


def parse_responses(body: Any, *, max_tools: int = 128) -> ResponsesRequest:
    """Validate a decoded JSON body; raises `FieldError` (a 400) naming the field."""
    body = fields.request_object(body)
    model = fields.string(body, "model")
    refuse(body, SURFACE)
    instructions = fields.optional_string(body, "instructions")
    declared = fields.toolset(body, _TOOLS, max_tools)
    tools = declared.tools
    include = _include(body)
    fields.integer(body, "max_tool_calls", low=1)
    for name in ("client_metadata", "metadata", "stream_options"):
        fields.mapping(body, name)
    effort, summary = _reasoning(body)
    text = _text(body)
    text_format = fields.answer_format(text.get("format"), ("text", "format"))
    return ResponsesRequest(
        model=model,
        items=_items(body),
        instructions=instructions,
        tools=tools,
        tool_choice=custom.tool_choice(
            body, fields.tool_names(tools), _custom_names(tools), nested=False
        ),
        parallel_tool_calls=fields.boolean(body, "parallel_tool_calls", True),
        max_output_tokens=fields.budget(body, "max_output_tokens"),
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
        namespaced=declared.namespaced,
        hosted=declared.hosted,
        unknown=unknown(body, SURFACE),
    )


def _custom_names(tools: list[dict[str, Any]]) -> set[str]:
    return {t["custom"]["name"] for t in tools if t.get("type") == "custom"}


def _call(item: dict[str, Any], offered: Mapping[tuple[str, str], str]) -> dict[str, Any]:
    """A call item as an assistant message's tool call (a custom one in its shape; a
    namespaced one under the name its member is offered as)."""
    if item["type"] == "custom_tool_call":
        custom = {"name": item["name"], "input": item["input"]}
        return {"id": item["call_id"], "type": "custom", "custom": custom}
    name = item["name"]
    if "namespace" in item:
        name = offered.get((item["namespace"], name), name)
    function = {"name": name, "arguments": item["arguments"] or "{}"}
    return {"id": item["call_id"], "type": "function", "function": function}


def to_messages(
    items: list[dict[str, Any]],
    instructions: str | None,
    offered: Mapping[tuple[str, str], str] | None = None,
) -> list[dict[str, Any]]:
    """Normalized input items as chat messages (see the module docstring); a namespaced
    call is written under the name its member is offered as (`offered`, else its own)."""
    offered = offered or {}
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
        elif kind in ("function_call", "custom_tool_call"):
            call = _call(item, offered)
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
