"""Shared rules: a structural tag sent as one grammar in which equal rules exist once.

Why: XGrammar converts every `json_schema` element of a tag on its own, so each tool
brings its own copy of the JSON rules (strings, numbers, objects) and, with
`exclude_delimiters`, of the string automaton that keeps the delimiters out (one rule
per character of every excluded delimiter). The compiler computes token masks per
rule, so the tag's compile cost grew with tools x exclusion length. The rules
themselves are identical from tool to tool; only their names differ.

Data flow (`prepare`: one conversion per tag, which is also its preflight)::

    tag --xgrammar.Grammar.from_structural_tag--> EBNF text (XGrammar's own printer);
        an exception here is the preflight's error: the tag does not compile
        --merge_rules()--> EBNF where rules with the same body (up to the names
                           they reference, recursively) are one rule
        --bounded_whitespace()--> each bounded run of JSON whitespace (XGrammar's
                           `ws{0, n}` of `max_whitespace_cnt`) written as W(n)
                           (`grammar.whitespace`), whose token masks are precomputed
        --xgrammar parses it back (a tag that does not re-parse is sent as it was)-->
    {"type": "structural_tag", "format": {"type": "grammar", "grammar": EBNF}}

`merge_rules` is partition refinement (as in DFA minimization): rules start grouped
by their text with references blanked out, and a group splits until every member
references, position by position, rules of the same groups. Rules in one group
derive the same language, so renaming them to one representative changes nothing
the grammar accepts; it only removes copies. Delimiter tokens stay `Token(id)` and
`ExcludeToken(...)`, so a token-level tag keeps naming delimiters by id.

`merge_rules` and `bounded_whitespace` are pure text; `prepare()` needs XGrammar (the
`grammar` extra) and is cached by the tag's JSON text.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from toolwire.grammar.preflight import error_text, xgrammar_module
from toolwire.grammar.whitespace import whitespace_ebnf

__all__ = ["bounded_whitespace", "merge_rules", "prepare"]

#: XGrammar EBNF lexemes: (1) string literals and character classes, (2) a keyword
#: argument's name (`loop_after_dispatch=`), (3) identifiers, (4) runs of anything
#: else (operators, spaces, digits), so a body is a few dozen lexemes.
_LEXEME = re.compile(
    r'("[^"\\]*(?:\\.[^"\\]*)*"|\[[^\]\\]*(?:\\.[^\]\\]*)*\])'
    r"|([A-Za-z_][A-Za-z0-9_]*(?=\s*=[^=]))"
    r"|([A-Za-z_][A-Za-z0-9_]*)"
    r'|([^"\[A-Za-z_]+)',
    re.S,
)
_HEAD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*) ::= ", re.M)
#: A rule of one JSON whitespace character, as XGrammar prints `max_whitespace_cnt`.
_WS_RULE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*) ::= \(\(\[ \\n\\r\\t\]\)\)$", re.M)


def _rules(text: str) -> dict[str, str]:
    """Rule name -> body text, in order of definition (bodies may span lines)."""
    heads = list(_HEAD.finditer(text))
    out: dict[str, str] = {}
    for n, head in enumerate(heads):
        end = heads[n + 1].start() if n + 1 < len(heads) else len(text)
        out[head.group(1)] = text[head.end() : end].rstrip()
    return out


def _parts(body: str, rules: dict[str, str]) -> list[tuple[str, bool]]:
    """The body's lexemes, each with whether it names a rule."""
    out = []
    for literal, keyword, name, other in _LEXEME.findall(body):
        text = literal or keyword or name or other
        out.append((text, bool(name) and name in rules))
    return out


def merge_rules(text: str) -> str:
    """`text` (XGrammar EBNF) with equivalent rules merged; `root` keeps its name."""
    rules = _rules(text)
    parts = {name: _parts(body, rules) for name, body in rules.items()}
    refs = {name: [t for t, named in p if named] for name, p in parts.items()}
    shapes: dict[str, int] = {}
    group = {
        name: shapes.setdefault("".join("\0" if named else t for t, named in p), len(shapes))
        for name, p in parts.items()
    }
    while True:
        keys: dict[tuple[int, tuple[int, ...]], int] = {}
        split = {
            name: keys.setdefault((group[name], tuple(group[r] for r in refs[name])), len(keys))
            for name in rules
        }
        if len(keys) == len(set(group.values())):
            break
        group = split
    chosen: dict[int, str] = {}
    for name in rules:
        chosen.setdefault(group[name], name)
    if "root" in group:
        chosen[group["root"]] = "root"
    lines = []
    for name, p in parts.items():
        if chosen[group[name]] == name:
            body = "".join(chosen[group[t]] if named else t for t, named in p)
            lines.append(f"{name} ::= {body}")
    return "\n".join(lines) + "\n"


def bounded_whitespace(text: str) -> str:
    """`text` (XGrammar EBNF) with every `WS{0, n}` of a one-whitespace-character rule
    WS written as W(n) (`grammar.whitespace`), a subset of the same bound, inline where
    it stands: a reference to a rule of W(n) costs the matcher a nested derivation at
    every gap between JSON tokens (3-7x the built-in's mask there, where the inline
    expression costs what XGrammar's own `[ \\n\\r\\t]*` does)."""
    for name in _WS_RULE.findall(text):
        text = re.sub(
            rf"\b{name}\{{0, ([0-9]+)\}}", lambda m: whitespace_ebnf(int(m.group(1))), text
        )
    return text


def prepare(tag: dict[str, Any], *, share: bool = True) -> tuple[str | None, dict[str, Any]]:
    """(XGrammar's error for `tag`, or None when it compiles; the tag to send: with
    `share`, one EBNF grammar with its equal rules shared, else `tag` itself).

    One `Grammar.from_structural_tag` serves both the preflight and the sharing.
    Without XGrammar: (None, tag), unchecked. A merged grammar that does not parse back
    is not sent: `tag` is.
    """
    if xgrammar_module() is None:
        return None, tag
    error, text = _prepare_text(json.dumps(tag, ensure_ascii=False), share)  # key order matters
    if error is not None or text is None:
        return error, tag
    return None, {"type": "structural_tag", "format": {"type": "grammar", "grammar": text}}


@lru_cache(maxsize=256)
def _prepare_text(tag_text: str, share: bool) -> tuple[str | None, str | None]:
    xgr = xgrammar_module()
    try:
        grammar = xgr.Grammar.from_structural_tag(tag_text)
    except Exception as exc:  # XGrammar raises several types; all mean "does not compile"
        return error_text(exc), None
    if not share:
        return None, None
    try:
        merged = bounded_whitespace(merge_rules(str(grammar)))
        xgr.Grammar.from_ebnf(merged)
    except Exception:  # a merged grammar XGrammar does not read back is not sent
        return None, None
    return None, merged
