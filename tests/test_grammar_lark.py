"""llguidance's form of the structural tags: the same language, where it can be written.

The agreement tests (tests/test_grammar_agreement.py) run both backends on BFCL; these
check the policy table and the bounds on both backends with the same expectations, what
llguidance cannot express (with the reason, and XGrammar's tag instead), that no
special token stands inside a JSON value on llguidance, and which form each engine gets.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests import cases
from tests.data import tokenizer_for
from tests.grammar_support import BACKENDS, accepts_all, constraint, need
from toolwire import GrammarPolicy, formats
from toolwire.backends.grammar_backend import GUIDANCE, XGRAMMAR, lark_of, request_grammar
from toolwire.grammar import lark_grammar_with_reason
from toolwire.grammar.guidance import llguidance_module, upstream_specials
from toolwire.grammar.lark import LarkUnsupported, to_lark

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time"}}
TOOLS = [WEATHER, TIME]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TIME_CALL = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
NAMED = {"type": "function", "function": {"name": "get_time"}}


def _accepts(backend: str, text: str | list[int], fmt: str = "hermes", **kw: Any) -> bool:
    need(backend)
    tok = tokenizer_for("qwen3")
    compiled = constraint(backend, fmt, tok, kw.pop("tools", TOOLS), **kw)
    assert compiled is not None
    return accepts_all(compiled, tok.encode(text) if isinstance(text, str) else text)


#: (output, request options, accepted): the policy table, one language for both.
TABLE: list[tuple[str, dict[str, Any], bool]] = [
    ("Just text.", {}, True),
    ("Sure. " + CALL + "\n" + TIME_CALL + " Done.", {}, True),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"days": 2}}', {}, False),
    ("Just text.", {"tool_choice": "required"}, False),
    ("Sure. " + CALL, {"tool_choice": "required"}, False),
    (CALL, {"tool_choice": "required"}, True),
    (CALL + "\n" + TIME_CALL, {"tool_choice": "required"}, True),
    (TIME_CALL, {"tool_choice": NAMED}, True),
    (CALL, {"tool_choice": NAMED}, False),
    (TIME_CALL + "\n" + TIME_CALL, {"tool_choice": NAMED}, False),
    ("Just text.", {"tool_choice": "none"}, True),
    ("Text " + CALL, {"tool_choice": "none"}, False),
    (CALL + "\n" + TIME_CALL, {"parallel_tool_calls": False}, False),
    ('<tool_call>\n{"name": "get_time", "arguments": {"x": 1}}\n</tool_call>', {}, False),
    ("<think>\nhm\n</think>\n\n" + CALL, {"tool_choice": "required", "fmt": "qwen3"}, True),
    ("Let me see.\n</think>\n\n" + CALL, {"fmt": "qwen3", "in_reasoning": True}, True),
    (CALL, {"fmt": "qwen3", "in_reasoning": True}, False),
]


@pytest.mark.parametrize(("text", "options", "accepted"), TABLE)
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_policy_table_holds_on_both_backends(
    backend: str, text: str, options: dict[str, Any], accepted: bool
) -> None:
    options = dict(options)
    fmt = options.pop("fmt", "hermes")
    options.setdefault("in_reasoning", False)
    assert _accepts(backend, text, fmt, **options) is accepted


@pytest.mark.parametrize("backend", BACKENDS)
def test_json_whitespace_is_bounded_alike(backend: str) -> None:
    """W(16): compact, `json.dumps` and space-indented JSON; no run past the bound, no
    tab (the shared XGrammar tag and the Lark grammar write the same whitespace)."""

    def call(arguments: str) -> str:
        return f'<tool_call>\n{{"name": "get_weather", "arguments": {arguments}}}\n</tool_call>'

    kw = {"tool_choice": "required", "in_reasoning": False}
    assert _accepts(backend, call('{"city":"Paris","days":2}'), **kw)
    assert _accepts(backend, call('{"city": "Paris", "days": 2}'), **kw)
    assert _accepts(backend, call('{\n    "city": "Paris",\n    "days": 2\n}'), **kw)
    assert not _accepts(backend, call('{"city":' + " " * 17 + '"Paris"}'), **kw)
    assert not _accepts(backend, call('{"city":\t"Paris"}'), **kw)


def test_no_special_token_stands_in_a_json_value_on_llguidance() -> None:
    """A delimiter's id inside a string value is refused by construction (its spelled
    text, which the gated parser reads as text, is not); so is an added token that
    llguidance's own reading would take as text (DeepSeek's `｜DSML｜`)."""
    need(GUIDANCE)
    tok = tokenizer_for("qwen3")
    kw = {"tool_choice": "required", "in_reasoning": False, "tools": [cases.TOOLS[1]]}
    head = tok.encode('<tool_call>\n{"name": "search", "arguments": {"query": "a')
    tail = tok.encode(' b"}}\n</tool_call>')
    genuine = tok.encode("<tool_call>")
    spelled = tok.encode("<tool_call>", delimiters=False)
    assert genuine != spelled
    assert not _accepts(GUIDANCE, head + genuine + tail, **kw)
    assert _accepts(GUIDANCE, head + spelled + tail, **kw)
    dsml = cases.tokenizer("deepseek_v32")
    (mark,) = dsml.encode("｜DSML｜")
    compiled = constraint(GUIDANCE, "deepseek_v32", dsml, [WEATHER], tool_choice="required")
    assert compiled is not None
    matcher = compiled.matcher()
    text = formats.get("deepseek_v32").render_output(calls=[("get_weather", {"city": "Pa"})])
    ids = dsml.encode(text)
    cut = next(n for n in range(len(ids)) if dsml.decode(ids[:n]).endswith("Pa"))
    assert all(matcher.accept(i) for i in ids[:cut])
    assert not matcher.allowed()[mark]


@pytest.mark.parametrize(
    ("fmt", "tokenizer", "why"),
    [
        ("pythonic", False, "EBNF grammar element"),
        ("lfm2", True, "EBNF grammar element"),
        ("hermes", False, "text-level triggers"),
        ("hermes-required", False, "excludes text"),
    ],
)
def test_what_llguidance_cannot_express_says_why(fmt: str, tokenizer: bool, why: str) -> None:
    """Python-literal arguments (an XGrammar EBNF) and, at text level, free text that
    dispatches on a string or JSON strings that must exclude delimiter text: no Lark
    form; XGrammar's tag is used there."""
    fmt, _, choice = fmt.partition("-")
    tok = cases.tokenizer(fmt) if tokenizer else None
    kw: dict[str, Any] = {"tokenizer": tok, "in_reasoning": False, "tool_choice": choice or "auto"}
    result = lark_grammar_with_reason(fmt, TOOLS, **kw)
    assert result.lark is None
    assert result.fallback == "unsupported_backend"
    assert why in result.reasons[-1]
    if choice:  # without the exclusion, the forced text-level call has a Lark form
        loose = GrammarPolicy(exclude_delimiters=False)
        assert lark_grammar_with_reason(fmt, TOOLS, policy=loose, **kw).lark is not None


