"""Freeform inputs: a custom tool's grammar (Lark or a regex) enforced inside its call.

A custom (freeform) tool takes one raw text input. It is offered to the model as a
tool with one string parameter, `input` (`server.core.offer`), so every format writes
its call in its own syntax; for a JSON-argument format (hermes, Qwen3, DeepSeek, Kimi,
Llama 3 JSON, harmony...) that is `{"input": "..."}`, where the text is a JSON string:
escaped. The tool's grammar speaks of the raw text, so it cannot be applied to the
string as written; its image under JSON escaping can, and that image is again a
grammar of the same kind (escaping maps each character to a fixed string, and
context-free and regular languages keep their kind under such maps).

Data flow, for a tool whose `parameters` carry `FREEFORM` (`{"syntax", "definition"}`)::

    definition --XGrammar (Grammar.from_lark / from_regex)--> EBNF of the raw text
      --escaped()--> EBNF of the same text as JSON string content: each string literal
                     and character class of the grammar (its only terminals) mapped
                     through the escaping (`"` -> `\\"`, newline -> `\\n`, control
                     characters -> `\\u00XX`; the first character of each delimiter
                     the call must not contain -> its `\\uXXXX` form, so no delimiter
                     can be spelled inside the input)
    the tag's `json_schema` element for that tool's arguments (JSON style)
      --enforce()--> {"input": "  <the escaped grammar>  "}

`enforce` runs on a built tag (before its rules are shared), so each format's builder
stays as it is: only the arguments element of a JSON-argument call is replaced. Where
a format writes arguments otherwise (XML or tagged parameters, pythonic, Gemma), the
input is any string and a reason says the grammar is not enforced. Pure but for
XGrammar's converters, which `escaped` needs (None without XGrammar).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.grammar.preflight import xgrammar_module

__all__ = ["FREEFORM", "INPUT", "enforce", "escaped", "problem", "raw_ebnf"]

#: The key, in a freeform tool's `parameters`, of its grammar: `{"syntax": "lark" |
#: "regex", "definition": ...}` (the server puts it there; no client schema has it).
FREEFORM = "x-toolwire-freeform"
#: The one parameter of a freeform tool.
INPUT = "input"

Element = dict[str, Any]

#: XGrammar EBNF lexemes that hold text: string literals and character classes.
_TERMINAL = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]', re.S)
_ESCAPES = {
    "n": "\n", "t": "\t", "r": "\r", "0": "\0", "a": "\a", "b": "\b", "f": "\f",
    "v": "\v", "e": "\x1b",
}  # fmt: skip
_HEX = {"x": 2, "u": 4, "U": 8}
_MAX = 0x10FFFF
#: Characters JSON writes escaped inside a string (others below 0x20 as \\u00XX).
_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b"}
_JSON_SHORT["\f"] = "\\f"
#: Code points a JSON string holds as themselves (surrogates are no characters).
_SAFE = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, _MAX))


def raw_ebnf(syntax: str, definition: str) -> str:
    """XGrammar's EBNF of a Lark grammar or a regex (matched whole); raises ValueError
    when XGrammar cannot read it, or is not installed."""
    xgr = xgrammar_module()
    if xgr is None:
        raise ValueError("xgrammar is not installed")
    try:
        if syntax == "lark":
            return str(xgr.Grammar.from_lark(definition))
        if syntax == "regex":
            return str(xgr.Grammar.from_regex(definition))
    except Exception as exc:  # XGrammar raises several types for a bad grammar
        raise ValueError(f"{type(exc).__name__}: {str(exc).strip()[:300]}") from exc
    raise ValueError(f"unknown grammar syntax {syntax!r} (lark or regex)")


def problem(syntax: str, definition: str) -> str | None:
    """Why XGrammar cannot read this grammar, or None (also when it is not installed:
    nothing can be said then)."""
    if xgrammar_module() is None:
        return None
    try:
        raw_ebnf(syntax, definition)
    except ValueError as exc:
        return str(exc)
    return None


def escaped(ebnf: str, forced: str = "") -> str:
    """`ebnf` (XGrammar's EBNF of raw text) as the EBNF of that text inside a JSON
    string: every terminal mapped through JSON escaping; each character of `forced`
    written as its `\\uXXXX` escape. Raises ValueError on a terminal it cannot read."""
    force = frozenset(forced)
    return _TERMINAL.sub(lambda m: _map(m.group(), force), ebnf)


# -- terminals ----------------------------------------------------------------------


def _chars(body: str) -> list[tuple[str, bool]]:
    """A terminal's body as characters, each with whether it was escaped."""
    out: list[tuple[str, bool]] = []
    pos = 0
    while pos < len(body):
        char = body[pos]
        if char != "\\":
            out.append((char, False))
            pos += 1
            continue
        if pos + 1 >= len(body):
            raise ValueError(f"a terminal ends in a backslash: {body!r}")
        code = body[pos + 1]
        if code in _HEX:
            digits = body[pos + 2 : pos + 2 + _HEX[code]]
            if len(digits) != _HEX[code] or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"a bad \\{code} escape in {body!r}")
            out.append((chr(int(digits, 16)), True))
            pos += 2 + _HEX[code]
        else:
            out.append((_ESCAPES.get(code, code), True))
            pos += 2
    return out


