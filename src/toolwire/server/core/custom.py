"""Reading custom (freeform) tools and the `tool_choice` forms that name them.

OpenAI's APIs declare a tool whose input is raw text, optionally shaped by a grammar,
as a custom tool; Codex's `apply_patch` is one (a Lark grammar of its patch format).
Each API writes it its own way; the reader returns the neutral shape, Chat
Completions'::

    Responses  {"type": "custom", "name", "description",
                "format": {"type": "text"} | {"type": "grammar", "syntax", "definition"}}
    Chat       {"type": "custom", "custom": {"name", "description",
                "format": {"type": "text"} | {"type": "grammar",
                                              "grammar": {"syntax", "definition"}}}}
      --custom_tool()--> {"type": "custom", "custom": {"name", "description"?, "format"}}

`syntax` is `lark` or `regex`; where XGrammar is installed the definition is read
here, so a grammar it cannot read is a 400 naming `definition`, not a request that
runs without it.

`tool_choice` forms beside OpenAI's function ones (`fields.tool_choice`)::

    Responses  {"type": "custom", "name"}      Chat  {"type": "custom", "custom": {"name"}}
               -> {"type": "custom", "custom": {"name"}}
    Responses  {"type": "allowed_tools", "mode": "auto" | "required", "tools": [refs]}
    Chat       {"type": "allowed_tools", "allowed_tools": {"mode", "tools": [refs]}}
               -> {"type": "allowed_tools", "allowed_tools": {"mode", "tools": [refs]}}

A reference names a declared tool (`{"type": "function", "name"}` /
`{"type": "custom", "name"}`; in Chat under `function` / `custom`); one to a hosted
tool this server does not run (`mcp`, `web_search`...) allows nothing and is skipped.
The turn offers these as functions (`offer`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from toolwire.grammar.freeform import problem
from toolwire.server.core import fields
from toolwire.server.core.errors import FieldError, Path

__all__ = ["reader", "tool_choice"]

_SYNTAXES = ("lark", "regex")
_MODES = ("auto", "required")


def reader(*, nested: bool) -> Callable[[Mapping[str, Any], Path], dict[str, Any]]:
    """The reader of one custom tool as an API writes it (`nested`: Chat's, under
    `custom`), for `fields.ToolFields.custom`."""

    def read(tool: Mapping[str, Any], where: Path) -> dict[str, Any]:
        return custom_tool(tool, where, nested=nested)

    return read


def custom_tool(tool: Mapping[str, Any], where: Path, *, nested: bool) -> dict[str, Any]:
    """One custom tool, checked, in the neutral shape."""
    spec, at = tool, where
    if nested:
        at = (*where, "custom")
        spec = fields.mapping(tool, "custom", where) or {}
        if "custom" not in tool:
            raise FieldError(at, "must be an object (the custom tool)")
    name = fields.string(spec, "name", at)
    out: dict[str, Any] = {"name": name}
    description = fields.optional_string(spec, "description", at)
    if description:
        out["description"] = description
    out["format"] = _format(spec.get("format"), (*at, "format"), nested=nested)
    return {"type": "custom", "custom": out}


def _format(value: Any, at: Path, *, nested: bool) -> dict[str, Any]:
    if value is None:
        return {"type": "text"}
    if not isinstance(value, Mapping):
        raise FieldError(at, "must be an object")
    kind = fields.one_of(value, "type", ("text", "grammar"), at, required=True)
    if kind == "text":
        return {"type": "text"}
    holder, where = value, at
    if nested:
        holder = fields.mapping(value, "grammar", at) or {}
        where = (*at, "grammar")
        if "grammar" not in value:
            raise FieldError(where, "must be an object with 'syntax' and 'definition'")
    syntax = fields.one_of(holder, "syntax", _SYNTAXES, where, required=True)
    definition = fields.string(holder, "definition", where)
    why = problem(syntax, definition)
    if why is not None:
        raise FieldError((*where, "definition"), f"is not a {syntax} grammar XGrammar reads: {why}")
    return {"type": "grammar", "grammar": {"syntax": syntax, "definition": definition}}


def tool_choice(
    body: Mapping[str, Any], names: Collection[str], custom: Collection[str], *, nested: bool
) -> Any:
    """OpenAI's `tool_choice`, as the neutral one: the custom and `allowed_tools`
    forms here, the others by `fields.tool_choice`. `names`: every declared tool's;
    `custom`: the custom tools'."""
    choice = body.get("tool_choice")
    at: Path = ("tool_choice",)
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind == "custom" and isinstance(choice, Mapping):
        holder, name_at = choice, at
        if nested:
            holder = fields.mapping(choice, "custom", at) or {}
            name_at = (*at, "custom")
        name = holder.get("name")
        if not isinstance(name, str) or name not in custom:
            raise FieldError((*name_at, "name"), f"names {name!r}, which is not a custom tool")
        return {"type": "custom", "custom": {"name": name}}
    if kind == "allowed_tools" and isinstance(choice, Mapping):
        holder, where = choice, at
        if nested:
            holder = fields.mapping(choice, "allowed_tools", at) or {}
            where = (*at, "allowed_tools")
            if "allowed_tools" not in choice:
                raise FieldError(where, "must be an object with 'mode' and 'tools'")
        return _allowed(holder, where, names, nested=nested)
    return fields.tool_choice(body, names, nested=nested)


def _allowed(
    holder: Mapping[str, Any], where: Path, names: Collection[str], *, nested: bool
) -> dict[str, Any]:
    mode = fields.one_of(holder, "mode", _MODES, where, required=True)
    refs = holder.get("tools")
    if not isinstance(refs, list):
        raise FieldError((*where, "tools"), "must be a list of tool references")
    allowed: list[dict[str, Any]] = []
    for i, ref in enumerate(refs):
        at: Path = (*where, "tools", i)
        if not isinstance(ref, Mapping):
            raise FieldError(at, "must be an object")
        kind = ref.get("type")
        if kind not in ("function", "custom"):
            continue  # a hosted tool: nothing this server runs
        holder_at, named = at, ref
        if nested:
            holder_at = (*at, str(kind))
            named = fields.mapping(ref, str(kind), at) or {}
        name = named.get("name")
        if not isinstance(name, str) or name not in names:
            raise FieldError((*holder_at, "name"), f"names {name!r}, which is not in 'tools'")
        allowed.append(
            {"type": "custom", "custom": {"name": name}}
            if kind == "custom"
            else {"type": "function", "function": {"name": name}}
        )
    if mode == "required" and not allowed:
        raise FieldError((*where, "tools"), "names no tool this server can call")
    return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": allowed}}