def test_an_upstream_reading_a_delimiter_as_text_gets_no_lark() -> None:
    """llguidance's Hugging Face reading (vLLM's, SGLang's) takes `｜DSML｜` (added, not
    special) as an ordinary token: a text lexeme could write it, so no Lark form."""
    need(GUIDANCE)
    tok = cases.tokenizer("deepseek_v32")
    (mark,) = tok.encode("｜DSML｜")
    specials = upstream_specials(tok)
    assert mark not in specials
    assert tokenizer_for("qwen3").encode("<tool_call>")[0] in upstream_specials(
        tokenizer_for("qwen3")
    )
    result = lark_grammar_with_reason("deepseek_v32", TOOLS, tokenizer=tok, special_ids=specials)
    assert result.lark is None and result.fallback == "unsupported_backend"
    assert str(mark) in result.reasons[-1]


class _Embedded:
    grammar_backends = (GUIDANCE, XGRAMMAR)

    def compile_structural_tag(self, tag: Any) -> Any:
        raise AssertionError("not compiled here")


class _Upstream:
    def __init__(self, backend: str) -> None:
        self.grammar_backends = (backend,)


def test_each_engine_gets_the_form_of_its_backend() -> None:
    tok = tokenizer_for("qwen3")
    kw: dict[str, Any] = {"tokenizer": tok, "in_reasoning": False}
    embedded = request_grammar(_Embedded(), "hermes", TOOLS, **kw)
    assert embedded.tag is not None and lark_of(embedded.tag) is not None
    # Where llguidance cannot express the tag, the embedded engine takes XGrammar's.
    pythonic = request_grammar(_Embedded(), "lfm2", TOOLS, tokenizer=cases.tokenizer("lfm2"))
    assert pythonic.tag is not None and pythonic.tag["type"] == "structural_tag"
    assert any("llguidance cannot express" in r for r in pythonic.reasons)
    upstream = request_grammar(_Upstream(XGRAMMAR), "hermes", TOOLS, **kw)
    assert upstream.tag is not None and upstream.tag["type"] == "structural_tag"
    guided = request_grammar(_Upstream(GUIDANCE), "hermes", TOOLS, **kw)
    assert guided.tag is not None and lark_of(guided.tag) is not None
    # An llguidance upstream gets no XGrammar tag: no constraint, and why.
    lfm2 = request_grammar(_Upstream(GUIDANCE), "lfm2", TOOLS, tokenizer=cases.tokenizer("lfm2"))
    assert lfm2.tag is None and lfm2.fallback == "unsupported_backend"


