"""A JSON schema as an EBNF grammar of Python literals (the pythonic format's values).

Data flow: a normalized schema -> `Literals.rule(schema)` -> the name of a rule whose
language is the Python literal source of the values the schema allows, in the form
the pythonic parser reads and the renderer writes (`formats.pythonic.literal`):

    string   "..." (JSON escapes, which are valid Python; no control characters)
    integer  -?(0|[1-9][0-9]*)          number  the same, or a finite float (fraction/exponent)
    boolean  True | False               null    None
    array    [v, v]                     object  {"key": v, "key": v}  (schema order;
                                                required keys present, optional ones may go;
                                                no other keys unless `properties` is absent)
    enum     the listed values, each as its literal

`keywords(schema)` -> `KEY=VALUE, ...` rules for a call's keyword arguments, with the
same ordering and required/optional rules as objects. Keywords that the grammar does
not enforce (`pattern`, `format`, bounds, lengths) are listed by `unenforced`; the
caller records them as reasons. Rules accumulate in one `Literals`; `grammar(root)`
returns the EBNF text (XGrammar's dialect, root rule `root`). Pure: no xgrammar here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.tools import schema_type

__all__ = ["Literals", "ebnf_string", "unenforced"]

_STRING = '"\\"" ([^"\\\\\\x00-\\x1f] | "\\\\" ["\\\\nt])* "\\""'
#: The same strings, never holding `<` then one of `after` (the start of every `<|...|>`
#: delimiter for "|"; OLMo 3's `<function_calls>` tags for "f/"): a `<` (or `<<`) goes
#: on with any other character, or ends the string. Written as flat alternatives: an
#: unbounded run (`"<"+`) makes XGrammar's mask inside every string ~500x slower (60 ms
#: per token instead of 0.1 ms), so a run of `<` is at most 2 long.
_ESCAPE = '"\\\\" ["\\\\nt]'


def _string_without_markup(after: str) -> str:
    other = '[^"\\\\<' + "".join("\\" + c if c in "]\\^-" else c for c in after) + "\\x00-\\x1f]"
    return (
        f'"\\"" ([^"\\\\<\\x00-\\x1f] | {_ESCAPE} | "<" {other} | "<" {_ESCAPE} '
        f'| "<<" {other} | "<<" {_ESCAPE})* ("<<" | "<" | "") "\\""'
    )


_INTEGER = '"-"? ("0" | [1-9] [0-9]*)'
#: A number with a fraction or an exponent is a float, so it stays finite: at most 100
#: digits before the point and a two-digit exponent (1e199 at most; a float holds
#: 1.8e308). Past that the value is no JSON number (the parser keeps its text).
_NUMBER = (
    f"({_INTEGER}"
    ' | "-"? ("0" | [1-9] [0-9]{0,99})'
    ' ("." [0-9]+ ([eE] [-+]? [0-9] [0-9]?)? | [eE] [-+]? [0-9] [0-9]?))'
)
_UNENFORCED = (
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "const",
    "not",
    "allOf",
)


def ebnf_string(text: str) -> str:
    """`text` as an EBNF string literal."""
    return json.dumps(text, ensure_ascii=False)


def unenforced(schema: Any, path: str = "") -> list[str]:
    """The paths of keywords in `schema` that the literal grammar does not enforce."""
    out: list[str] = []
    if isinstance(schema, Mapping):
        out += [f"{path}.{k}" if path else k for k in _UNENFORCED if k in schema]
        for key, sub in schema.items():
            if key == "properties" and isinstance(sub, Mapping):
                for name, prop in sub.items():
                    out += unenforced(prop, f"{path}.{name}" if path else name)
            elif key in ("items", "additionalProperties"):
                out += unenforced(sub, f"{path}[]")
            elif key in ("anyOf", "oneOf") and isinstance(sub, list):
                for item in sub:
                    out += unenforced(item, path)
    return out


def _literal(value: Any) -> str:
    """A JSON value as Python literal source (as `formats.pythonic.literal`)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


