"""Calls wrapped in delimiters (DeepSeek, Kimi, GLM, MiniMax, Gemma 4): per-format
behaviour, one table. (Hermes and Qwen3 wrap theirs too: tests/test_core_cases.py;
formats whose calls no delimiter pair wraps: tests/test_formats_unwrapped_calls.py.)

Tokenizers (tests/cases.py): DeepSeek's are real vocabularies; Kimi K2, GLM, MiniMax M2
and Gemma 4 use DERIVED tokenizers (tests/derived.py: Qwen3's vocabulary plus the
family's delimiters as added tokens, Kimi's at their real ids), since no vocabulary
of theirs exists offline. The invariant suite and the BFCL round trips
(tests/test_invariants.py, tests/test_bfcl_roundtrip.py) cover these formats too;
this file holds what is particular to them: literal outputs written as the chat
templates write them, their token ids, echoes, truncation, undeclared tools,
reasoning, parallel calls in one delta, schema typing and provisional recovery.
"""

from __future__ import annotations

import pytest

from tests import cases
from tests.cases import calls_of, feed, message, squash
from tests.data import tokenizer_for
from toolwire import Message, Parser, formats
from toolwire.events import ToolCallBegin

NAMES = [
    "deepseek_v3",
    "deepseek_v31",
    "deepseek_v32",
    "deepseek_v4",
    "kimi_k2",
    "glm45",
    "glm47",
    "minimax_m2",
    "gemma4",
]

D = "｜DSML｜"
#: One output per format as its chat template writes `get_weather(city="Paris", days=3)`.
NATIVE = {
    "deepseek_v3": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    '```json\n{"city": "Paris", "days": 3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "deepseek_v31": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
    '{"city": "Paris", "days": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "deepseek_v32": f'<{D}function_calls>\n<{D}invoke name="get_weather">\n'
    f'<{D}parameter name="city" string="true">Paris</{D}parameter>\n'
    f'<{D}parameter name="days" string="false">3</{D}parameter>\n'
    f"</{D}invoke>\n</{D}function_calls>",
    "deepseek_v4": f'<{D}tool_calls>\n<{D}invoke name="get_weather">\n'
    f'<{D}parameter name="city" string="true">Paris</{D}parameter>\n'
    f'<{D}parameter name="days" string="false">3</{D}parameter>\n'
    f"</{D}invoke>\n</{D}tool_calls>",
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Paris", "days": 3}<|tool_call_end|>'
    "<|tool_calls_section_end|>",
    "glm45": "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
    "glm47": "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
    "<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
    "minimax_m2": '<minimax:tool_call>\n<invoke name="get_weather">\n'
    '<parameter name="city">Paris</parameter>\n<parameter name="days">3</parameter>\n'
    "</invoke>\n</minimax:tool_call>",
    "gemma4": '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>',
}
WEATHER = ("get_weather", {"city": "Paris", "days": 3})

#: Delimiter -> id, as docs/formats.md and the families' tokenizer files give them.
IDS = {
    "deepseek_v3": {
        "<｜tool▁calls▁begin｜>": 128806,
        "<｜tool▁calls▁end｜>": 128807,
        "<｜tool▁call▁begin｜>": 128808,
        "<｜tool▁call▁end｜>": 128809,
        "<｜tool▁sep｜>": 128814,
    },
    "deepseek_v4": {D: 128825, "<think>": 128821, "</think>": 128822},
    "kimi_k2": {
        "<|tool_calls_section_begin|>": 163595,
        "<|tool_calls_section_end|>": 163596,
        "<|tool_call_begin|>": 163597,
        "<|tool_call_argument_begin|>": 163598,
        "<|tool_call_end|>": 163599,
        "<think>": 163606,
        "</think>": 163607,
    },
}


# -- the formats' own strings and ids -------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_template_output_parses_in_any_chunking(name: str) -> None:
    cases.check_native_output(name, NATIVE[name], WEATHER)


@pytest.mark.parametrize("name", NAMES)
def test_render_writes_what_the_template_writes(name: str) -> None:
    fmt = formats.get(name)
    assert squash(fmt.render([WEATHER])) == squash(NATIVE[name])


@pytest.mark.parametrize("family", sorted(IDS))
def test_delimiter_ids_match_the_family_tokenizer(family: str) -> None:
    tok = cases.tokenizer(family)
    for text, token in IDS[family].items():
        assert tok.token_id(text) == token, text