def test_the_embedded_constraint_masks_a_genuine_call() -> None:
    """The engine's llguidance constraint allows each id of a genuine call, forbids
    text where a call is forced, and allows the end of sequence once the call is done."""
    need(GUIDANCE)
    from toolwire.backends.constraint import GuidanceConstraint

    tok = tokenizer_for("qwen3")
    guidance = GuidanceConstraint.load(tok, tok.eos_ids)
    assert guidance is not None
    result = request_grammar(_Embedded(), "hermes", TOOLS, tokenizer=tok, tool_choice="required")
    assert result.tag is not None
    sequence = guidance.start(result.tag, guidance.compile(result.tag))
    (eos,) = tok.eos_ids
    first = True
    for token in tok.encode(TIME_CALL):
        scores = np.zeros(tok.vocab_size, dtype=np.float32)
        sequence.mask(scores)
        assert scores[token] == 0
        if first:
            assert scores[tok.encode("Sure")[0]] == -np.inf  # a call is forced
            first = False
        assert sequence.accept(token)
    scores = np.zeros(tok.vocab_size, dtype=np.float32)
    sequence.mask(scores)
    assert scores[eos] == 0


# -- the translation itself (pure) -------------------------------------------------------


def _tag(element: dict[str, Any]) -> dict[str, Any]:
    return {"type": "structural_tag", "format": element}


def test_equal_elements_are_one_rule_and_key_order_is_kept() -> None:
    schema = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}
    value = {"type": "json_schema", "json_schema": schema}
    lark = to_lark(_tag({"type": "or", "elements": [value, value]}), token_level=True)
    (line,) = [x for x in lark.splitlines() if "%json" in x]
    body = json.loads(line.split("%json ", 1)[1])
    assert list(body["properties"]) == ["b", "a"]  # a schema grammar enforces this order
    assert body["additionalProperties"] is False  # XGrammar's strict default


def test_free_text_excludes_delimiters_as_literal_text() -> None:
    """Delimiter text with regex metacharacters is excluded as written."""
    element = {"type": "any_text", "excludes": ["<|tool_call>", "a.b"]}
    lark = to_lark(_tag(element), token_level=False)
    assert "<\\|tool_call>" in lark and "a\\.b" in lark
    if llguidance_module() is not None:
        from toolwire.grammar.guidance import check_lark

        assert check_lark(lark) is None


def test_only_structural_tags_of_elements_translate() -> None:
    with pytest.raises(LarkUnsupported):
        to_lark({"type": "structural_tag", "structures": []}, token_level=True)
    with pytest.raises(LarkUnsupported):
        to_lark(_tag({"type": "grammar", "grammar": "root ::= 'x'"}), token_level=True)
