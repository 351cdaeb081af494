"""When to constrain, and with which schema: `GrammarPolicy` and the request's tools.

The table (every row is a test)::

    enabled=False                               -> no constraint
    tool_choice "none"                          -> tool delimiters excluded
    tool_choice "required" / named              -> constrained
    tool_choice "auto", scope "always"          -> constrained
    tool_choice "auto", scope "auto"            -> constrained only when a tool says
                                                   `strict: true` or parallel_tool_calls
                                                   is false; otherwise no constraint

Per tool: `strict` omitted or true -> the declared (normalized) schema; `strict: false`
-> any JSON object inside the native envelope; policy schema "strict" -> the declared
schema whatever the tool says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolwire.errors import UsageError
from toolwire.grammar.schema import normalize
from toolwire.tools import tool_function

__all__ = ["RELAXED", "GrammarPolicy", "ToolSpec", "choose", "tool_specs"]

#: The arguments schema of a relaxed tool: any JSON object.
RELAXED: Mapping[str, Any] = {"type": "object"}


@dataclass(frozen=True)
class GrammarPolicy:
    """How structural tags are built for a request."""

    #: False: never constrain (every request gets None).
    enabled: bool = True
    #: "always": constrain every tool request; "auto": constrain `tool_choice="auto"`
    #: only when a tool is `strict: true` or `parallel_tool_calls` is false.
    scope: Literal["always", "auto"] = "always"
    #: "auto": honour each tool's `strict: false`; "strict": always the declared schema.
    schema: Literal["auto", "strict"] = "auto"
    #: Forbid the call's delimiters (text, and so their ids) inside argument strings,
    #: so the parser cannot see a call end or begin inside a value. False trades that
    #: guarantee for compile time: XGrammar's string exclusions cost about 0.2 s of
    #: token-mask compilation per excluded delimiter and tool (Qwen3's vocabulary, once
    #: per distinct tool set; engines cache compiled grammars).
    exclude_delimiters: bool = True

    def __post_init__(self) -> None:
        if self.scope not in ("always", "auto"):
            raise UsageError(f"GrammarPolicy.scope must be 'always' or 'auto', not {self.scope!r}")
        if self.schema not in ("auto", "strict"):
            raise UsageError(
                f"GrammarPolicy.schema must be 'auto' or 'strict', not {self.schema!r}"
            )


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the grammar sees it."""

    name: str
    #: The arguments schema the grammar enforces (normalized, or RELAXED).
    schema: Mapping[str, Any]
    #: The tool said `strict: true`.
    strict: bool
    #: The tool said `strict: false` and the policy honoured it.
    relaxed: bool


def tool_specs(tools: Sequence[Any], policy: GrammarPolicy) -> tuple[list[ToolSpec], list[str]]:
    """Each declared tool's name and enforced schema; reasons for every normalization."""
    specs: list[ToolSpec] = []
    reasons: list[str] = []
    for tool in tools:
        function = tool_function(tool)
        name = function["name"]
        strict = function.get("strict")
        schema, why = normalize(function.get("parameters"), f"{name}.parameters")
        reasons += why
        relaxed = strict is False and policy.schema == "auto"
        specs.append(ToolSpec(name, RELAXED if relaxed else schema, strict is True, relaxed))
    return specs, reasons


def choose(tool_choice: Any, specs: Sequence[ToolSpec]) -> tuple[str, list[ToolSpec]]:
    """(`auto` | `none` | `required` | `named`, the tools a call may name)."""
    if tool_choice is None:
        tool_choice = "auto"
    if isinstance(tool_choice, str):
        if tool_choice not in ("auto", "none", "required"):
            raise UsageError(
                "tool_choice must be 'auto', 'none', 'required' or a named function, "
                f"got {tool_choice!r}"
            )
        return tool_choice, list(specs)
    if isinstance(tool_choice, Mapping):
        chosen = tool_choice.get("function")
        name = chosen.get("name") if isinstance(chosen, Mapping) else None
        if not isinstance(name, str):
            raise UsageError("a named tool_choice needs {'function': {'name': ...}}")
        named = [s for s in specs if s.name == name]
        if not named:
            raise UsageError(f"tool_choice names {name!r}, which is not among the tools")
        return "named", named
    raise UsageError(f"tool_choice must be a string or an object, got {tool_choice!r}")
