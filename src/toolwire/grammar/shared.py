"""Shared rules: a structural tag sent as one grammar in which equal rules exist once.

Why: XGrammar converts every `json_schema` element of a tag on its own, so each tool
brings its own copy of the JSON rules (strings, numbers, objects) and, with
`exclude_delimiters`, of the string automaton that keeps the delimiters out (one rule
per character of every excluded delimiter). The compiler computes token masks per
rule, so the tag's compile cost grew with tools x exclusion length. The rules
themselves are identical from tool to tool; only their names differ.

Data flow::

    tag --xgrammar.Grammar.from_structural_tag--> EBNF text (XGrammar's own printer)
        --merge_rules()--> EBNF where rules with the same body (up to the names
                           they reference, recursively) are one rule
        --xgrammar parses it back (a tag that does not re-parse is sent as it was)-->
    {"type": "structural_tag", "format": {"type": "grammar", "grammar": EBNF}}

`merge_rules` is partition refinement (as in DFA minimization): rules start grouped
by their text with references blanked out, and a group splits until every member
references, position by position, rules of the same groups. Rules in one group
derive the same language, so renaming them to one representative changes nothing
the grammar accepts; it only removes copies. Delimiter tokens stay `Token(id)` and
`ExcludeToken(...)`, so a token-level tag keeps naming delimiters by id.

`merge_rules` is pure text; `share()` needs XGrammar (the `grammar` extra) and is
cached by the tag's JSON text.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from toolwire.grammar.preflight import xgrammar_module

__all__ = ["merge_rules", "share"]

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


def share(tag: dict[str, Any]) -> dict[str, Any]:
    """`tag` as one EBNF grammar with its equal rules shared; `tag` itself when XGrammar
    is not installed or the merged grammar does not parse back."""
    if xgrammar_module() is None:
        return tag
    text = _share_text(json.dumps(tag, ensure_ascii=False))  # key order is meaning here
    if text is None:
        return tag
    return {"type": "structural_tag", "format": {"type": "grammar", "grammar": text}}


@lru_cache(maxsize=256)
def _share_text(tag_text: str) -> str | None:
    xgr = xgrammar_module()
    try:
        merged = merge_rules(str(xgr.Grammar.from_structural_tag(tag_text)))
        xgr.Grammar.from_ebnf(merged)
    except Exception:  # XGrammar raises several types; the tag is then sent as it was
        return None
    return merged
