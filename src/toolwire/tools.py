"""Declared tools and `tool_choice`, from the OpenAI request shapes.

`Tools` answers the questions the parser asks about a call: is this name a call it
may return; what JSON type does the schema give this parameter, and may it be null
(formats whose arguments are text, such as XML parameters, type their values by it);
and are a call's arguments complete for its schema (asked of a call whose body did not
end: every required parameter present, every present one of its declared type).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.errors import UsageError
from toolwire.nesting import MAX_DEPTH

__all__ = ["TYPE_ALIASES", "Tools", "fits", "schema_nullable", "tool_function"]

#: JSON Schema type names, plus the BFCL spellings that stand for them (the one table:
#: the parser's schema typing and the grammar's schema normalization both read it).
TYPE_ALIASES = {
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
        return str(TYPE_ALIASES.get(kind, kind))
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


def schema_nullable(schema: Any) -> bool:
    """True when the schema allows null (`"type": [..., "null"]`, an anyOf/oneOf option
    of type null, `"nullable": true`, or a null in its enum)."""
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if schema.get("nullable") is True:
        return True
    enum = schema.get("enum")
    if isinstance(enum, list) and None in enum:
        return True
    return any(
        isinstance(options, list) and any(schema_nullable(o) for o in options)
        for options in (schema.get("anyOf"), schema.get("oneOf"))
    )


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def fits(schema: Any, value: Any) -> bool:
    """True when `value` (decoded JSON) has a JSON type the schema allows (types, enum
    and anyOf/oneOf options; nested schemas are not checked)."""
    if not isinstance(schema, Mapping):
        return True
    if value is None and schema_nullable(schema):
        return True
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        return False
    options = [o for key in ("anyOf", "oneOf") for o in (schema.get(key) or [])]
    if options and not any(fits(o, value) for o in options):
        return False
    kinds = schema.get("type")
    names = kinds if isinstance(kinds, list) else [kinds] if isinstance(kinds, str) else []
    if not names:
        return True
    for name in names:
        kind = TYPE_ALIASES.get(name, name)
        if kind == "null" and value is None:
            return True
        wanted = _PYTHON_TYPES.get(kind)
        if wanted is None:
            return kind == "any"
        if isinstance(value, bool) and kind != "boolean":
            continue
        if isinstance(value, wanted):
            if kind == "integer" and isinstance(value, float):
                continue
            return True
    return False


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

    def parameter_enum(self, tool: str, parameter: str) -> tuple[str, ...] | None:
        """The strings the schema of `tool` allows `parameter` (its `enum`, when every
        member is a string), or None."""
        props = (self.schemas.get(tool) or {}).get("properties")
        schema = props.get(parameter) if isinstance(props, Mapping) else None
        enum = schema.get("enum") if isinstance(schema, Mapping) else None
        if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
            return tuple(enum)
        return None

    def parameter_nullable(self, tool: str, parameter: str) -> bool:
        """True when the schema of `tool` allows `parameter` to be null."""
        props = (self.schemas.get(tool) or {}).get("properties")
        if not isinstance(props, Mapping):
            return False
        return schema_nullable(props.get(parameter))

    def incomplete(self, tool: str, arguments: str) -> str:
        """Why `arguments` (JSON text) are not complete for the schema of `tool`, or ''.

        Complete: a JSON object holding every required parameter, each present one of
        a type its schema allows. A tool without a schema takes any object."""
        try:
            value = json.loads(arguments or "{}")
        except ValueError:
            return "its arguments are not JSON"
        if not isinstance(value, dict):
            return "its arguments are not an object"
        schema = self.schemas.get(tool) or {}
        required = schema.get("required")
        if isinstance(required, list):
            missing = [k for k in required if isinstance(k, str) and k not in value]
            if missing:
                return f"it lacks the required parameter {missing[0]!r}"
        props = schema.get("properties")
        if isinstance(props, Mapping):
            for key, item in value.items():
                if key in props and not fits(props[key], item):
                    return f"its parameter {key!r} does not fit the schema"
        return ""
