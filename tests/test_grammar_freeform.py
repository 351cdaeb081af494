"""A custom tool's grammar is enforced inside its call: the structural tag accepts the
call of a custom tool exactly when the tool's own grammar accepts the raw input.

The tag is the one the server builds (the tool offered as a function of one string,
`server.core.offer`, then `grammar.freeform.enforce`); XGrammar's matcher runs it over
the token ids of the call as the model would write it (the input JSON-escaped inside the
arguments), and the Lark parser (or Python's `re`) on the raw input is the oracle.
Inputs carry what JSON escaping changes: quotes, backslashes, newlines, tabs, control
characters, non-ASCII text. On every format, the tool's grammar either changes the
forced tag or the tag's reasons say it is not enforced.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.data import tokenizer_for
from tests.grammar_support import accepts, compile_tag
from toolwire import formats
from toolwire.grammar import TagResult, structural_tag_with_reason
from toolwire.grammar.freeform import escaped
from toolwire.server.core.offer import offer, unwrap
from toolwire.server.core.request import ChatRequest
from toolwire.server.engines import infer_format

lark = pytest.importorskip("lark")

LARK = r"""
start: "say " WORD (", " WORD)* TAIL?
WORD: /[a-zé"\\]+/
TAIL: /\n[\t ]*\x01?!/
"""
REGEX = r'[A-Z]{2}-[0-9]+( "[^"]*")?\n?'
INPUTS = [
    "say hi",
    "say hi, there",
    'say "quoted", back\\slash',
    "say café, \n\t!",
    "say a\n\x01!",
    "say",
    "say HI",
    "said hi",
    "say hi,there",
    "AB-12",
    'AB-12 "x y"\n',
    'AB-12 "x"y"',
    "ab-12",
    "AB-",
]


def _tag(syntax: str, definition: str) -> dict[str, object]:
    tool = {
        "type": "custom",
        "custom": {
            "name": "run",
            "format": {"type": "grammar", "grammar": {"syntax": syntax, "definition": definition}},
        },
    }
    request = ChatRequest(
        model="m", messages=[{"role": "user", "content": "x"}], tools=[tool], tool_choice="required"
    )
    offered = offer(request)
    tok = tokenizer_for("qwen3")
    result = structural_tag_with_reason(
        infer_format(tok), offered.call_tools, tool_choice="required", tokenizer=tok
    )
    assert result.tag is not None
    assert not any("not enforced" in reason for reason in result.reasons), result.reasons
    return result.tag


def _oracle(syntax: str, definition: str, text: str) -> bool:
    if syntax == "regex":
        return re.fullmatch(definition, text) is not None
    try:
        lark.Lark(definition, start="start").parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


@pytest.mark.parametrize(("syntax", "definition"), [("lark", LARK), ("regex", REGEX)])
def test_the_tag_accepts_a_custom_call_iff_its_grammar_accepts_the_input(
    syntax: str, definition: str
) -> None:
    tok = tokenizer_for("qwen3")
    compiled = compile_tag(_tag(syntax, definition), tok)
    verdicts = []
    for text in INPUTS:
        arguments = json.dumps({"input": text}, ensure_ascii=False)
        call = '<tool_call>\n{"name": "run", "arguments": ' + arguments + "}\n</tool_call>"
        assert unwrap(arguments) == text
        verdicts.append(accepts(compiled, tok.encode(call)))
        assert verdicts[-1] == _oracle(syntax, definition, text), text
    assert any(verdicts) and not all(verdicts)  # the inputs test both outcomes


def test_escaping_maps_every_terminal_kind() -> None:
    assert escaped('root ::= "a\\"b\\n"') == 'root ::= "a\\\\\\"b\\\\n"'
    assert escaped('root ::= [\\n"]') == 'root ::= ("\\\\n" | "\\\\\\"")'
    assert escaped('root ::= "<x"', forced="<") == 'root ::= "\\\\u003cx"'
    with pytest.raises(ValueError):
        escaped('root ::= "\\x4"')


def _forced(name: str, spec: dict[str, object]) -> TagResult:
    tool = {"type": "custom", "custom": {"name": "run", "format": spec}}
    request = ChatRequest(
        model="m", messages=[{"role": "user", "content": "x"}], tools=[tool], tool_choice="required"
    )
    tok = tokenizer_for("qwen3")
    return structural_tag_with_reason(
        name, offer(request).call_tools, tool_choice="required", tokenizer=tok
    )


@pytest.mark.parametrize("name", formats.names())
def test_every_format_enforces_the_grammar_or_says_it_does_not(name: str) -> None:
    """Each format's forced tag (on Qwen3's vocabulary) for a custom tool with a regex
    either differs from the tag of the same tool without a grammar (the grammar is in
    the call) or names the tool in its reasons as not enforced: never both, never
    neither."""
    grammar = {"type": "grammar", "grammar": {"syntax": "regex", "definition": "ZQXJ[0-9]+"}}
    shaped, free = _forced(name, grammar), _forced(name, {"type": "text"})
    assert shaped.tag is not None and free.tag is not None, shaped.reasons
    enforced = json.dumps(shaped.tag) != json.dumps(free.tag)
    said = any("'run'" in r and "not enforced" in r for r in shaped.reasons)
    assert enforced != said, (enforced, shaped.reasons)
