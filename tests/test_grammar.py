"""Structural tags: policy table, tool_choice mapping, schemas, fallbacks, legacy shape,
and XGrammar's built-in templates compared with ours.

Strings are checked with XGrammar's matcher on the compiled tag (Qwen3's tokenizer:
`<tool_call>` is the added token 151657, so hermes/qwen3 tags are token-level).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests import cases
from tests.data import needs, tokenizer_for
from tests.grammar_support import accepts, bfcl, compile_tag, xgr
from toolwire import (
    GrammarPolicy,
    Message,
    Parser,
    formats,
    structural_tag,
    structural_tag_with_reason,
)
from toolwire.errors import UsageError
from toolwire.formats.spec import HeaderShape
from toolwire.grammar import legacy_structural_tag, normalize
from toolwire.grammar.harmony import _header_classes
from toolwire.grammar.preflight import check
from toolwire.grammar.schema import strip_lookaround

FAST = GrammarPolicy(exclude_delimiters=False)
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
TIME = {"type": "function", "function": {"name": "get_time"}}  # no parameters at all
TOOLS = [WEATHER, TIME]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TIME_CALL = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'


def _accepts(text: str | list[int], fmt: str = "hermes", **kw: Any) -> bool:
    tok = tokenizer_for("qwen3")
    kw.setdefault("policy", FAST)
    tag = structural_tag(fmt, kw.pop("tools", TOOLS), tokenizer=tok, **kw)
    assert tag is not None
    ids = tok.encode(text) if isinstance(text, str) else text
    return accepts(compile_tag(tag, tok), ids)


# -- the policy table ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "choice", "parallel", "tools", "fallback"),
    [
        (GrammarPolicy(enabled=False), "required", True, TOOLS, "disabled"),
        (GrammarPolicy(scope="auto"), "auto", True, TOOLS, "scope"),
        (GrammarPolicy(scope="auto"), "auto", False, TOOLS, None),
        (
            GrammarPolicy(scope="auto"),
            "auto",
            True,
            [{"type": "function", "function": {**WEATHER["function"], "strict": True}}],
            None,
        ),
        (GrammarPolicy(scope="auto"), "required", True, TOOLS, None),
        (GrammarPolicy(scope="auto"), {"function": {"name": "get_time"}}, True, TOOLS, None),
        (GrammarPolicy(), "auto", True, TOOLS, None),
        (GrammarPolicy(), "auto", True, [], "no_tools"),
    ],
)
def test_policy_table(
    policy: GrammarPolicy, choice: Any, parallel: bool, tools: list[Any], fallback: str | None
) -> None:
    result = structural_tag_with_reason(
        "hermes", tools, tool_choice=choice, parallel_tool_calls=parallel, policy=policy
    )
    assert result.fallback == fallback
    assert (result.tag is None) == (fallback is not None)
    if fallback is not None:
        assert result.reasons


def test_policy_rejects_unknown_values() -> None:
    with pytest.raises(UsageError):
        GrammarPolicy(scope="sometimes")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        structural_tag("hermes", TOOLS, tool_choice="maybe")
    with pytest.raises(UsageError):
        structural_tag("hermes", TOOLS, tool_choice={"function": {"name": "nope"}})


# -- tool_choice mapping -------------------------------------------------------------


def test_auto_allows_text_and_calls() -> None:
    assert _accepts("Just text.")
    assert _accepts("Sure. " + CALL + "\n" + TIME_CALL + " Done.")
    assert not _accepts('<tool_call>\n{"name": "get_weather", "arguments": {"days": 2}}')


def test_required_needs_a_call_and_no_leading_text() -> None:
    assert not _accepts("Just text.", tool_choice="required")
    assert not _accepts("Sure. " + CALL, tool_choice="required")
    assert _accepts(CALL, tool_choice="required")
    assert _accepts(CALL + "\n" + TIME_CALL, tool_choice="required")


def test_named_is_exactly_one_call_to_that_tool() -> None:
    named = {"type": "function", "function": {"name": "get_time"}}
    assert _accepts(TIME_CALL, tool_choice=named)
    assert not _accepts(CALL, tool_choice=named)
    assert not _accepts(TIME_CALL + "\n" + TIME_CALL, tool_choice=named)


def test_none_excludes_the_tool_delimiters() -> None:
    tok = tokenizer_for("qwen3")
    assert _accepts("Just text.", tool_choice="none")
    assert not _accepts("Text " + CALL, tool_choice="none")
    # Token level: the delimiter spelled from ordinary ids is text, so it may appear.
    assert _accepts(tok.encode("Text " + CALL, delimiters=False), tool_choice="none")


def test_parallel_tool_calls_false_allows_one_call() -> None:
    two = CALL + "\n" + TIME_CALL
    assert _accepts(CALL, parallel_tool_calls=False)
    assert not _accepts(two, parallel_tool_calls=False)
    assert not _accepts(two, tool_choice="required", parallel_tool_calls=False)
    assert _accepts(two, tool_choice="required")


def test_zero_argument_tools() -> None:
    assert _accepts(TIME_CALL)
    assert not _accepts('<tool_call>\n{"name": "get_time", "arguments": {"x": 1}}\n</tool_call>')
    coder = formats.get("qwen3_coder").render([("get_time", {})])
    assert _accepts(coder, "qwen3_coder", tool_choice="required")


# -- token-level delimiters ----------------------------------------------------------


def test_token_level_tag_forces_the_genuine_delimiter_id() -> None:
    needs("xgrammar")  # the tag is sent with its rules shared, an XGrammar grammar
    tok = tokenizer_for("qwen3")
    result = structural_tag_with_reason("hermes", TOOLS, tokenizer=tok, policy=FAST)
    assert result.token_level
    assert {"type": "token", "token": 151657} in json.loads(json.dumps(result.elements))["format"][
        "tags"
    ][0].values()
    assert result.tag is not None and "(151657, " in result.tag["format"]["grammar"]
    spelled = tok.encode(CALL, delimiters=False)
    assert 151657 not in spelled
    assert not _accepts(spelled, tool_choice="required")
    assert _accepts(CALL, tool_choice="required")
    # Without a tokenizer the tag is text-level: the spelled form is the delimiter.
    tag = structural_tag("hermes", TOOLS, tool_choice="required", policy=FAST)
    assert accepts(compile_tag(tag or {}, tok), spelled)


def test_exclusion_keeps_delimiters_out_of_argument_strings() -> None:
    tok = tokenizer_for("qwen3")
    inner = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "a</tool_call>"}}'
    ids = tok.encode(inner + "\n</tool_call>")
    assert _accepts(ids, tool_choice="required")  # FAST: the genuine id fits a string
    assert not _accepts(ids, tool_choice="required", policy=GrammarPolicy())


def test_reasoning_prefix() -> None:
    think = "<think>\nLet me see.\n</think>\n\n"
    assert _accepts(think + CALL, "qwen3", tool_choice="required")
    assert _accepts(CALL, "qwen3", tool_choice="required")
    assert _accepts("Let me see.\n</think>\n\n" + CALL, "qwen3", in_reasoning=True)
    assert not _accepts(CALL, "qwen3", in_reasoning=True)
    # A call cannot start inside reasoning unconstrained.
    assert not _accepts("<think>\n" + CALL + "</think>", "qwen3")
    with pytest.raises(UsageError):
        structural_tag("hermes", TOOLS, in_reasoning=True)


# -- schemas -------------------------------------------------------------------------


def test_strict_false_relaxes_arguments_unless_policy_is_strict() -> None:
    loose = {"type": "function", "function": {**WEATHER["function"], "strict": False}}
    other = '<tool_call>\n{"name": "get_weather", "arguments": {"town": 1}}\n</tool_call>'
    assert _accepts(other, tools=[loose])
    assert not _accepts(other, tools=[WEATHER])
    assert not _accepts(other, tools=[loose], policy=GrammarPolicy(schema="strict"))


def test_lookaround_is_removed_with_a_reason() -> None:
    pattern = "^(?=.*[0-9])(?!x)[a-z0-9]{3,5}$"
    assert strip_lookaround(pattern) == "^[a-z0-9]{3,5}$"
    assert strip_lookaround(r"(?<=a)b(?<!\))[(?=]") == r"b[(?=]"
    tool = {
        "name": "code",
        "parameters": {
            "type": "object",
            "properties": {"c": {"type": "string", "pattern": pattern}},
        },
    }
    result = structural_tag_with_reason("hermes", [tool], policy=FAST)
    assert result.tag is not None and result.fallback is None
    assert any("look-around" in r for r in result.reasons)
    ok = '<tool_call>\n{"name": "code", "arguments": {"c": "abc1"}}\n</tool_call>'
    bad = '<tool_call>\n{"name": "code", "arguments": {"c": "ABC"}}\n</tool_call>'
    tok = tokenizer_for("qwen3")
    compiled = compile_tag(result.tag, tok)
    assert accepts(compiled, tok.encode(ok)) and not accepts(compiled, tok.encode(bad))


def test_bfcl_types_and_missing_parameters_are_normalized() -> None:
    schema, reasons = normalize(
        {
            "type": "dict",
            "properties": {
                "a": {"type": "float"},
                "b": {"type": "tuple", "items": {"type": "integer"}},
                "c": {"type": "any"},
                "d": {"type": "dict", "properties": {"e": {"type": "float"}}},
            },
        }
    )
    assert schema["type"] == "object"
    assert schema["properties"]["a"] == {"type": "number"}
    assert schema["properties"]["b"]["type"] == "array"
    assert "type" not in schema["properties"]["c"]
    assert schema["properties"]["d"]["properties"]["e"] == {"type": "number"}
    assert reasons == []
    assert normalize(None) == ({"type": "object", "properties": {}}, [])
    # Every BFCL schema compiles after normalization.
    for _, tools, _ in bfcl()[::5]:
        for tool in tools:
            fmt = {"type": "json_schema", "json_schema": normalize(tool.get("parameters"))[0]}
            assert check({"type": "structural_tag", "format": fmt}) is None, tool


def test_a_tag_that_does_not_compile_falls_back() -> None:
    needs("xgrammar")  # what does not compile is XGrammar's to say
    bad = {"name": "bad", "parameters": {"type": "object", "properties": {"a": {"type": "x"}}}}
    auto = structural_tag_with_reason("hermes", [bad], policy=FAST)
    assert auto.tag is None and auto.fallback == "compile_failed"
    assert any("does not compile" in r for r in auto.reasons)
    required = structural_tag_with_reason("hermes", [bad], tool_choice="required", policy=FAST)
    assert required.fallback == "relaxed" and required.tag is not None
    text = '<tool_call>\n{"name": "bad", "arguments": {"a": [1]}}\n</tool_call>'
    tok = tokenizer_for("qwen3")
    assert accepts(compile_tag(required.tag, tok), tok.encode(text))


# -- formats without a tag -----------------------------------------------------------


def test_unknown_and_unsupported_formats_return_none_with_a_reason() -> None:
    unknown = structural_tag_with_reason("no_such_format", TOOLS)
    assert unknown.tag is None and unknown.fallback == "unknown_format"
    assert "no_such_format" in unknown.reasons[0]
    # Token level needs every delimiter the grammar writes to be named by id.
    # Gemma 4: values element by element, so the `<|"|>` quote is its id.
    gtok = cases.tokenizer("gemma4")
    gemma = structural_tag_with_reason("gemma4", TOOLS, tokenizer=gtok, tool_choice="required")
    assert gemma.tag is not None and gemma.token_level
    gcall = formats.get("gemma4").render_output(calls=[("get_weather", {"city": "P"})])
    assert accepts(compile_tag(gemma.tag, gtok), gtok.encode(gcall))
    spelled_quote = gtok.encode(gcall.replace('<|"|>', "\x00"))
    quote_text = gtok.encode('<|"|>', delimiters=False)
    spelled = []
    for i in spelled_quote:
        spelled += quote_text if gtok.decode([i]) == "\x00" else [i]
    assert not accepts(compile_tag(gemma.tag, gtok), spelled)
    # DSML: `<` (text) then the `｜DSML｜` id; no token trigger, but a token-level tag
    # (free text without the id, alternating with call sections whose `<` is a token
    # of its own: " <" merged with a space cannot precede the id).
    tok = cases.tokenizer("deepseek_v4")
    dsml = structural_tag_with_reason("deepseek_v4", TOOLS, tokenizer=tok, policy=FAST)
    assert dsml.tag is not None and dsml.token_level
    call = formats.get("deepseek_v4").render_output(calls=[("get_time", {})])
    compiled = compile_tag(dsml.tag, tok)
    assert accepts(compiled, tok.encode("Sure.\n" + call + "\nDone."))
    required = structural_tag("deepseek_v4", TOOLS, tokenizer=tok, tool_choice="required")
    assert required is not None
    assert accepts(compile_tag(required, tok), tok.encode(call))
    assert not accepts(compile_tag(required, tok), tok.encode(call, delimiters=False))
    assert structural_tag("deepseek_v4", TOOLS) is not None  # text level


# -- formats built whole: pythonic, llama3_json, gpt_oss -----------------------------


def _whole(fmt: str, text: str, **kw: Any) -> bool:
    tok = cases.tokenizer(fmt)
    kw.setdefault("policy", FAST)
    result = structural_tag_with_reason(fmt, kw.pop("tools", TOOLS), tokenizer=tok, **kw)
    assert result.tag is not None, result.reasons
    assert result.token_level == (fmt == "gpt_oss")
    return accepts(compile_tag(result.tag, tok), tok.encode(text))


NAMED_TIME = {"type": "function", "function": {"name": "get_time"}}


def test_pythonic_choices() -> None:
    one, two = '[get_weather(city="Paris")]', '[get_weather(city="Paris", days=3), get_time()]'
    assert _whole("pythonic", two) and _whole("pythonic", "Sure:\n" + one)
    assert _whole("pythonic", "Just text.")
    assert not _whole("pythonic", "Text [get_time()]")  # calls only at a line start
    assert not _whole("pythonic", "[get_weather(days=3)]")  # `city` is required
    assert not _whole("pythonic", "[get_weather(city=3)]")  # typed by the schema
    assert not _whole("pythonic", '[get_weather(days=3, city="Paris")]')  # schema order
    assert not _whole("pythonic", "[get_time(x=1)]")
    assert not _whole("pythonic", "Text\n" + one, tool_choice="required")
    assert _whole("pythonic", two, tool_choice="required")
    assert not _whole("pythonic", two, tool_choice="required", parallel_tool_calls=False)
    assert _whole("pythonic", "[get_time()]", tool_choice=NAMED_TIME)
    assert not _whole("pythonic", one, tool_choice=NAMED_TIME)
    assert not _whole("pythonic", one, tool_choice="none")
    literals = '[get_weather(city="a\\"b", days=-3)]'
    assert _whole("pythonic", literals)


def test_pythonic_reports_unenforced_keywords() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"n": {"type": "integer", "maximum": 9}},
            },
        },
    }
    result = structural_tag_with_reason("pythonic", [tool])
    assert result.tag is not None
    assert any("not enforced" in r and "n.maximum" in r for r in result.reasons)


def test_llama3_json_choices() -> None:
    one = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    two = one + '; {"name": "get_time", "parameters": {}}'
    assert _whole("llama3_json", two) and _whole("llama3_json", "Sure:\n" + one)
    assert not _whole("llama3_json", 'Text {"a": 1}')  # `{` opens calls only at a line start
    assert not _whole("llama3_json", '{"name": "get_weather", "parameters": {"days": 2}}')
    assert _whole("llama3_json", two, tool_choice="required")
    assert not _whole("llama3_json", two, tool_choice="required", parallel_tool_calls=False)
    assert not _whole("llama3_json", one, tool_choice=NAMED_TIME)
    assert not _whole("llama3_json", one, tool_choice="none")


def test_gpt_oss_choices_and_header_forms() -> None:
    sep = "<|start|>assistant"
    call = (
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "P"}'
    )
    call += "<|call|>"
    time = "<|channel|>commentary to=functions.get_time<|constrain|>json<|message|>{}<|call|>"
    first = sep + " to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>"
    analysis = "<|channel|>analysis<|message|>Think.<|end|>"
    final = "<|channel|>final<|message|>Hello."
    assert _whole("gpt_oss", analysis + sep + call + sep + time)
    assert _whole("gpt_oss", call + first)
    assert not _whole("gpt_oss", first.removeprefix(sep))  # the parser reads that as text
    assert _whole("gpt_oss", analysis + sep + final + "<|return|>")
    assert _whole("gpt_oss", final)
    assert not _whole("gpt_oss", final, tool_choice="required")
    assert not _whole("gpt_oss", call + sep + time, parallel_tool_calls=False)
    assert _whole("gpt_oss", time, tool_choice=NAMED_TIME)
    assert not _whole("gpt_oss", call, tool_choice=NAMED_TIME)
    assert not _whole("gpt_oss", call, tool_choice="none")
    assert not _whole("gpt_oss", call.replace('"P"', "3"))
    # Token level: a header spelled from ordinary ids is not a header.
    tok = cases.tokenizer("gpt_oss")
    tag = structural_tag("gpt_oss", TOOLS, tokenizer=tok, policy=FAST)
    assert tag is not None
    assert not accepts(compile_tag(tag, tok), tok.encode(call, delimiters=False))


def test_mistral_tag_compiles() -> None:
    """Mistral's test tokenizer (mistral-common) has no `tokenizers` backend, so no
    XGrammar TokenizerInfo: the token-level tag is only preflighted; the text-level
    tag is matched."""
    needs("xgrammar")
    token = structural_tag_with_reason("mistral", TOOLS, tokenizer=cases.tokenizer("mistral"))
    assert token.token_level and token.tag is not None and token.fallback is None
    assert '"token": 9' in json.dumps(token.elements)  # [TOOL_CALLS] by id
    assert "(9, " in json.dumps(token.tag)
    result = structural_tag_with_reason("mistral", TOOLS)
    assert result.tag is not None and result.fallback is None
    text = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
    grammar = xgr.Grammar.from_structural_tag(json.dumps(result.tag))
    info = xgr.TokenizerInfo([chr(i) for i in range(32, 127)] + ["\n"])
    matcher = xgr.GrammarMatcher(
        xgr.GrammarCompiler(info).compile_grammar(grammar), terminate_without_stop_token=True
    )
    assert matcher.accept_string(text) and matcher.is_completed()


# -- legacy shape --------------------------------------------------------------------


def test_legacy_shape_for_json_argument_formats() -> None:
    legacy = legacy_structural_tag("hermes", TOOLS)
    assert legacy is not None
    assert legacy["triggers"] == ["<tool_call>"]
    first = legacy["structures"][0]
    assert first["begin"] == '<tool_call>\n{"name": "get_weather", "arguments": '
    assert first["end"] == "}\n</tool_call>"
    assert legacy["structures"][1]["schema"] == {"type": "object", "properties": {}}
    items = [xgr.StructuralTagItem(**s) for s in legacy["structures"]]
    compiled = compile_tag(
        json.loads(
            xgr.structural_tag.StructuralTag.from_legacy_structural_tag(
                items, legacy["triggers"]
            ).model_dump_json()
        ),
        tokenizer_for("qwen3"),
    )
    assert accepts(compiled, tokenizer_for("qwen3").encode("Hi " + CALL))
    assert legacy_structural_tag("qwen3_coder", TOOLS) is None
    assert legacy_structural_tag("kimi_k2", TOOLS) is None  # the head holds a call index


# -- XGrammar's built-in templates ---------------------------------------------------

#: our format -> XGrammar's built-in model style.
BUILTIN = {
    "llama3_json": "llama",
    "hermes": "qwen_3",
    "qwen3": "qwen_3",
    "qwen3_coder": "qwen_3_coder",
    "deepseek_v31": "deepseek_v3_1",
    "kimi_k2": "kimi",
    "glm47": "glm_4_7",
    "minimax_m2": "minimax",
    "deepseek_v32": "deepseek_v3_2",
    "deepseek_v4": "deepseek_v4",
}


@pytest.mark.parametrize("fmt", sorted(BUILTIN))
def test_ours_accepts_what_the_builtin_accepts(fmt: str) -> None:
    """On BFCL ground truth (text-level matching, so both tags see the same strings):
    every rendered output XGrammar's built-in template accepts, ours accepts too.

    The built-ins are run with reasoning "disabled". MiniMax's built-in then still
    closes the reasoning its template opened (`\n</think>\n\n\n\n` first), so for
    MiniMax the corpus is rendered with that prefix and ours is built with
    `in_reasoning=True` (an empty reasoning block). Ours also accepts
    strings the built-ins do not (counted, not asserted): whitespace variants the
    parser reads, calls between text with `tool_choice="auto"`.
    """
    spec = formats.get(fmt)
    chars = {c for name in formats.names() for d in formats.get(name).delimiters for c in d}
    vocab = sorted({chr(i) for i in range(32, 127)} | {"\n"} | chars)
    info = xgr.TokenizerInfo(vocab)
    both = ours_only = builtin_only = 0
    for _, tools, calls in bfcl()[::40]:
        wrapped = [{"type": "function", "function": t} for t in tools]
        schemas = {t["name"]: normalize(t.get("parameters"))[0] for t in tools}
        normal = [
            {"type": "function", "function": {"name": n, "parameters": s}}
            for n, s in schemas.items()
        ]
        builtin = xgr.get_model_structural_tag(
            BUILTIN[fmt], tools=normal, reasoning="disabled", tool_choice="auto"
        )
        inside = fmt == "minimax_m2"
        ours = structural_tag(fmt, wrapped, in_reasoning=inside, policy=FAST)
        assert ours is not None
        b_grammar = xgr.Grammar.from_structural_tag(builtin.model_dump_json())
        o_grammar = xgr.Grammar.from_structural_tag(json.dumps(ours))
        compiler = xgr.GrammarCompiler(info)
        text = spec.render_output(calls=calls)
        if inside:
            text = "\n</think>\n\n\n\n" + text
        if not set(text) <= set(vocab):
            continue
        results = []
        for grammar in (b_grammar, o_grammar):
            matcher = xgr.GrammarMatcher(
                compiler.compile_grammar(grammar), terminate_without_stop_token=True
            )
            results.append(matcher.accept_string(text) and matcher.is_completed())
        both += results[0] and results[1]
        builtin_only += results[0] and not results[1]
        ours_only += results[1] and not results[0]
    assert both >= 10 and builtin_only == 0, (fmt, both, builtin_only, ours_only)


def _in_order(args: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments in the schema's property order (both grammars enforce it)."""
    order = list(schema.get("properties") or {})
    return dict(sorted(args.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 0))


