"""Kimi K3, Inkling and MiniMax M3: what is particular to each, literal outputs first.

Tokenizers (tests/cases.py): DERIVED ones (tests/derived.py: Qwen3's vocabulary plus
the family's markers as added tokens, at made-up ids), since neither the shared data
nor PyPI ships a vocabulary of these families. The invariant suite, the BFCL round
trips and the grammar agreement tests cover them like every format; this file holds
the outputs as vLLM's and SGLang's parsers document them, gating of delimiters made
of several pieces, K3's attributes and channels, Inkling's blocks, M3's nested
elements, and the tool_choice forms of their structural tags.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import cases
from tests.grammar_support import accepts, compile_tag
from toolwire import Message, Parser, formats
from toolwire.grammar import GrammarPolicy, structural_tag_with_reason

NS = "]<]minimax[>["
K3_CALL = (
    '<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>'
    '<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>'
    '<|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>'
    "<|close|>call<|sep|><|close|>tools<|sep|>"
)
INKLING_CALL = (
    '<|content_invoke_tool_json|>{"name": "get_weather", "args": {"city": "Paris", "days": 3}}'
    "<|end_message|>"
)
M3_CALL = (
    f'{NS}<tool_call>\n{NS}<invoke name="get_weather">\n{NS}<city>Paris{NS}</city>\n'
    f"{NS}<days>3{NS}</days>\n{NS}</invoke>\n{NS}</tool_call>"
)
WEATHER = [("get_weather", {"city": "Paris", "days": 3})]


def parse(fmt: str, text: str, *, spelled: str = "", **options: Any) -> Message:
    """`text` with its delimiters as ids, then `spelled` from ordinary ids."""
    tok = cases.tokenizer(fmt)
    ids = tok.encode(text) + tok.encode(spelled, delimiters=False)
    parser = Parser(fmt, tok, tools=cases.TOOLS, **options)
    return Message.from_events(parser.feed(ids) + parser.finish())


def calls(msg: Message) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, json.loads(c.arguments)) for c in msg.tool_calls]


@pytest.mark.parametrize("fmt", ["kimi_k3", "inkling", "minimax_m3"])
def test_gated_and_spelled_calls_are_text(fmt: str) -> None:
    native = {"kimi_k3": K3_CALL, "inkling": INKLING_CALL, "minimax_m3": M3_CALL}[fmt]
    assert Parser(fmt, cases.tokenizer(fmt)).gated
    assert calls(parse(fmt, native)) == WEATHER
    echoed = parse(fmt, "", spelled=native)
    assert echoed.tool_calls == [] and echoed.content == native


def test_k3_channels_attributes_and_types() -> None:
    text = (
        "<|open|>think<|sep|>Weather.<|close|>think<|sep|>"
        "<|open|>response<|sep|>Checking.<|close|>response<|sep|>"
        + K3_CALL.replace(
            'key="city" type="string"<|sep|>Paris', 'key="city" type="string"<|sep|>42'
        ).replace('tool="get_weather"', 'tool="get_weather" index="7"')
        + "<|close|>message<|sep|><|end_of_msg|>"
    )
    msg = parse("kimi_k3", text)
    assert (msg.reasoning, msg.content) == ("Weather.", "Checking.")
    assert calls(msg) == [("get_weather", {"city": "42", "days": 3})]  # type="string": text
    # A string value is raw (only attributes are escaped); a JSON type is JSON.
    body = (
        '<|open|>tools<|sep|><|open|>call tool="search" index="1"<|sep|>'
        '<|open|>argument key="query" type="string"<|sep|>a "b" &amp; c<|close|>argument<|sep|>'
        '<|open|>argument key="filters" type="object"<|sep|>{"k": [1, null]}'
        "<|close|>argument<|sep|>"
        "<|close|>call<|sep|><|close|>tools<|sep|>"
    )
    assert calls(parse("kimi_k3", body)) == [
        ("search", {"query": 'a "b" &amp; c', "filters": {"k": [1, None]}})
    ]
    # The response channel ends reasoning that the prompt opened.
    msg = parse("kimi_k3", "Plan.<|open|>response<|sep|>Hi.", in_reasoning=True)
    assert (msg.reasoning, msg.content) == ("Plan.", "Hi.")


def test_k3_spelled_close_inside_a_value_stays_in_it() -> None:
    left, right = K3_CALL.split("Paris")
    spelled = "Pa<|close|>argument<|sep|><|close|>call<|sep|>ris"
    tok = cases.tokenizer("kimi_k3")
    ids = tok.encode(left) + tok.encode(spelled, delimiters=False) + tok.encode(right)
    parser = Parser("kimi_k3", tok, tools=cases.TOOLS)
    msg = Message.from_events(parser.feed(ids) + parser.finish())
    assert calls(msg) == [("get_weather", {"city": spelled, "days": 3})]


def test_inkling_blocks_in_any_order() -> None:
    text = (
        "<|content_text|>First.<|end_message|><|message_model|>" + INKLING_CALL
        + "<|message_model|><|content_thinking|>Then.<|end_message|>"
        "<|message_model|><|content_text|>Done.<|end_message|>"
    )  # fmt: skip
    msg = parse("inkling", text)
    assert calls(msg) == WEATHER
    assert (msg.content, msg.reasoning) == ("First.\nDone.", "Then.")
    # Sampling may end the last block: a complete call is still a call.
    ended = INKLING_CALL.replace("<|end_message|>", "<|content_model_end_sampling|>")
    assert calls(parse("inkling", ended)) == WEATHER
    # A text block ends a thinking block left open.
    msg = parse("inkling", "<|content_thinking|>Hmm.<|content_text|>Yes.")
    assert (msg.reasoning, msg.content) == ("Hmm.", "Yes.")


INKLING_HEADED = [
    # (output, content, reasoning): the header before a block is the message's
    # metadata (SGLang's inkling_detector.py form), whatever follows it.
    ("get_weather" + INKLING_CALL, None, None),  # the prompt opened the first header
    (
        "<|content_text|>Checking.<|end_message|><|message_model|>get_weather" + INKLING_CALL,
        "Checking.",
        None,
    ),
    (
        "<|content_thinking|>Hmm.<|end_message|><|message_model|> get_weather " + INKLING_CALL,
        None,
        "Hmm.",
    ),
    ("<|message_model|>get_weather" + INKLING_CALL, None, None),
]


@pytest.mark.parametrize(("text", "content", "reasoning"), INKLING_HEADED)
def test_inkling_header_is_the_calls_metadata(
    text: str, content: str | None, reasoning: str | None
) -> None:
    """The tool name between `<|message_model|>` and a block's kind never reaches
    content, in any chunking, held or streamed."""
    ids = cases.tokenizer("inkling").encode(text)
    for stream in (False, True):
        whole = cases.feed("inkling", ids, stream_arguments=stream)
        msg = Message.from_events(whole)
        assert calls(msg) == WEATHER
        assert (msg.content, msg.reasoning) == (content, reasoning)
        assert cases.feed("inkling", ids, range(1, len(ids)), stream_arguments=stream) == whole


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("Hello there<|end_message|>", "Hello there"),  # no block kind: what it wrote
        ("<|content_text|>A.<|end_message|><|message_model|>then text", "A.\nthen text"),
        ("<|message_model|>x<|message_model|><|content_text|>y<|end_message|>", "x\ny"),
        ("<|content_invoke_tool_text|>raw call<|end_message|>", "raw call"),
    ],
)
def test_inkling_header_without_a_block_kind_is_content(text: str, content: str) -> None:
    ids = cases.tokenizer("inkling").encode(text)
    msg = cases.message("inkling", ids)
    assert (msg.content, msg.tool_calls) == (content, [])
    assert cases.message("inkling", ids, range(1, len(ids))) == msg


def test_m3_nested_elements_lists_and_spacing() -> None:
    text = (
        f'{NS}<tool_call>\n{NS}<invoke name="search">\n{NS}<query>x{NS}</query>\n'
        f"{NS}<filters>{NS}<a>{NS}<item>1{NS}</item>{NS}<item>2.5{NS}</item>{NS}</a>"
        f"{NS}<b>{NS}</b>{NS}</filters>\n"
        f"{NS} <tags>{NS}<item>p{NS}</item>{NS}</tags>\n{NS}</invoke>\n{NS}</tool_call>"
    )
    msg = parse("minimax_m3", "<mm:think>Look.</mm:think>" + text)
    assert msg.reasoning == "Look."
    assert calls(msg) == [
        ("search", {"query": "x", "filters": {"a": [1, 2.5], "b": ""}, "tags": ["p"]})
    ]
    # An element left open is not a call: released as content.
    cut = parse("minimax_m3", text.split(f"{NS}</a>")[0])
    assert cut.tool_calls == [] and cut.content


FAST = GrammarPolicy(exclude_delimiters=False)


@pytest.mark.parametrize("fmt", ["kimi_k3", "inkling", "minimax_m3"])
def test_structural_tag_choices(fmt: str) -> None:
    """Named and required force a schema-valid call; auto also takes the content channel."""
    tok = cases.tokenizer(fmt)
    spec = formats.get(fmt)

    def whole(text: str, choice: Any) -> bool:
        result = structural_tag_with_reason(
            fmt, cases.TOOLS, tokenizer=tok, tool_choice=choice, policy=FAST
        )
        assert result.tag is not None and result.token_level, result.reasons
        return accepts(compile_tag(result.tag, tok), tok.encode(text))

    call = spec.render_output(calls=WEATHER)
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert whole(call, "required") and whole(call, named) and whole(call, "auto")
    assert not whole(spec.render_output(calls=[("get_time", {})]), named)
    mistyped = spec.render_output(calls=[("get_weather", {"city": "Paris", "days": "soon"})])
    assert not whole(mistyped, "required")
    missing = spec.render_output(calls=[("get_weather", {"days": 3})])  # city is required
    assert not whole(missing, named)
    assert not whole(spec.render_output(content="Hi."), "required")
    if fmt != "minimax_m3":  # a content channel before the calls, where text is allowed
        assert whole(spec.render_output(content="Hi.", calls=WEATHER), "auto")


# -- DeepSeek V4.1: V4's DSML with spaced tags -------------------------------------------

#: vLLM's `parser/deepseek_v41.py` terminals and SGLang's V4.1 detector, written out.
V41_CALL = (
    '<｜DSML｜ calls>\n<｜DSML｜ invoke name="get_weather">\n'
    '<｜DSML｜ parameter name="city" string="true">Paris</｜DSML｜ parameter>\n'
    '<｜DSML｜ parameter name="days" string="false">3</｜DSML｜ parameter>\n'
    "</｜DSML｜ invoke>\n</｜DSML｜ calls>"
)


def test_deepseek_v41_reads_spaced_dsml_and_v4_does_not() -> None:
    for stream in (False, True):
        msg = parse("deepseek_v41", "Plan.</think>" + V41_CALL, in_reasoning=True,
                    stream_arguments=stream)  # fmt: skip
        assert calls(msg) == WEATHER and msg.reasoning == "Plan."
    # Each revision's tags are its own: V4's unspaced ones are not V4.1's, and back.
    v4_call = formats.get("deepseek_v4").render(WEATHER)
    assert parse("deepseek_v41", v4_call).tool_calls == []
    assert parse("deepseek_v4", V41_CALL).tool_calls == []
    # Spelled from ordinary ids, the `｜DSML｜` is text: no call.
    echoed = parse("deepseek_v41", "Log: ", spelled=V41_CALL)
    assert echoed.tool_calls == [] and echoed.content == "Log: " + V41_CALL
