"""Declared tools and `tool_choice`, from the OpenAI request shapes.

`Tools` answers the two questions the parser asks about a call: is this name a call
it may return, and what JSON type does the schema give this parameter (formats whose
arguments are text, such as XML parameters, type their values by it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.errors import UsageError
from toolwire.nesting import MAX_DEPTH

__all__ = ["Tools", "tool_function"]

#: JSON Schema type names, plus the BFCL spellings that stand for them.
_TYPE_ALIASES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "list": "array",
    "int": "integer",
    "bool": "boolean",
    "str": "string",
    "any": "any",
}


def tool_function(tool: Any) -> Mapping[str, Any]:
    """The function object of one tool: `{"type": "function", "function": {...}}` or bare."""
    if not isinstance(tool, Mapping):
        raise UsageError(f"a tool must be an object, got {type(tool).__name__}")
    if "function" in tool:
        if tool.get("type", "function") != "function":
            raise UsageError(f"unsupported tool type {tool.get('type')!r}")
        function = tool["function"]
    else:
        function = tool
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise UsageError("each tool needs a function with a string 'name'")
    if not function["name"]:
        raise UsageError("a tool's name must not be empty")
    return function


def schema_type(schema: Any, depth: int = 0) -> str | None:
    """The JSON type a schema gives its value ('string', 'integer', ...), or None.

    Any schema is taken, however malformed: what cannot be read types nothing (None).
    """
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        named = [k for k in kind if k != "null"]
        kind = named[0] if len(named) == 1 else None
    if isinstance(kind, str):
        return str(_TYPE_ALIASES.get(kind, kind))
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            found = {schema_type(o, depth + 1) for o in options} - {"null", None}
            if len(found) == 1:
                return found.pop()
    enum = schema.get("enum")
    if isinstance(enum, list) and all(isinstance(v, str) for v in enum):
        return "string"
    if "properties" in schema:
        return "object"
    return None


@dataclass(frozen=True)
class Tools:
    """The tools a parser may return calls to, after `tool_choice` is applied.

    `names is None` means no list was given (offline parsing): any name is accepted.
    """

    names: frozenset[str] | None
    schemas: Mapping[str, Mapping[str, Any]]
    choice: str  # "auto" | "none" | "required" | "named"
    parallel: bool = True

    @classmethod
    def from_request(
        cls,
        tools: Sequence[Any] | None,
        tool_choice: Any = "auto",
        parallel_tool_calls: bool = True,
    ) -> Tools:
        schemas: dict[str, Mapping[str, Any]] = {}
        if tools is not None:
            if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
                raise UsageError("tools must be a list of tool objects")
            for tool in tools:
                function = tool_function(tool)
                params = function.get("parameters")
                schemas[function["name"]] = params if isinstance(params, Mapping) else {}
        names: frozenset[str] | None = None if tools is None else frozenset(schemas)
        if tool_choice is None:
            tool_choice = "auto"
        if isinstance(tool_choice, str):
            if tool_choice not in ("auto", "none", "required"):
                raise UsageError(
                    f"tool_choice must be 'auto', 'none', 'required' or a named function, "
                    f"got {tool_choice!r}"
                )
            return cls(names, schemas, tool_choice, parallel_tool_calls)
        if isinstance(tool_choice, Mapping):
            chosen = tool_choice.get("function")
            name = chosen.get("name") if isinstance(chosen, Mapping) else None
            if not isinstance(name, str):
                raise UsageError("a named tool_choice needs {'function': {'name': ...}}")
            if names is not None and name not in names:
                raise UsageError(f"tool_choice names {name!r}, which is not among the tools")
            return cls(frozenset({name}), schemas, "named", parallel_tool_calls)
        raise UsageError(f"tool_choice must be a string or an object, got {tool_choice!r}")

    def accepts(self, name: str) -> bool:
        """True when a call to `name` may be returned."""
        if self.choice == "none":
            return False
        return self.names is None or name in self.names

    def parameter_type(self, tool: str, parameter: str) -> str | None:
        """The JSON type the schema of `tool` gives `parameter`, or None if unknown."""
        props = (self.schemas.get(tool) or {}).get("properties")
        if not isinstance(props, Mapping):
            return None
        return schema_type(props.get(parameter))