def test_harmony_builtin_header_forms() -> None:
    """XGrammar's built-in harmony template writes three call headers; on BFCL ground
    truth (text level) ours accepts every string it accepts, except one explained
    difference: the built-in allows a recipient-first header (` to=functions.f
    <|channel|>commentary ...`) as the very first message, which the parser reads as
    content (the prompt's `<|start|>assistant` header has ended), so ours requires
    `<|start|>assistant` before it (and then accepts it, and the parser reads the calls).
    """
    sep = "<|start|>assistant"
    forms = (
        "<|channel|>commentary to=functions.{n}<|constrain|>json<|message|>{a}<|call|>",
        " to=functions.{n}<|channel|>commentary <|constrain|>json<|message|>{a}<|call|>",
        " to=functions.{n}<|channel|>commentary json<|message|>{a}<|call|>",
    )
    vocab = sorted({chr(i) for i in range(32, 127)} | {"\n"})
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo(vocab))
    tok = cases.tokenizer("gpt_oss")

    def matches(tag: str, text: str) -> bool:
        compiled = compiler.compile_grammar(xgr.Grammar.from_structural_tag(tag))
        matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        return bool(matcher.accept_string(text) and matcher.is_completed())

    checked = 0
    for _, tools, calls in bfcl()[::40]:
        schemas = {t["name"]: normalize(t.get("parameters"))[0] for t in tools}
        normal = [
            {"type": "function", "function": {"name": n, "parameters": sch}}
            for n, sch in schemas.items()
        ]
        builtin = xgr.get_model_structural_tag(
            "harmony", tools=normal, reasoning="disabled", tool_choice="auto"
        ).model_dump_json()
        wrapped = [{"type": "function", "function": t} for t in tools]
        ours = json.dumps(structural_tag("gpt_oss", wrapped, policy=FAST))
        for n, form in enumerate(forms):
            text = sep.join(
                form.format(n=name, a=json.dumps(_in_order(args, schemas[name])))
                for name, args in calls
            )
            # Ground truth outside its own schema (BFCL is loose) is rejected by both.
            if not set(text) <= set(vocab) or not matches(builtin, text):
                continue
            assert matches(ours, text) == (n == 0), (n, text)
            if n:
                assert matches(ours, sep + text)
                parsed = Parser("gpt_oss", tok, tools=wrapped)
                events = parsed.feed(tok.encode(sep + text)) + parsed.finish()
                assert len(Message.from_events(events).tool_calls) == len(calls)
            checked += 1
    assert checked >= 30, checked


