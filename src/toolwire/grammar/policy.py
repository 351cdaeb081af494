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

Whitespace: every JSON-schema element of a tag allows at most `max_whitespace`
consecutive whitespace characters between JSON tokens (XGrammar's
`max_whitespace_cnt`; string values are not affected). Without a bound a model can
write whitespace inside a forced call until `max_tokens` runs out (random-weight and
real models alike loop on whitespace under grammars), and the call never completes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolwire.errors import UsageError
from toolwire.grammar.schema import normalize
from toolwire.tools import tool_function

__all__ = ["RELAXED", "GrammarPolicy", "ToolSpec", "bound_tag", "choose", "loosen", "tool_specs"]

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
    #: guarantee for compile time (the exclusion costs a few tenths of a second of
    #: token-mask compilation once per tag on a 150k vocabulary, with `shared_rules`).
    exclude_delimiters: bool = True
    #: The most consecutive whitespace characters between JSON tokens of arguments
    #: (XGrammar's `max_whitespace_cnt`), so no model can loop on whitespace inside a
    #: forced call. 16 leaves room for JSON pretty-printed three levels deep with
    #: 4-space indents; None: unbounded.
    max_whitespace: int | None = 16
    #: Send the tag as one grammar whose equal rules exist once (`grammar.shared`;
    #: needs XGrammar here and an XGrammar that reads its EBNF upstream), so the
    #: compile cost of strings and exclusions is paid once per tag, not once per tool.
    #: False: the tag of structural elements, as built.
    shared_rules: bool = True

    def __post_init__(self) -> None:
        if self.scope not in ("always", "auto"):
            raise UsageError(f"GrammarPolicy.scope must be 'always' or 'auto', not {self.scope!r}")
        if self.schema not in ("auto", "strict"):
            raise UsageError(
                f"GrammarPolicy.schema must be 'auto' or 'strict', not {self.schema!r}"
            )
        bound = self.max_whitespace
        if bound is not None and (
            isinstance(bound, bool) or not isinstance(bound, int) or bound < 1
        ):
            raise UsageError(
                f"GrammarPolicy.max_whitespace must be a positive integer or None, not {bound!r}"
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


def bound_tag(element: Any, max_whitespace: int | None) -> Any:
    """`element` (a tag or any part of one) with every JSON-schema element bounded:
    `max_whitespace_cnt` set (unless `max_whitespace` is None), and, where the element
    excludes delimiters from its strings, length bounds restated as patterns.

    XGrammar ignores `minLength`/`maxLength` on a string next to `excludes` (it warns and
    compiles an unbounded string) but keeps `pattern`; a length-bounded string with no
    pattern becomes `pattern: ^[\\s\\S]{min,max}$`, which XGrammar applies to the
    string's characters without JSON escape sequences (no quote, backslash or control
    character inside such a value). A string with both a pattern and lengths keeps the
    pattern only.
    """
    if isinstance(element, list):
        return [bound_tag(e, max_whitespace) for e in element]
    if not isinstance(element, dict):
        return element
    out = {k: v if k == "json_schema" else bound_tag(v, max_whitespace) for k, v in element.items()}
    if out.get("type") == "json_schema":
        if max_whitespace is not None:
            out["max_whitespace_cnt"] = max_whitespace
        if out.get("excludes") and isinstance(out.get("json_schema"), dict):
            out["json_schema"] = _length_patterns(out["json_schema"])
    return out


#: Schema keywords whose value is a schema, a list of schemas, or a name -> schema map.
_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "$defs", "definitions")


def _length_patterns(schema: Any) -> Any:
    """`schema` with each length-bounded string (no pattern) restated as a pattern."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _ONE:
        if isinstance(out.get(key), dict):
            out[key] = _length_patterns(out[key])
    for key in _MANY:
        if isinstance(out.get(key), list):
            out[key] = [_length_patterns(s) for s in out[key]]
    for key in _NAMED:
        if isinstance(out.get(key), dict):
            out[key] = {name: _length_patterns(s) for name, s in out[key].items()}
    low, high = out.get("minLength"), out.get("maxLength")
    bounded = isinstance(low, int) or isinstance(high, int)
    free = not any(key in out for key in ("pattern", "enum", "const", "format"))
    if out.get("type") == "string" and bounded and free:
        low = low if isinstance(low, int) else 0
        span = f"{low},{high}" if isinstance(high, int) else f"{low},"
        out["pattern"] = f"^[\\s\\S]{{{span}}}$"
        out.pop("minLength", None)  # restated; XGrammar would only warn
        out.pop("maxLength", None)
    return out


def loosen(tools: Sequence[Any]) -> list[Any]:
    """The tools, each declared `strict: false` (arguments: any JSON object): what a tag
    is rebuilt from when an engine rejects the full one for a forced call."""
    out: list[Any] = []
    for tool in tools:
        if isinstance(tool, Mapping) and isinstance(tool.get("function"), Mapping):
            out.append({**tool, "function": {**tool["function"], "strict": False}})
        elif isinstance(tool, Mapping):
            out.append({**tool, "strict": False})
        else:
            out.append(tool)
    return out
