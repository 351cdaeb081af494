"""Reading a request body's fields: one validator per kind of value, for every API.

Each reader takes the object holding the field, the field's key and the object's path
(`at`, as data: `("tools", 0)`), and returns the value in the neutral request's shape,
or raises `FieldError(path, problem)`; each API's error shape spells the path its own
way. Where the APIs write the same thing differently (a tool's schema is `parameters`
in OpenAI's APIs and `input_schema` in Anthropic's; a named `tool_choice` keeps its name
under `function` in Chat Completions only), the reader takes that as a parameter
(`ToolFields`, `nested`) instead of being copied.

`check_body` is the bound every body passes first (the turn runs it for every API):
nesting depth, strings that are not Unicode text (lone surrogates, which JSON's
`\\ud800` escapes can produce), and numbers JSON has not got (`NaN`, `Infinity`, and
`1e400`, which Python's decoder reads as infinity). Which top-level fields an API
knows is its table (`core/surface.py`); a field no table names is reported by the
turn, not here.

One rule per kind of field, for every API: an output budget (`budget`) is an integer
of at least 1, and more than any engine can produce is cut, not refused; a seed
(`seed`) is a signed 64-bit integer (vLLM's bound), else a 400; a history call's
arguments (`arguments`) are a JSON object, as text or as an object, else a 400, but
for the text of an object cut off before its end (what a call cut by the token limit
leaves), which is accepted and rendered as text (`history`).

Tools (`toolset`): a tool of the API's served type is read into the neutral shape; a
`namespace` (Responses) is its member functions, each offered under its own name (or
`namespace__name` where that is taken), remembered so the answer names the member
and its namespace as the client declared them; a tool of a type the provider hosts
(`ToolFields.hosted`) is a `HostedTool`, not offered (the turn drops or refuses it);
a `defer_loading` tool is kept aside until the conversation references it; a
`custom` (freeform) tool, where the API has them (`ToolFields.custom`), is read by its
reader (`core/custom.py`) and offered under its name.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolwire.nesting import MAX_DEPTH, json_too_deep
from toolwire.server.core.errors import FieldError, Path
from toolwire.syntax.jsonscan import JsonValue
from toolwire.tools import tool_function

__all__ = [
    "MAX_OUTPUT_TOKENS",
    "MAX_STOP_CHARS",
    "HostedTool",
    "ToolFields",
    "ToolSet",
    "answer_format",
    "arguments",
    "boolean",
    "budget",
    "check_body",
    "chosen",
    "content",
    "integer",
    "mapping",
    "number",
    "one_of",
    "optional_string",
    "request_object",
    "seed",
    "stops",
    "string",
    "strings",
    "tool_choice",
    "tool_names",
    "tools",
    "toolset",
]

_SURROGATE = re.compile(r"[\ud800-\udfff]")

#: The largest output budget sent to an engine: a 32-bit count (more is cut to it; the
#: engine's context cuts it further).
MAX_OUTPUT_TOKENS = 2**31 - 1
#: The longest stop string: the matcher holds every proper prefix of each one, so its
#: memory grows with the square of the length (16 of this length: 8 M characters).
MAX_STOP_CHARS = 1_000
#: A seed's range: a signed 64-bit integer, as vLLM takes it.
_SEED = (-(2**63), 2**63 - 1)
#: How deep a history call's arguments may nest when given as text: the prompt
#: layer's bound (`nesting.MAX_DEPTH`), counted from the message, where they sit 4
#: levels down (`tool_calls`, the call, `function`, `arguments`).
ARGUMENTS_DEPTH = MAX_DEPTH - 4


def _alternatives(options: Collection[str]) -> str:
    quoted = [f"'{o}'" for o in options]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


# -- the body ---------------------------------------------------------------------


def check_body(body: Any, max_nesting: int) -> None:
    """Reject a body nested deeper than `max_nesting`, or holding a string that is not
    Unicode text; the error names the field. Iterative: no depth reaches the stack."""
    stack: list[tuple[Any, Path]] = [(body, ())]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise FieldError(where, "holds a lone surrogate")
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise FieldError(where, "is not a finite number (JSON has no NaN or Infinity)")
        if not isinstance(value, dict | list):
            continue
        if len(where) >= max_nesting:
            raise FieldError(where, f"is nested deeper than {max_nesting} levels")
        if isinstance(value, list):
            stack.extend((item, (*where, i)) for i, item in enumerate(value))
            continue
        for key, item in value.items():
            if _SURROGATE.search(key):
                raise FieldError(where, "has a key that holds a lone surrogate")
            stack.append((item, (*where, key)))


def request_object(body: Any) -> Mapping[str, Any]:
    """The decoded body, which must be a JSON object."""
    if not isinstance(body, Mapping):
        raise FieldError((), "must be a JSON object")
    return body


# -- scalars ----------------------------------------------------------------------


def boolean(obj: Mapping[str, Any], key: str, default: bool, at: Path = ()) -> bool:
    """`obj[key]` as a boolean; `default` when absent or null."""
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise FieldError((*at, key), "must be a boolean")
    return value


def integer(
    obj: Mapping[str, Any],
    key: str,
    at: Path = (),
    *,
    low: int | None = None,
    high: int | None = None,
) -> int | None:
    """`obj[key]` as an integer in [low, high]; None when absent or null."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError((*at, key), "must be an integer")
    if low is not None and value < low:
        raise FieldError((*at, key), f"must be at least {low}, got {_shown(value)}")
    if high is not None and value > high:
        raise FieldError((*at, key), f"must be at most {high}, got {_shown(value)}")
    return value


