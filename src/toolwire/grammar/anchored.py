"""Tags for line-anchored formats (`AnchoredShape`: pythonic, llama3_json; no call delimiter).

Their calls have no opening delimiter: the parser (text-gated, `Parser.gated` False)
starts a call only where a line begins, with a character of the format's
`Anchor.begins` (`[` for pythonic, `{` for llama3_json; `f` for Phi-4-mini, the
first of its `word` `functools[`), and releases anything else as content. So the tag
writes calls only where the parser looks for them, and free text never holds an
anchor character, or the anchor's word where it has one (which would make the parser
try, or the grammar open, a call elsewhere):

    auto       ONE of: calls | text | (text-line "\\n")+ calls     (text excludes the anchor)
    required   calls                     named   one call to that tool
    none       text
    calls      style pythonic: "[" CALL (", " CALL)* "]"     (one CALL when not parallel)
               style json:     CALL (separator CALL)*         (one CALL when not parallel;
                                                              inside the shape's items)

pythonic: one EBNF grammar element per list (`pyliteral`: keyword arguments as Python
literals typed by the schema). json: the shape's head (the name JSON-escaped) + the
schema as JSON + its tail. Both are text level: no delimiter is a token. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolwire.formats.spec import AnchoredShape
from toolwire.grammar.policy import ToolSpec
from toolwire.grammar.pyliteral import Literals, ebnf_string, unenforced

__all__ = ["anchored_format", "pythonic_list", "unenforced_reasons"]

Element = dict[str, Any]


def unenforced_reasons(specs: Sequence[ToolSpec]) -> list[str]:
    """Schema keywords the pythonic grammar does not enforce (the language is wider)."""
    out = []
    for spec in specs:
        paths = unenforced(spec.schema)
        if paths:
            out.append(f"{spec.name}: keywords not enforced by the Python-literal grammar: {paths}")
    return out


def pythonic_list(
    specs: Sequence[ToolSpec],
    one: bool,
    *,
    no_markup: str = "",
    items: tuple[str, str] = ("[", "]"),
    separator: str = ", ",
    json_names: bool = False,
) -> Element:
    """`[CALL, ...]` (one CALL when `one`) as one EBNF grammar element; `no_markup`:
    strings never hold `<` then one of these characters (`Literals`); `items`,
    `separator`: the list's own text (OLMo 3's calls are one a line, with no
    brackets); `json_names`: values may also be JSON's `true`, `false`, `null`."""
    lits = Literals(no_markup=no_markup, json_names=json_names)
    calls = [f'{ebnf_string(spec.name + "(")} {lits.keywords(spec.schema)} ")"' for spec in specs]
    call = "(" + " | ".join(calls) + ")"
    body = call if one else f"{call} ({ebnf_string(separator)} {call})*"
    root = " ".join(
        [*([ebnf_string(items[0])] if items[0] else []), body]
        + ([ebnf_string(items[1])] if items[1] else [])
    )
    return {"type": "grammar", "grammar": lits.grammar(root)}


def _json_calls(shape: AnchoredShape, specs: Sequence[ToolSpec], one: bool) -> Element:
    tags = [
        {
            "type": "tag",
            "begin": shape.head.replace("{name}", json.dumps(spec.name, ensure_ascii=False)[1:-1]),
            "content": {"type": "json_schema", "json_schema": dict(spec.schema), "excludes": []},
            "end": shape.tail,
        }
        for spec in specs
    ]
    calls: Element = {
        "type": "tags_with_separator",
        "tags": tags,
        "separator": shape.separator,
        "at_least_one": True,
        "stop_after_first": one,
    }
    if shape.items is None:
        return calls
    opening, closing = shape.items
    return {"type": "tag", "begin": opening, "content": calls, "end": closing}


def anchored_format(
    shape: AnchoredShape,
    anchors: str | Sequence[str],
    specs: Sequence[ToolSpec],
    choice: str,
    *,
    parallel: bool,
) -> Element:
    """The structural tag's `format` for a line-anchored format; `anchors`: what free
    text never holds (`Anchor.begins`'s characters, or its `word`)."""
    text: Element = {"type": "any_text", "excludes": list(anchors)}
    if choice == "none" or not specs:
        return text
    one = choice == "named" or not parallel
    if shape.style == "pythonic":
        calls = pythonic_list(specs, one)
    else:
        calls = _json_calls(shape, specs, one)
    if choice in ("required", "named"):
        return calls
    lines = {"type": "plus", "content": {"type": "tag", "begin": "", "content": text, "end": "\n"}}
    return {
        "type": "or",
        "elements": [calls, text, {"type": "sequence", "elements": [lines, calls]}],
    }