@pytest.mark.parametrize("name", NAMES)
def test_every_format_is_gated_by_its_test_tokenizer(name: str) -> None:
    assert Parser(name, cases.tokenizer(name)).gated


# -- echo, truncation, undeclared tools, reasoning ------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_call_spelled_from_sub_words_is_content(name: str) -> None:
    tok = cases.tokenizer(name)
    text = f"From the log: {NATIVE[name]} and more."
    spelled = tok.encode(text, delimiters=False)
    assert spelled != tok.encode(text)  # the delimiters are tokens, spelled differently
    for stream in (False, True):
        msg = message(name, spelled, stream_arguments=stream)
        assert msg.tool_calls == []
        assert msg.content == text


@pytest.mark.parametrize("name", NAMES)
def test_a_truncated_call_is_content_held_and_a_cut_call_streamed(name: str) -> None:
    tok = cases.tokenizer(name)
    ids = tok.encode(NATIVE[name])
    cut = tok.encode(NATIVE[name][: NATIVE[name].index("Paris") + 3])
    assert ids[: len(cut) - 1] == cut[:-1]
    ids = ids[: len(cut) - 1]
    msg = message(name, ids)
    assert msg.tool_calls == []
    assert squash(msg.content) == squash(tok.decode(ids))
    streamed = message(name, ids, stream_arguments=True)
    assert [c.name for c in streamed.tool_calls] == ["get_weather"]
    assert message(name, ids, strict=False, tool_choice="none").content is None


@pytest.mark.parametrize("name", NAMES)
def test_an_undeclared_tool_is_content(name: str) -> None:
    tok = cases.tokenizer(name)
    text = NATIVE[name].replace("get_weather", "not_declared")
    for stream in (False, True):
        msg = message(name, tok.encode("Sure. " + text), stream_arguments=stream)
        assert msg.tool_calls == []
        assert squash(msg.content) == squash("Sure. " + text)