def test_harmony_header_classes_spell_exactly_the_shape_headers() -> None:
    """The call headers factored around the name (one `or` of prefixes, then per tool
    the name and one `or` of suffixes): the classes' products are the shape's headers,
    bare or after `start`, each once, and no other."""
    shape = formats.get("gpt_oss").grammar
    assert isinstance(shape, HeaderShape)
    classes = _header_classes(shape)
    spelled = [
        p + "{name}" + s for prefixes, suffixes in classes for p in prefixes for s in suffixes
    ]
    expected = [*shape.calls, *(shape.start + h for h in (*shape.calls, *shape.calls_after_start))]
    assert sorted(spelled) == sorted(expected) and len(set(spelled)) == len(spelled)
    assert len(classes) == 2  # the channel-first forms share their endings


def test_harmony_tag_reads_every_header_form_for_names_that_prefix_each_other() -> None:
    """With tools `get` and `get_weather`, every header form takes either name (the
    factored tag branches after the common prefix, so a name that is a prefix of another
    must still end where its own suffix begins) and no form takes an undeclared name."""
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
        for n in ("get", "get_weather")
    ]
    tag = json.dumps(structural_tag("gpt_oss", tools, policy=FAST))
    vocab = sorted({chr(i) for i in range(32, 127)} | {"\n"})
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo(vocab)).compile_grammar(
        xgr.Grammar.from_structural_tag(tag)
    )

    def matches(text: str) -> bool:
        matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        return bool(matcher.accept_string(text) and matcher.is_completed())

    shape = formats.get("gpt_oss").grammar
    assert isinstance(shape, HeaderShape)
    headers = [*shape.calls, *(shape.start + h for h in (*shape.calls, *shape.calls_after_start))]
    for header in headers:
        for name, ok in (("get", True), ("get_weather", True), ("get_weathe", False)):
            assert matches(header.replace("{name}", name) + "{}<|call|>") == ok, (header, name)