class Literals:
    """Rules of one EBNF grammar; `rule()` adds the rules for a schema, by name."""

    def __init__(self, *, no_markup: str = "", json_names: bool = False) -> None:
        """`no_markup`: strings never hold `<` followed by one of these characters (the
        start of a delimiter's text, where a format's delimiters are tokens that its
        parser acts on inside a call: "|" for `<|...|>`);
        `json_names`: JSON's `true`, `false` and `null` are allowed beside Python's
        (OLMo 3 writes them)."""
        self._json_names = json_names
        self._bool = '("True" | "False" | "true" | "false")' if json_names else '("True" | "False")'
        self._null = '("None" | "null")' if json_names else '"None"'
        self._rules: dict[str, str] = {
            "str": _string_without_markup(no_markup) if no_markup else _STRING,
            "int": _INTEGER,
            "num": _NUMBER,
            "any": f"str | num | {self._bool} | {self._null} | anylist | anydict",
            "anylist": '"[" (any (", " any)*)? "]"',
            "anydict": '"{" (str ": " any (", " str ": " any)*)? "}"',
        }
        self._count = 0

    def _add(self, body: str) -> str:
        self._count += 1
        name = f"r{self._count}"
        self._rules[name] = body
        return name

    def grammar(self, root: str) -> str:
        lines = [f"root ::= {root}"] + [f"{k} ::= {v}" for k, v in self._rules.items()]
        return "\n".join(lines) + "\n"

    def rule(self, schema: Any) -> str:
        """A rule name (or an EBNF expression) for the values `schema` allows."""
        if not isinstance(schema, Mapping) or not schema:
            return "any"
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            spelled = [_literal(v) for v in schema["enum"]]
            if self._json_names:
                spelled += [
                    json.dumps(v) for v in schema["enum"] if v is None or isinstance(v, bool)
                ]
            return self._add(" | ".join(ebnf_string(v) for v in spelled))
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return self._add(" | ".join(self.rule(s) for s in schema[key]))
        kind = schema.get("type")
        if isinstance(kind, list):
            return self._add(" | ".join(self.rule({**schema, "type": k}) for k in kind) or "any")
        kind = schema_type(schema)
        if kind == "string":
            return "str"
        if kind == "integer":
            return "int"
        if kind == "number":
            return "num"
        if kind == "boolean":
            return self._bool
        if kind == "null":
            return self._null
        if kind == "array":
            item = self.rule(schema.get("items"))
            return self._add(f'"[" ({item} (", " {item})*)? "]"')
        if kind == "object":
            props = schema.get("properties")
            if not isinstance(props, Mapping):
                return "anydict"
            if not props:  # declared properties only, as XGrammar's JSON (no extras)
                return '"{}"'
            entries = [(ebnf_string(json.dumps(k, ensure_ascii=False) + ": "), k) for k in props]
            return self._add(f'"{{" {self._entries(schema, entries)} "}}"')
        return "any"

    def keywords(self, schema: Mapping[str, Any]) -> str:
        """A call's keyword arguments `k=v, ...` (an expression; may match nothing)."""
        props = schema.get("properties")
        if not props and isinstance(props, Mapping):
            return '""'
        if not isinstance(props, Mapping):
            key = "[A-Za-z_] [A-Za-z0-9_]*"
            return self._add(f'({key} "=" any (", " {key} "=" any)*)?')
        return self._entries(schema, [(ebnf_string(f"{k}="), k) for k in props])

    def _entries(self, schema: Mapping[str, Any], entries: Sequence[tuple[str, str]]) -> str:
        """Entries `PREFIX VALUE` joined by ", " in order; optional ones may be left out.

        Two rules per entry, right to left: `first_i` (nothing written yet) and `rest_i`
        (something written, so a separator comes first)."""
        props = schema.get("properties")
        assert isinstance(props, Mapping)
        required = set(schema.get("required") or ())
        first, rest = '""', '""'
        for prefix, key in reversed(entries):
            value = self.rule(props[key])
            here_first = f"{prefix} {value} {rest}"
            here_rest = f'", " {prefix} {value} {rest}'
            if key not in required:
                here_first = f"({here_first}) | {first}"
                here_rest = f"({here_rest}) | {rest}"
            first, rest = self._add(here_first), self._add(here_rest)
        return first