@pytest.mark.parametrize("name", NAMES)
def test_reasoning_then_a_call(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.tokenizer(name)
    text = fmt.render_output(reasoning=cases.REASONING, calls=[WEATHER])
    for stream in (False, True):
        msg = message(name, tok.encode(text), stream_arguments=stream)
        assert msg.reasoning == cases.REASONING
        assert msg.content is None
        assert calls_of(msg) == [WEATHER]


@pytest.mark.parametrize("name", NAMES)
def test_two_calls_in_one_delta_with_the_end_of_the_first(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.tokenizer(name)
    second = ("search", {"query": "rain", "limit": 2})
    both = tok.encode(fmt.render([WEATHER, second]))
    one = tok.encode(fmt.render([WEATHER]))
    shared = next((i for i, (a, b) in enumerate(zip(both, one, strict=False)) if a != b), len(one))
    for stream in (False, True):
        events = feed(name, both, [shared - 3], stream_arguments=stream)
        assert calls_of(Message.from_events(events)) == [WEATHER, second]
        assert events == feed(name, both, stream_arguments=stream)


# -- schema-typed conversion -----------------------------------------------------------

#: Text-argument formats: (output, expected arguments of `search`).
TYPED = {
    "glm47": (
        "<tool_call>search<arg_key>query</arg_key><arg_value>42</arg_value>"
        "<arg_key>limit</arg_key><arg_value>7</arg_value>"
        '<arg_key>filters</arg_key><arg_value>{"a": [1, null]}</arg_value>'
        "<arg_key>exact</arg_key><arg_value>false</arg_value></tool_call>",
        {"query": "42", "limit": 7, "filters": {"a": [1, None]}, "exact": False},
    ),
    "minimax_m2": (
        '<minimax:tool_call>\n<invoke name="search">\n<parameter name="query">42</parameter>\n'
        '<parameter name="limit">7</parameter>\n<parameter name="tags">["x", "y"]</parameter>\n'
        "</invoke>\n</minimax:tool_call>",
        {"query": "42", "limit": 7, "tags": ["x", "y"]},
    ),
    "deepseek_v4": (
        f'<{D}tool_calls>\n<{D}invoke name="search">\n'
        f'<{D}parameter name="query" string="true">42</{D}parameter>\n'
        f'<{D}parameter name="limit" string="false">7</{D}parameter>\n'
        f'<{D}parameter name="filters" string="false">{{"a": [1, true]}}</{D}parameter>\n'
        f'<{D}parameter name="tags" string="false">["x"]</{D}parameter>\n'
        f"</{D}invoke>\n</{D}tool_calls>",
        {"query": "42", "limit": 7, "filters": {"a": [1, True]}, "tags": ["x"]},
    ),
    "gemma4": (
        '<|tool_call>call:search{query:42,limit:7,exact:True,filters:{a:<|"|>x, "y"<|"|>,'
        'b:[1,<|"|>}<|"|>,null]},tags:[<|"|>p<|"|>,<|"|>q<|"|>]}<tool_call|>',
        {
            "query": "42",
            "limit": 7,
            "exact": True,
            "filters": {"a": 'x, "y"', "b": [1, "}", None]},
            "tags": ["p", "q"],
        },
    ),
}


@pytest.mark.parametrize("name", sorted(TYPED))
def test_text_arguments_are_typed_by_the_schema(name: str) -> None:
    text, expected = TYPED[name]
    ids = cases.tokenizer(name).encode(text)
    for stream in (False, True):
        for deltas in ([], range(1, len(ids))):
            msg = message(name, ids, deltas, stream_arguments=stream)
            assert calls_of(msg) == [("search", expected)]


def _enum_padded(name: str) -> str | None:
    """The format's rendering of a call whose `unit` (enum "c"/"f") is "f", with
    whitespace around that value inside its tags (as XGrammar's XML styles allow it
    there), or None for a format that does not write values as tagged text."""
    native = formats.get(name).render_output(
        calls=[("get_weather", {"city": "Paris", "unit": "f"})]
    )
    for plain, padded in ((">\nf\n</", ">\n  f \n\n</"), (">f</", "> \n f  </")):
        if plain in native:
            return native.replace(plain, padded, 1)
    return None


ENUM_PADDED = [n for n in formats.names() if _enum_padded(n) is not None]


@pytest.mark.parametrize("name", ENUM_PADDED)
def test_an_enum_value_is_read_without_the_whitespace_around_it(name: str) -> None:
    """A tagged text value the schema limits to an enum, written with whitespace around
    it, is the enum's string (not one whitespace makes invalid), in every chunking,
    held and streamed; a value that is none of the strings even stripped stays as
    written."""
    text = _enum_padded(name)
    assert text is not None
    ids = cases.tokenizer(name).encode(text)
    for stream in (False, True):
        for deltas in ([], range(1, len(ids)), range(0, len(ids), 3)):
            msg = message(name, ids, deltas, stream_arguments=stream)
            assert calls_of(msg) == [("get_weather", {"city": "Paris", "unit": "f"})]
    odd = cases.tokenizer(name).encode(text.replace(" f ", " x ", 1))
    ((_, args),) = calls_of(message(name, odd))
    assert args["unit"].strip() == "x" and args["unit"] != "x"


def test_dsml_string_false_values_are_json_even_for_an_untyped_parameter() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    text = (
        f'<{D}tool_calls>\n<{D}invoke name="f">\n'
        f'<{D}parameter name="n" string="false">3</{D}parameter>\n'
        f'<{D}parameter name="s" string="true">3</{D}parameter>\n'
        f"</{D}invoke>\n</{D}tool_calls>"
    )
    msg = message("deepseek_v4", cases.tokenizer("deepseek_v4").encode(text), tools=tools)
    assert calls_of(msg) == [("f", {"n": 3, "s": "3"})]


@pytest.mark.parametrize("name", ["deepseek_v31", "kimi_k2"])
def test_json_arguments_are_the_model_s_own_bytes(name: str) -> None:
    raw = '{"query":  "42",\n "limit":7}'
    text = (
        NATIVE[name].replace('{"city": "Paris", "days": 3}', raw).replace("get_weather", "search")
    )
    for stream in (False, True):
        msg = message(name, cases.tokenizer(name).encode(text), stream_arguments=stream)
        assert msg.tool_calls[0].arguments == raw


# -- provisional recovery: a call without its wrapper ---------------------------------

BARE = {
    "deepseek_v4": NATIVE["deepseek_v4"].split("\n", 1)[1].rsplit("\n", 1)[0],
    "kimi_k2": NATIVE["kimi_k2"]
    .removeprefix("<|tool_calls_section_begin|>")
    .removesuffix("<|tool_calls_section_end|>"),
    "deepseek_v31": NATIVE["deepseek_v31"]
    .removeprefix("<｜tool▁calls▁begin｜>")
    .removesuffix("<｜tool▁calls▁end｜>"),
}


@pytest.mark.parametrize("name", sorted(BARE))
def test_a_call_without_its_section_is_committed_only_when_closed_and_declared(
    name: str,
) -> None:
    tok = cases.tokenizer(name)
    bare = BARE[name]
    assert "invoke" in bare or "call_begin" in bare or "call▁begin" in bare
    ids = tok.encode("Checking. " + bare)
    for stream in (False, True):
        events = feed(name, ids, range(1, len(ids)), stream_arguments=stream)
        msg = Message.from_events(events)
        assert calls_of(msg) == [WEATHER]
        assert msg.content == "Checking."
    # Held even when streaming: the call begins only in the delta that closes it.
    parser = Parser(name, tok, tools=cases.TOOLS, stream_arguments=True)
    begun = [
        i
        for i, token in enumerate(ids)
        if any(isinstance(e, ToolCallBegin) for e in parser.feed([token]))
    ]
    assert begun == [len(ids) - 1]
    # Undeclared, or cut off: every character comes back as content, unchanged.
    undeclared = "Checking. " + bare.replace("get_weather", "not_declared")
    cut = ids[:-1]
    for case, text in ((tok.encode(undeclared), undeclared), (cut, tok.decode(cut))):
        for stream in (False, True):
            msg = message(name, case, stream_arguments=stream)
            assert msg.tool_calls == []
            assert msg.content == text
    # tool_choice="none" never commits.
    assert message(name, ids, tool_choice="none").tool_calls == []


def test_minimax_invoke_outside_its_section_is_text() -> None:
    tok = cases.tokenizer("minimax_m2")
    bare = NATIVE["minimax_m2"].split("\n", 1)[1].rsplit("\n", 1)[0]
    msg = message("minimax_m2", tok.encode("Example: " + bare))
    assert msg.tool_calls == []
    assert msg.content == "Example: " + bare


def test_minimax_value_may_hold_the_invoke_tags() -> None:
    tok = cases.tokenizer("minimax_m2")
    city = '</invoke>\n<invoke name="get_time">'
    msg = message("minimax_m2", tok.encode(NATIVE["minimax_m2"].replace("Paris", city)))
    assert calls_of(msg) == [("get_weather", {"city": city, "days": 3})]


# -- Kimi ------------------------------------------------------------------------------


def test_kimi_call_ids_are_the_model_s_own() -> None:
    fmt = formats.get("kimi_k2")
    ids = cases.tokenizer("kimi_k2").encode(fmt.render([WEATHER, ("get_time", {})]))
    for stream in (False, True):
        msg = message("kimi_k2", ids, stream_arguments=stream)
        assert [(c.id, c.name) for c in msg.tool_calls] == [
            ("functions.get_weather:0", "get_weather"),
            ("functions.get_time:1", "get_time"),
        ]


@pytest.mark.parametrize("text_only", [False, True])
def test_kimi_reasoning_in_either_spelling(text_only: bool) -> None:
    tok = cases.tokenizer("kimi_k2")
    for opener, closer in (("<think>", "</think>"), ("◁think▷", "◁/think▷")):
        text = f"{opener}Let me see.{closer}It is sunny."
        if text_only:
            parser = Parser("kimi_k2", None)
            msg = Message.from_events(parser.feed_text(text) + parser.finish())
        else:
            msg = message("kimi_k2", tok.encode(text))
        assert (msg.reasoning, msg.content) == ("Let me see.", "It is sunny.")


# -- DeepSeek reasoning by vocabulary --------------------------------------------------


def test_deepseek_v31_reasoning_by_id_where_the_vocabulary_has_think() -> None:
    tok = tokenizer_for("deepseek_v4")  # V3's tool tokens and a `<think>` token
    text = "<think>Hmm.</think>" + NATIVE["deepseek_v31"]
    parser = Parser("deepseek_v31", tok, tools=cases.TOOLS)
    msg = Message.from_events(parser.feed(tok.encode(text)) + parser.finish())
    assert msg.reasoning == "Hmm." and calls_of(msg) == [WEATHER]
    spelled = tok.encode("<think>", delimiters=False) + tok.encode("Hmm.")
    parser = Parser("deepseek_v31", tok, tools=cases.TOOLS)
    msg = Message.from_events(parser.feed(spelled) + parser.finish())
    assert msg.content == "<think>Hmm." and msg.reasoning is None
