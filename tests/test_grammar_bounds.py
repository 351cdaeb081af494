"""Tags bound what a model can loop on inside a call: JSON whitespace and string lengths.

A random-weight model under a grammar writes whitespace between JSON tokens until
`max_tokens` runs out, and a string until its bound; without bounds a forced call never
completes. `GrammarPolicy.max_whitespace` sets XGrammar's `max_whitespace_cnt` on every
JSON-schema element; length-bounded strings are restated as patterns where delimiters
are excluded from strings (XGrammar drops `minLength`/`maxLength` next to `excludes`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.data import tokenizer_for
from tests.grammar_support import accepts, compile_tag
from toolwire import GrammarPolicy, UsageError, formats, structural_tag
from toolwire.grammar.policy import bound_tag, loosen

TOOL = {
    "type": "function",
    "function": {
        "name": "label",
        "parameters": {
            "type": "object",
            "properties": {
                "tag": {"type": "string", "minLength": 1, "maxLength": 4},
                "mode": {"type": "string", "enum": ["on", "off"]},
            },
            "required": ["tag", "mode"],
        },
    },
}


def _json_elements(element: Any) -> list[dict[str, Any]]:
    if isinstance(element, list):
        return [e for item in element for e in _json_elements(item)]
    if not isinstance(element, dict):
        return []
    found = [element] if element.get("type") == "json_schema" else []
    return found + [
        e for key, value in element.items() if key != "json_schema" for e in _json_elements(value)
    ]


@pytest.mark.parametrize("name", formats.names())
def test_every_json_element_is_whitespace_bounded(name: str) -> None:
    tag = structural_tag(
        name, [TOOL], tool_choice="required", policy=GrammarPolicy(max_whitespace=3)
    )
    elements = _json_elements(tag)
    for element in elements:
        assert element["max_whitespace_cnt"] == 3
    unbounded = structural_tag(
        name, [TOOL], tool_choice="required", policy=GrammarPolicy(max_whitespace=None)
    )
    assert all("max_whitespace_cnt" not in e for e in _json_elements(unbounded))


def _hermes_ids(arguments: str) -> list[int]:
    tok = tokenizer_for("qwen3")
    text = f'<tool_call>\n{{"name": "label", "arguments": {arguments}}}\n</tool_call>'
    return tok.encode(text)


def test_whitespace_past_the_bound_is_refused() -> None:
    tok = tokenizer_for("qwen3")
    tag = structural_tag(
        "hermes", [TOOL], tool_choice="required", tokenizer=tok, policy=GrammarPolicy()
    )
    assert tag is not None
    compiled = compile_tag(tag, tok)
    assert accepts(compiled, _hermes_ids('{"tag": "ab", "mode": "on"}'))
    assert accepts(compiled, _hermes_ids('{\n    "tag": "ab",\n    "mode": "on"\n}'))
    assert not accepts(compiled, _hermes_ids('{"tag":' + " " * 17 + '"ab", "mode": "on"}'))


def test_string_lengths_hold_next_to_delimiter_exclusions() -> None:
    tok = tokenizer_for("qwen3")
    tag = structural_tag("hermes", [TOOL], tool_choice="required", tokenizer=tok)
    assert tag is not None
    compiled = compile_tag(tag, tok)
    assert accepts(compiled, _hermes_ids('{"tag": "abcd", "mode": "off"}'))
    assert accepts(compiled, _hermes_ids('{"tag": "日本", "mode": "off"}'))
    assert not accepts(compiled, _hermes_ids('{"tag": "abcde", "mode": "off"}'))
    assert not accepts(compiled, _hermes_ids('{"tag": "", "mode": "off"}'))
    assert not accepts(compiled, _hermes_ids('{"tag": "<tool_call>", "mode": "off"}'))


def test_length_patterns_reach_nested_strings_only_where_free() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "string", "maxLength": 2}},
            "b": {"anyOf": [{"type": "string", "minLength": 3}, {"type": "integer"}]},
            "c": {"type": "string", "maxLength": 2, "pattern": "^[a-z]+$"},
            "d": {"type": "string", "maxLength": 2, "format": "date"},
        },
    }
    element = {"type": "json_schema", "json_schema": schema, "excludes": ["<x>"]}
    out = bound_tag(element, 5)["json_schema"]["properties"]
    assert out["a"]["items"] == {"type": "string", "pattern": "^[\\s\\S]{0,2}$"}
    assert out["b"]["anyOf"][0] == {"type": "string", "pattern": "^[\\s\\S]{3,}$"}
    assert out["c"] == schema["properties"]["c"]  # its own pattern wins
    assert out["d"] == schema["properties"]["d"]
    plain = bound_tag({"type": "json_schema", "json_schema": schema}, None)
    assert plain["json_schema"] == schema  # no exclusions: XGrammar keeps the lengths


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3"])
def test_max_whitespace_must_be_positive(bad: Any) -> None:
    with pytest.raises(UsageError):
        GrammarPolicy(max_whitespace=bad)


def test_loosen_marks_every_tool_not_strict() -> None:
    bare = {"name": "f", "parameters": {"type": "object"}}
    out = loosen([TOOL, bare])
    assert out[0]["function"]["strict"] is False and out[1]["strict"] is False
    assert "strict" not in TOOL["function"]  # the request's tools are not changed
    tag = json.dumps(structural_tag("hermes", out, tool_choice="required"))
    assert '"maxLength"' not in tag and '"enum"' not in tag