@pytest.mark.parametrize("fmt", ["hermes", "granite", "apertus", "qwen3_coder", "glm45"])
def test_call_heads_branch_on_names_that_prefix_each_other(fmt: str) -> None:
    """The tools' call heads are one radix tree of their text (`build._calls`): every
    declared name is a call, however the names share their beginnings or one is the
    other's prefix, and a prefix no tool is named is none."""
    names = ["get", "get_time", "get_weather", "set", "sett"]
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
        for n in names
    ]
    tag = json.dumps(structural_tag(fmt, tools, policy=FAST, tool_choice="required"))
    vocab = sorted({chr(i) for i in range(32, 127)} | {"\n"})
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo(vocab)).compile_grammar(
        xgr.Grammar.from_structural_tag(tag)
    )

    def matches(name: str) -> bool:
        text = formats.get(fmt).render_output(calls=[(name, {})])
        matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        return bool(matcher.accept_string(text) and matcher.is_completed())

    assert all(matches(n) for n in names), [n for n in names if not matches(n)]
    assert not any(matches(n) for n in ("ge", "get_w", "se", "settt")), fmt


def test_shared_rules_hold_one_copy_of_the_string_rules_whatever_the_tools() -> None:
    """The tag is sent as one grammar in which the rules every tool repeats (JSON
    strings with the delimiter exclusion, numbers, objects) exist once: as many string
    exclusion rules for 20 tools as for 1, so the compile cost they carry is paid once."""
    needs("xgrammar")
    tok = tokenizer_for("qwen3")
    tools = [t for _, ts, _ in bfcl() for t in ts]
    names = {t["name"]: t for t in tools}
    counts = []
    for n in (1, 20):
        result = structural_tag_with_reason("hermes", list(names.values())[:n], tokenizer=tok)
        assert result.tag is not None and result.fallback is None
        grammar = result.tag["format"]["grammar"]
        heads = re.findall(r"^(\w+) ::= ", grammar, re.M)
        counts.append(sum("exclude" in h for h in heads))
        elements = xgr.Grammar.from_structural_tag(json.dumps(result.elements))
        per_tool = [h for h in re.findall(r"^(\w+) ::= ", str(elements), re.M) if "exclude" in h]
        assert len(per_tool) >= n * counts[-1]  # as built, each tool had its own copy
    assert counts[0] == counts[1] > 0