def _shown(value: int) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:8]}... ({len(text.lstrip('-'))} digits)"


def budget(obj: Mapping[str, Any], key: str, at: Path = ()) -> int | None:
    """`obj[key]`, an output budget in tokens: an integer of at least 1, cut to
    `MAX_OUTPUT_TOKENS` (no engine produces more; each cuts it to its context)."""
    value = integer(obj, key, at, low=1)
    return None if value is None else min(value, MAX_OUTPUT_TOKENS)


def seed(obj: Mapping[str, Any], key: str, at: Path = ()) -> int | None:
    """`obj[key]`, a sampling seed: a signed 64-bit integer (vLLM's bound)."""
    return integer(obj, key, at, low=_SEED[0], high=_SEED[1])


def number(
    obj: Mapping[str, Any], key: str, low: float, high: float, at: Path = ()
) -> float | None:
    """`obj[key]` as a float in [low, high]; None when absent or null."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError((*at, key), "must be a number")
    if not low <= value <= high:
        raise FieldError((*at, key), f"must be between {low:g} and {high:g}, got {value}")
    return float(value)


def string(obj: Mapping[str, Any], key: str, at: Path = (), *, empty: bool = False) -> str:
    """`obj[key]`, a string that must be given (non-empty unless `empty`)."""
    value = obj.get(key)
    if not isinstance(value, str) or not (value or empty):
        raise FieldError((*at, key), "must be a string" if empty else "must be a non-empty string")
    return value


def optional_string(
    obj: Mapping[str, Any], key: str, at: Path = (), *, empty: bool = True
) -> str | None:
    """`obj[key]` as a string; None when absent or null."""
    return None if obj.get(key) is None else string(obj, key, at, empty=empty)


def one_of(
    obj: Mapping[str, Any],
    key: str,
    options: Collection[str],
    at: Path = (),
    *,
    required: bool = False,
) -> Any:
    """`obj[key]`, one of `options`; None when absent or null, unless `required`."""
    value = obj.get(key)
    if (value is not None or required) and (not isinstance(value, str) or value not in options):
        raise FieldError((*at, key), f"must be one of {sorted(options)}")
    return value


def mapping(obj: Mapping[str, Any], key: str, at: Path = ()) -> Mapping[str, Any] | None:
    """`obj[key]`, an object; None when absent or null."""
    value = obj.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise FieldError((*at, key), "must be an object")
    return value


def strings(
    obj: Mapping[str, Any], key: str, most: int, at: Path = (), *, single: bool = False
) -> list[str]:
    """`obj[key]`: a list of at most `most` non-empty strings (or one string, if
    `single`); [] when absent or null."""
    value = obj.get(key)
    if value is None:
        return []
    values = [value] if single and isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(s, str) and s for s in values):
        also = " (or one)" if single else ""
        raise FieldError((*at, key), f"must be a list of non-empty strings{also}")
    if len(values) > most:
        raise FieldError((*at, key), f"takes at most {most} strings")
    return list(values)


def stops(
    obj: Mapping[str, Any], key: str, most: int, at: Path = (), *, single: bool = False
) -> list[str]:
    """`obj[key]` as stop strings (`strings`), each at most `MAX_STOP_CHARS` long."""
    values = strings(obj, key, most, at, single=single)
    for i, stop in enumerate(values):
        if len(stop) > MAX_STOP_CHARS:
            where = (*at, key) if isinstance(obj.get(key), str) else (*at, key, i)
            limit = f"more than the {MAX_STOP_CHARS:,} a stop string may have"
            raise FieldError(where, f"is {len(stop):,} characters, {limit}")
    return values


def content(value: Any, at: Path, parts: Mapping[str, str]) -> str:
    """A string, or a list of text parts joined with "\\n"; `parts` maps each accepted
    part type to the key holding its text (`{"text": "text"}`)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise FieldError(at, "must be a string or a list of content parts")
    texts = []
    for j, part in enumerate(value):
        if not isinstance(part, Mapping):
            raise FieldError((*at, j), "must be an object")
        kind = part.get("type")
        if not isinstance(kind, str) or kind not in parts:
            raise FieldError(
                (*at, j, "type"),
                f"is {kind!r}, which is not supported here (text parts only: "
                f"{', '.join(sorted(parts))})",
            )
        texts.append(string(part, parts[kind], (*at, j), empty=True))
    return "\n".join(texts)


