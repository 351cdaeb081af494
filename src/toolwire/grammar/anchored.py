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
               style params:   the same, each CALL's arguments tagged parameters

pythonic: one EBNF grammar element per list (`pyliteral`: keyword arguments as Python
literals typed by the schema). json: the shape's head (the name JSON-escaped) + the
schema as JSON + its tail. params: the shape's head + each declared parameter (in
schema order; optional ones may go) as `Params.open` VALUE `Params.close`, a string's
VALUE text without the close, any other JSON + its tail. All are text level: no
delimiter is a token. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.formats.spec import AnchoredShape, Params
from toolwire.grammar.policy import ToolSpec
from toolwire.grammar.pyliteral import Literals, ebnf_string, unenforced
from toolwire.tools import schema_type

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


def _param(key: str, schema: Any, params: Params) -> Element:
    """One tagged parameter: its open tag, its value, its close."""
    opening = params.open.replace("{key}", key)
    if isinstance(schema, Mapping) and schema_type(schema) == "string":
        value: Element = {"type": "any_text", "excludes": [params.close]}
        content: list[Element] = [
            {"type": "tag", "begin": "", "content": value, "end": params.close}
        ]
    else:
        json_schema = dict(schema) if isinstance(schema, Mapping) and schema else True
        content = [
            {"type": "json_schema", "json_schema": json_schema, "excludes": []},
            {"type": "const_string", "value": params.close},
        ]
    return {"type": "sequence", "elements": [{"type": "const_string", "value": opening}, *content]}


def _tagged_arguments(schema: Mapping[str, Any], params: Params) -> Element:
    """The declared parameters in order, optional ones optional; with no declared
    properties, no parameter (the call's arguments are then `{}`)."""
    props = schema.get("properties")
    required = set(schema.get("required") or ())
    parts: list[Element] = []
    for key, sub in (props or {}).items() if isinstance(props, Mapping) else ():
        one = _param(key, sub, params)
        parts.append(one if key in required else {"type": "optional", "content": one})
    return {"type": "sequence", "elements": parts or [{"type": "const_string", "value": ""}]}


def _json_calls(shape: AnchoredShape, specs: Sequence[ToolSpec], one: bool) -> Element:
    def arguments(spec: ToolSpec) -> Element:
        if shape.params is not None:
            return _tagged_arguments(spec.schema, shape.params)
        return {"type": "json_schema", "json_schema": dict(spec.schema), "excludes": []}

    name_text = (
        (lambda name: name)
        if shape.params is not None
        else (lambda name: json.dumps(name, ensure_ascii=False)[1:-1])
    )
    tags = [
        {
            "type": "tag",
            "begin": shape.head.replace("{name}", name_text(spec.name)),
            "content": arguments(spec),
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