def _json(char: str, force: frozenset[str]) -> str:
    """One character as JSON writes it inside a string."""
    if char in force:
        return f"\\u{ord(char):04x}"
    if char in _JSON_SHORT:
        return _JSON_SHORT[char]
    return f"\\u{ord(char):04x}" if ord(char) < 0x20 else char


def _literal(text: str) -> str:
    """`text` as an XGrammar string literal."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) > 0x7E:
            out.append(f"\\U{ord(char):08x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _map(terminal: str, force: frozenset[str]) -> str:
    if terminal.startswith('"'):
        text = "".join(char for char, _ in _chars(terminal[1:-1]))
        return _literal("".join(_json(c, force) for c in text)) if text else '""'
    return _class(terminal[1:-1], force)


def _ranges(body: str) -> list[tuple[int, int]]:
    """A character class's body as sorted, merged code point ranges (negation done)."""
    chars = _chars(body)
    negated = bool(chars) and chars[0] == ("^", False)
    if negated:
        chars = chars[1:]
    spans: list[tuple[int, int]] = []
    n = 0
    while n < len(chars):
        low = ord(chars[n][0])
        if n + 2 < len(chars) and chars[n + 1] == ("-", False):
            spans.append((low, ord(chars[n + 2][0])))
            n += 3
        else:
            spans.append((low, low))
            n += 1
    merged: list[tuple[int, int]] = []
    for low, high in sorted(spans):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    if not negated:
        return merged
    out, start = [], 0
    for low, high in merged:
        if low > start:
            out.append((start, low - 1))
        start = high + 1
    if start <= _MAX:
        out.append((start, _MAX))
    return out


def _class(body: str, force: frozenset[str]) -> str:
    """A character class as the alternatives of its characters' JSON spellings: the
    ones JSON writes as themselves stay one class; each other one is a literal."""
    ranges = _ranges(body)
    kept = [ord(c) for c in force]
    safe: list[tuple[int, int]] = []
    for low, high in ranges:
        for s_low, s_high in _SAFE:
            a, b = max(low, s_low), min(high, s_high)
            start = a
            for point in sorted(p for p in kept if a <= p <= b):
                if point > start:
                    safe.append((start, point - 1))
                start = point + 1
            if start <= b:
                safe.append((start, b))
    special = sorted(
        {
            point
            for low, high in ranges
            for point in [*range(low, min(high, 0x1F) + 1), 0x22, 0x5C, *kept]
            if low <= point <= high
        }
    )
    options = []
    if safe:
        options.append("[" + "".join(_span(low, high) for low, high in safe) + "]")
    options += [_literal(_json(chr(point), force)) for point in special]
    if not options:
        raise ValueError(f"the character class [{body}] holds no character")
    return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


def _span(low: int, high: int) -> str:
    return f"\\U{low:08x}" if low == high else f"\\U{low:08x}-\\U{high:08x}"


# -- the tag ------------------------------------------------------------------------


def enforce(tag: Element, names: Sequence[str]) -> tuple[Element, list[str]]:
    """`tag` with the arguments of each freeform tool (its `parameters` carry
    `FREEFORM`) kept to the tool's grammar, where the format writes JSON arguments;
    the reasons for each tool whose grammar is not enforced. `names`: every tool of
    the tag whose schema carries `FREEFORM` (so one the format never wrote as a JSON
    schema element is named in the reasons too)."""
    done: set[str] = set()
    reasons: list[str] = []
    out = _walk(tag, done, reasons)
    for name in names:
        if name not in done and not any(name in r for r in reasons):
            reasons.append(
                f"custom tool {name!r}: this format does not write its input as a JSON "
                "string; its grammar is not enforced (any text is accepted)"
            )
    return out, reasons


def _walk(element: Any, done: set[str], reasons: list[str]) -> Any:
    if isinstance(element, list):
        return [_walk(e, done, reasons) for e in element]
    if not isinstance(element, dict):
        return element
    schema = element.get("json_schema")
    if (
        element.get("type") == "json_schema"
        and isinstance(schema, Mapping)
        and isinstance(schema.get(FREEFORM), Mapping)
    ):
        return _arguments(element, schema, done, reasons)
    return {k: _walk(v, done, reasons) for k, v in element.items()}


def _arguments(
    element: Element, schema: Mapping[str, Any], done: set[str], reasons: list[str]
) -> Element:
    spec = schema[FREEFORM]
    name = str(spec.get("name", "?"))
    plain = {**element, "json_schema": {k: v for k, v in schema.items() if k != FREEFORM}}
    if element.get("style", "json") != "json":
        return plain  # named in the reasons by `enforce`
    excludes = element.get("excludes") or []
    forced = "".join(sorted({d[0] for d in excludes if isinstance(d, str) and d}))
    try:
        grammar = escaped(raw_ebnf(str(spec.get("syntax")), str(spec.get("definition"))), forced)
    except ValueError as exc:
        reasons.append(f"custom tool {name!r}: its grammar is not enforced: {exc}")
        return plain
    done.add(name)
    head = "{" + json.dumps(INPUT) + ': "'
    return {
        "type": "sequence",
        "elements": [
            {"type": "const_string", "value": head},
            {"type": "grammar", "grammar": grammar},
            {"type": "const_string", "value": '"}'},
        ],
    }