# -- history calls ------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def arguments(obj: Mapping[str, Any], key: str, at: Path = ()) -> str:
    """`obj[key]`, a history call's arguments, as JSON text: an object given as text
    (absent, null or "" is `{}`) or as an object; or the text of an object cut off
    before its end (a call cut by the token limit while its arguments streamed leaves
    it), kept as written (`history` renders that call as text). Anything else (another
    JSON value, `NaN`, text after the object, nesting past `ARGUMENTS_DEPTH`) is a 400.
    """
    value = obj.get(key)
    where = (*at, key)
    if value is None or value == "":
        return "{}"
    if isinstance(value, Mapping):  # the body's own bounds applied (check_body)
        return json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str):
        raise FieldError(where, "must be a string holding a JSON object")
    if json_too_deep(value, ARGUMENTS_DEPTH):
        raise FieldError(where, f"is nested deeper than {ARGUMENTS_DEPTH} levels")
    scan = JsonValue()
    scan.feed(value)
    if not scan.done and value.lstrip().startswith("{"):
        return value  # an object the model did not finish
    try:
        parsed = json.loads(value, parse_constant=_no_constant, parse_float=_finite)
    except ValueError as exc:
        raise FieldError(where, f"is not valid JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise FieldError(where, f"must be a JSON object, not {type(parsed).__name__}")
    try:
        check_body(parsed, ARGUMENTS_DEPTH + 1)
    except FieldError as exc:
        raise FieldError(where, f"{exc.problem} (at {exc.param})") from None
    return value


# -- tools and tool_choice ----------------------------------------------------------


@dataclass(frozen=True)
class ToolFields:
    """How one API writes a tool. The reader returns the neutral shape:
    `{"type": "function", "function": {"name", "description", "parameters", "strict"}}`."""

    #: The one tool type served, and the type of a tool that names none (None: it must).
    type: str
    default_type: str | None
    #: Name and schema sit under `function` (Chat Completions, which also takes the
    #: function object bare, and is passed on as written), or at the top.
    nested: bool
    #: The key of the arguments' JSON schema, and whether a tool must give one.
    schema: str
    schema_required: bool
    #: What to say of another tool type: which tools are served instead.
    served: str
    #: The reader of a `{"type": "custom"}` (freeform) tool, where the API has them
    #: (`custom.reader`): it returns the neutral custom tool.
    custom: Callable[[Mapping[str, Any], Path], dict[str, Any]] | None = None
    #: Which other tool types are ones the provider hosts (web search, file search,
    #: computer use, MCP...): a `HostedTool` the turn drops or refuses, not an error
    #: here. Any other type is an error naming what is served.
    hosted: Callable[[str], bool] = lambda kind: False
    #: Whether `{"type": "namespace", "name", "tools": [...]}` groups served tools.
    namespaces: bool = False


@dataclass(frozen=True)
class HostedTool:
    """A declared tool the provider would run and this server cannot."""

    #: Where it is declared (`("tools", 7)`).
    path: Path
    #: Its type (`web_search`, `web_search_20250305`, `mcp`...).
    type: str


@dataclass(frozen=True)
class ToolSet:
    """The declared tools, sorted out."""

    #: The tools offered to the model, in the neutral shape (names unique).
    tools: list[dict[str, Any]] = field(default_factory=list)
    #: The hosted tools, which the model is not offered (the turn's policy decides).
    hosted: tuple[HostedTool, ...] = ()
    #: An offered name -> (namespace, the member's name) for namespace members.
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Tools declared with `defer_loading: true`, by name, in the neutral shape: not
    #: offered until the conversation references them (Anthropic's tool search).
    deferred: dict[str, dict[str, Any]] = field(default_factory=dict)


def tools(body: Mapping[str, Any], shape: ToolFields, max_tools: int) -> list[dict[str, Any]]:
    """The declared tools in the neutral shape ([] when none); names are unique."""
    return toolset(body, shape, max_tools).tools


def toolset(body: Mapping[str, Any], shape: ToolFields, max_tools: int) -> ToolSet:
    """The declared tools: offered (namespace members under their own names, or
    `namespace__name` where that name is taken), hosted, deferred."""
    declared = body.get("tools")
    if declared is None:
        return ToolSet()
    if not isinstance(declared, list):
        raise FieldError(("tools",), "must be a list of tools")
    if len(declared) > max_tools:
        raise FieldError(("tools",), f"holds {len(declared)} tools; at most {max_tools}")
    out = ToolSet()
    hosted: list[HostedTool] = []
    members: list[tuple[str, str, str, dict[str, Any]]] = []  # namespace, name, its note
    names: set[str] = set()
    for i, tool in enumerate(declared):
        where: Path = ("tools", i)
        if not isinstance(tool, Mapping):
            raise FieldError(where, "must be an object")
        kind = tool.get("type", shape.default_type)
        if kind == "custom" and shape.custom is not None and kind != shape.type:
            freeform = shape.custom(tool, where)
            name = freeform["custom"]["name"]
            if name in names:
                raise FieldError((*where, "name"), f"is {name!r}, which is declared twice")
            names.add(name)
            out.tools.append(freeform)
            continue
        if kind == "namespace" and shape.namespaces:
            namespace = string(tool, "name", where)
            note = optional_string(tool, "description", where) or ""
            inner = tool.get("tools")
            if not isinstance(inner, list) or not inner:
                raise FieldError((*where, "tools"), "must be a non-empty list of tools")
            for j, member in enumerate(inner):
                at: Path = (*where, "tools", j)
                if not isinstance(member, Mapping):
                    raise FieldError(at, "must be an object")
                if member.get("type", shape.default_type) != shape.type:
                    raise FieldError(
                        (*at, "type"), f"is {member.get('type')!r}: {shape.served} in a namespace"
                    )
                entry = _tool(member, at, shape)
                members.append((namespace, tool_function(entry)["name"], note, entry))
            continue
        if kind != shape.type:
            if isinstance(kind, str) and shape.hosted(kind):
                hosted.append(HostedTool(where, kind))
                continue
            raise FieldError(
                (*where, "type"), f"is {kind!r}, which is not supported: {shape.served}"
            )
        entry = _tool(tool, where, shape)
        name = tool_function(entry)["name"]
        if name in names:
            at = (*where, "function") if shape.nested and "function" in tool else where
            raise FieldError((*at, "name"), f"is {name!r}, which is declared twice")
        names.add(name)
        deferred = tool.get("defer_loading")
        if deferred is not None and not isinstance(deferred, bool):
            raise FieldError((*where, "defer_loading"), "must be a boolean")
        if deferred:
            out.deferred[name] = entry
        else:
            out.tools.append(entry)
    for namespace, name, note, entry in members:
        offered = name if name not in names else f"{namespace}__{name}"
        if offered in names:
            raise FieldError(("tools",), f"names {namespace}.{name} twice")
        names.add(offered)
        function = dict(tool_function(entry))
        function["name"] = offered
        if note:
            function["description"] = f"{note}\n{function.get('description') or ''}".rstrip()
        out.tools.append({"type": "function", "function": function})
        out.namespaced[offered] = (namespace, name)
    return ToolSet(out.tools, tuple(hosted), out.namespaced, out.deferred)


def _tool(tool: Mapping[str, Any], where: Path, shape: ToolFields) -> dict[str, Any]:
    """One served tool, checked, in the neutral shape."""
    function, at = tool, where
    if shape.nested and "function" in tool:
        function, at = tool["function"], (*where, "function")
        if not isinstance(function, Mapping):
            raise FieldError(at, "must be an object")
    name = string(function, "name", at)
    schema = mapping(function, shape.schema, at)
    if schema is None and shape.schema_required:
        raise FieldError((*at, shape.schema), "must be a JSON schema object")
    strict = function.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise FieldError((*at, "strict"), "must be a boolean")
    if shape.nested:
        return dict(tool)
    entry: dict[str, Any] = {"name": name}
    if isinstance(function.get("description"), str):
        entry["description"] = function["description"]
    if schema is not None:
        entry["parameters"] = dict(schema)
    if strict is not None:
        entry["strict"] = strict
    return {"type": "function", "function": entry}


def tool_names(tools: list[dict[str, Any]]) -> set[str]:
    """The names of neutral-shape tools (custom ones too)."""
    return {
        str(t["custom"]["name"] if t.get("type") == "custom" else tool_function(t)["name"])
        for t in tools
    }


def chosen(kind: str, name: Any, names: Collection[str], at: Path, name_at: Path) -> Any:
    """The neutral tool_choice for `kind` ("auto", "none", "required", or "named" with
    the tool's `name`), checked against the declared `names`."""
    if kind in ("required", "named") and not names:
        raise FieldError(at, "needs a non-empty 'tools' list")
    if kind != "named":
        return kind
    if not isinstance(name, str) or name not in names:
        raise FieldError(name_at, f"names {name!r}, which is not in 'tools'")
    return {"type": "function", "function": {"name": name}}


def tool_choice(body: Mapping[str, Any], names: Collection[str], *, nested: bool) -> Any:
    """OpenAI's `tool_choice` ("auto", "none", "required" or a named function, whose
    name is under `function` when `nested`), as the neutral tool_choice."""
    choice = body.get("tool_choice")
    at: Path = ("tool_choice",)
    if choice is None:
        return "auto"
    if choice in ("auto", "none", "required"):
        return chosen(choice, None, names, at, at)
    if isinstance(choice, Mapping) and choice.get("type", "function") == "function":
        holder = choice.get("function") if nested else choice
        if isinstance(holder, Mapping):
            return chosen("named", holder.get("name"), names, at, at)
    name = '"function": {"name": ...}' if nested else '"name": ...'
    raise FieldError(
        at, f"""must be 'auto', 'none', 'required' or {{"type": "function", {name}}}"""
    )


# -- the answer's format ------------------------------------------------------------


def answer_format(
    spec: Any,
    at: Path,
    *,
    kinds: Collection[str] = ("text", "json_object", "json_schema"),
    schema_at: tuple[str, ...] = ("schema",),
) -> dict[str, Any] | None:
    """The JSON schema an answer format (`{"type": "json_schema", ...}`) asks the
    answer to follow: `json_object` any object, `text` None (plain text); the schema
    of `json_schema` is at `schema_at` inside the format."""
    if spec is None:
        return None
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    if not isinstance(kind, str) or kind not in kinds:
        raise FieldError(at, f"must have the type {_alternatives(list(kinds))}")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    holder: Any = spec
    for key in schema_at[:-1]:
        holder = holder.get(key) if isinstance(holder, Mapping) else None
    schema = holder.get(schema_at[-1]) if isinstance(holder, Mapping) else None
    if not isinstance(schema, Mapping):
        raise FieldError((*at, *schema_at), "must be a JSON schema object")
    return dict(schema)