# -- a vocabulary's grammar views, built from the tokenizers backend --------------------


#: Three kinds of vocabulary: byte-level BPE (Qwen3), SentencePiece-style (Gemma 4), DeepSeek V4's.
VIEWED = ["hermes", "gemma4", "deepseek_v32"]


@pytest.mark.parametrize("fmt", VIEWED)
def test_xgrammars_view_of_a_vocabulary_is_its_own_hugging_face_reading(fmt: str) -> None:
    """`tokenizer_info` reads the `tokenizers` backend directly (no `transformers`
    wrapper): the same vocabulary, metadata and special ids as
    `TokenizerInfo.from_huggingface` on the wrapped tokenizer."""
    import transformers

    from toolwire.grammar.preflight import _from_backend

    tok = cases.tokenizer(fmt)
    stops = sorted(tok.eos_ids) or None
    direct = _from_backend(xgr, tok, stops)
    assert direct is not None
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok.backend)
    wrapped = xgr.TokenizerInfo.from_huggingface(
        fast, vocab_size=tok.vocab_size, stop_token_ids=stops
    )
    assert direct.dump_metadata() == wrapped.dump_metadata()
    assert direct.decoded_vocab == wrapped.decoded_vocab
    assert list(direct.special_token_ids) == list(wrapped.special_token_ids)


@pytest.mark.parametrize("fmt", VIEWED)
def test_llguidance_reads_every_added_token_as_special(fmt: str) -> None:
    """The vocabulary llguidance is given is the tokenizer's own `tokenizer.json` with
    each added token's `special` set, and nothing else changed."""
    from toolwire.grammar.guidance import _all_added_special, _tokenizer_json

    text = _tokenizer_json(cases.tokenizer(fmt))
    expected = json.loads(text)
    for token in expected["added_tokens"]:
        token["special"] = True
    assert json.loads(_all_added_special(text)) == expected
