"""Granite 4, Seed-OSS, LFM2, Llama 4, Nemotron, Command, Granite 3, Hunyuan, FunctionGemma,
ERNIE 4.5, OLMo 3, Granite 3.1, MiniCPM: per-format tests.

Tokenizers (tests/cases.py): no vocabulary of these families is available offline (no
package on PyPI ships one: `granite-common` and `granite-io`, IBM's Granite I/O
packages, hold code only), so each is DERIVED (tests/derived.py: Qwen3's real
vocabulary with the family's own added tokens, in their real order, with the real
`"special"` flags). The invariant suite and the BFCL round trips cover these formats
like every other; this file holds what is particular to them: literal outputs as the
families' chat templates and vLLM's parsers write them, echoes, truncation, undeclared
tools, reasoning, parallel calls, and each family's quirks. No chat template of these
families is available offline either, so they have no prompt-parity cases
(tests/prompt_cases.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import cases
from tests.cases import calls_of, feed, message, squash
from toolwire import Message, Parser, formats
from toolwire.events import merge
from toolwire.formats import hunyuan

WEATHER = ("get_weather", {"city": "Paris", "days": 3})

#: One output per format writing `get_weather(city="Paris", days=3)`, as the family does.
NATIVE = {
    "granite4": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'
    "\n</tool_call>",
    "seed_oss": "<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</seed:tool_call>",
    "lfm2": '<|tool_call_start|>[get_weather(city="Paris", days=3)]<|tool_call_end|>',
    "llama4": '<|python_start|>[get_weather(city="Paris", days=3)]<|python_end|>',
    "nemotron": '<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]'
    "</TOOLCALL>",
    "gigachat3": "<|message_sep|>\n\nfunction call<|role_sep|>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}',
    "gigachat31": "<|function_call|>"
    '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}',
    "gigachat35": '<｜GCML｜tool_calls>\n<｜GCML｜invoke name="get_weather">\n'
    '<｜GCML｜parameter name="city" string="true">Paris</｜GCML｜parameter>\n'
    '<｜GCML｜parameter name="days" string="false">3</｜GCML｜parameter>\n'
    "</｜GCML｜invoke>\n</｜GCML｜tool_calls>",
    "internlm": "<|action_start|><|plugin|>\n"
    '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}<|action_end|>',
    "step3": "<｜tool_calls_begin｜>\n<｜tool_call_begin｜>function<｜tool_sep｜>"
    '<steptml:invoke name="get_weather">\n<steptml:parameter name="city">Paris'
    '</steptml:parameter>\n<steptml:parameter name="days">3</steptml:parameter>\n'
    "</steptml:invoke><｜tool_call_end｜>\n<｜tool_calls_end｜>",
    "longcat": '<longcat_tool_call>{"name": "get_weather", "arguments": {"city": "Paris", '
    '"days": 3}}</longcat_tool_call>',
    "command": '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", '
    '"parameters": {"city": "Paris", "days": 3}}\n]<|END_ACTION|>',
    "granite": '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]',
    "hunyuan": '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]'
    "</tool_calls>",
    "ernie45": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'
    "\n</tool_call>",
    "olmo3": '<function_calls>get_weather(city="Paris", days=3)</function_calls>',
    "apertus": '<|tools_prefix|>[{"get_weather": {"city": "Paris", "days": 3}}]<|tools_suffix|>',
    "jamba": '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]'
    "</tool_calls>",
    "functiongemma": "<start_function_call>call:get_weather{city:<escape>Paris<escape>,days:3}"
    "<end_function_call>",
}
NAMES = sorted(NATIVE)


@pytest.mark.parametrize("name", NAMES)
def test_the_native_output_parses_in_any_chunking(name: str) -> None:
    cases.check_native_output(name, NATIVE[name], WEATHER)


@pytest.mark.parametrize("name", NAMES)
def test_render_writes_the_native_output(name: str) -> None:
    assert squash(formats.get(name).render([WEATHER])) == squash(NATIVE[name])


@pytest.mark.parametrize("name", NAMES)
def test_every_format_is_gated_by_its_test_tokenizer(name: str) -> None:
    assert Parser(name, cases.tokenizer(name)).gated


@pytest.mark.parametrize("name", NAMES)
def test_a_call_spelled_from_sub_words_is_content(name: str) -> None:
    tok = cases.tokenizer(name)
    text = f"From the log: {NATIVE[name]} and more."
    spelled = tok.encode(text, delimiters=False)
    assert spelled != tok.encode(text)
    for stream in (False, True):
        msg = message(name, spelled, stream_arguments=stream)
        assert msg.tool_calls == []
        assert msg.content == text


@pytest.mark.parametrize("name", NAMES)
def test_a_truncated_call_is_content_held_and_a_cut_call_streamed(name: str) -> None:
    tok = cases.tokenizer(name)
    cut = tok.encode(NATIVE[name][: NATIVE[name].index("Paris") + 3])
    msg = message(name, cut)
    assert msg.tool_calls == []
    assert squash(msg.content) == squash(tok.decode(cut))
    streamed = message(name, cut, stream_arguments=True)
    assert [c.name for c in streamed.tool_calls] == ["get_weather"]
    assert message(name, cut, tool_choice="none").content is None


@pytest.mark.parametrize("name", NAMES)
def test_an_undeclared_tool_is_content(name: str) -> None:
    tok = cases.tokenizer(name)
    text = "Sure. " + NATIVE[name].replace("get_weather", "not_declared")
    for stream in (False, True):
        msg = message(name, tok.encode(text), stream_arguments=stream)
        assert msg.tool_calls == []
        assert squash(msg.content) == squash(text)


@pytest.mark.parametrize("name", [n for n in NAMES if formats.get(n).reasoning])
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
def test_parallel_calls_in_any_chunking(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.tokenizer(name)
    calls = [WEATHER, ("search", {"query": "rain", "tags": ["a", "b"]}), ("get_time", {})]
    ids = tok.encode(fmt.render(calls))
    for stream in (False, True):
        whole = feed(name, ids, stream_arguments=stream)
        assert calls_of(Message.from_events(whole)) == calls
        assert feed(name, ids, range(1, len(ids)), stream_arguments=stream) == whole


#: Delimiters the families' vocabularies add without marking them special.
NOT_SPECIAL = {
    "granite4": ("<tool_call>", "</tool_call>", "<think>", "</think>"),
    "seed_oss": ("<seed:tool_call>", "</seed:tool_call>", "<seed:think>", "</seed:think>"),
}


@pytest.mark.parametrize("name", sorted(NOT_SPECIAL))
def test_added_but_not_special_delimiters_still_gate(name: str) -> None:
    tok = cases.tokenizer(name)
    for text in NOT_SPECIAL[name]:
        token = tok.token_id(text)
        assert token in tok.added_ids and not tok.is_special(token), text
    assert Parser(name, tok).gated
    # Spelled from sub-words, the call is text (test_a_call_spelled_from_sub_words_is_content).


# -- Seed-OSS ----------------------------------------------------------------------------


def test_seed_oss_budget_notes_are_reasoning_text() -> None:
    """The budget tokens are added but not special: text, as every such token is."""
    tok = cases.tokenizer("seed_oss")
    text = (
        "<seed:think>Plan. <seed:cot_budget_reflect>I have used 12 tokens."
        "</seed:cot_budget_reflect> Call it.</seed:think>" + NATIVE["seed_oss"]
    )
    msg = message("seed_oss", tok.encode(text))
    assert msg.reasoning == (
        "Plan. <seed:cot_budget_reflect>I have used 12 tokens.</seed:cot_budget_reflect> Call it."
    )
    assert msg.content is None
    assert calls_of(msg) == [WEATHER]


# -- Granite 4 ---------------------------------------------------------------------------

ESCAPED = (
    '<tool_call>\n{"name": "get_weather", '
    '"arguments": "{\\"city\\": \\"Paris\\", \\"days\\": 3}"}\n</tool_call>'
)


def test_granite4_arguments_given_as_a_string_are_an_object() -> None:
    tok = cases.tokenizer("granite4")
    ids = tok.encode(ESCAPED)
    for stream in (False, True):
        whole = feed("granite4", ids, stream_arguments=stream)
        msg = Message.from_events(whole)
        assert calls_of(msg) == [WEATHER]
        assert msg.tool_calls[0].arguments == '{"city": "Paris", "days": 3}'
        assert feed("granite4", ids, range(1, len(ids)), stream_arguments=stream) == whole


@pytest.mark.parametrize("arguments", ['"[1, 2]"', '"not json"', '"{\\"a\\": "'])
def test_granite4_a_string_that_holds_no_object_is_content(arguments: str) -> None:
    tok = cases.tokenizer("granite4")
    text = f'<tool_call>\n{{"name": "get_time", "arguments": {arguments}}}\n</tool_call>'
    msg = message("granite4", tok.encode(text))
    assert msg.tool_calls == []
    assert msg.content == text


# -- lists ended by a mark (LFM2, Command) ---------------------------------------------


@pytest.mark.parametrize(
    "name", ["lfm2", "llama4", "nemotron", "command", "hunyuan", "apertus", "jamba", "olmo3"]
)
def test_a_list_without_its_end_mark_is_a_call_only_when_it_stopped(name: str) -> None:
    tok = cases.tokenizer(name)
    mark = formats.get(name).marks[0]
    ids = tok.encode(NATIVE[name].removesuffix(mark))
    for stream in (False, True):
        assert calls_of(message(name, ids, stream_arguments=stream)) == [WEATHER]
    parser = Parser(name, tok, tools=cases.TOOLS)
    cut = Message.from_events(parser.feed(ids) + parser.finish("length"))
    assert cut.tool_calls == []
    assert squash(cut.content) == squash(tok.decode(ids))


@pytest.mark.parametrize(
    "name", ["lfm2", "llama4", "nemotron", "command", "hunyuan", "apertus", "jamba", "olmo3"]
)
def test_text_after_the_list_is_content(name: str) -> None:
    tok = cases.tokenizer(name)
    mark = formats.get(name).marks[0]
    for text in (NATIVE[name] + "\nDone.", NATIVE[name].removesuffix(mark) + "\nDone."):
        msg = message(name, tok.encode(text))
        assert calls_of(msg) == [WEATHER]
        assert msg.content == "Done."


@pytest.mark.parametrize(
    "name", ["lfm2", "llama4", "nemotron", "command", "hunyuan", "apertus", "jamba", "olmo3"]
)
def test_text_matching_rejects_an_incomplete_end_mark_in_any_chunking(name: str) -> None:
    mark = formats.get(name).marks[0]
    text = NATIVE[name].removesuffix(mark) + mark[:5] + "x and more."
    results = []
    for size in (1, 3, len(text)):
        parser = Parser(name, None, tools=cases.TOOLS)
        events = []
        for start in range(0, len(text), size):
            events += parser.feed_text(text[start : start + size])
        results.append(merge(events + parser.finish()))
    assert results[0] == results[1] == results[2]
    msg = Message.from_events(results[0])
    assert msg.tool_calls == []
    assert msg.content == text


#: LFM2's JSON mode (Liquid's documentation; SGLang's `lfm2` detector's docstring).
LFM2_JSON = (
    '<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}, '
    '{"name": "get_weather", "arguments": {"city": "Rome"}}]<|tool_call_end|>'
)


def test_lfm2_json_mode_lists_are_calls_in_any_chunking() -> None:
    tok = cases.tokenizer("lfm2")
    ids = tok.encode("Checking." + LFM2_JSON + "Done.")
    rome = ("get_weather", {"city": "Rome"})
    for stream in (False, True):
        for size in (1, 2, 5, len(ids)):
            parser = Parser("lfm2", tok, tools=cases.TOOLS, stream_arguments=stream)
            events = []
            for start in range(0, len(ids), size):
                events += parser.feed(ids[start : start + size])
            msg = Message.from_events(events + parser.finish())
            assert calls_of(msg) == [WEATHER, rome]
            assert squash(msg.content) == squash("Checking.\nDone.")
    # A JSON item and a pythonic one may share a list; a broken JSON item is content.
    mixed = '<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Rome"}}, '
    mixed += 'get_weather(city="Paris", days=3)]<|tool_call_end|>'
    assert calls_of(message("lfm2", tok.encode(mixed))) == [rome, WEATHER]
    broken = '<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": }]<|tool_call_end|>'
    msg = message("lfm2", tok.encode(broken))
    assert msg.tool_calls == [] and squash(msg.content) == squash(broken)


def test_lfm2_a_bare_list_is_the_pythonic_format() -> None:
    tok = cases.tokenizer("lfm2")
    bare = NATIVE["lfm2"].removeprefix("<|tool_call_start|>").removesuffix("<|tool_call_end|>")
    assert message("lfm2", tok.encode(bare)).tool_calls == []
    parser = Parser("pythonic", tok, tools=cases.TOOLS)
    assert not parser.gated
    msg = Message.from_events(parser.feed(tok.encode(bare)) + parser.finish())
    assert calls_of(msg) == [WEATHER]


def test_command_content_and_reasoning_markers() -> None:
    tok = cases.tokenizer("command")
    text = "<|START_THINKING|>Check the weather.<|END_THINKING|>" + NATIVE["command"]
    msg = message("command", tok.encode(text))
    assert msg.reasoning == "Check the weather."
    assert calls_of(msg) == [WEATHER]
    for opener, closer in (
        ("<|START_RESPONSE|>", "<|END_RESPONSE|>"),
        ("<|START_TEXT|>", "<|END_TEXT|>"),
    ):
        msg = message("command", tok.encode(f"{opener}It is sunny.{closer}"))
        assert msg.content == "It is sunny."
    prefilled = message(
        "command", tok.encode("Plan.<|END_THINKING|>" + NATIVE["command"]), in_reasoning=True
    )
    assert prefilled.reasoning == "Plan." and calls_of(prefilled) == [WEATHER]


# -- Hunyuan: suffixed vocabularies ----------------------------------------------------


def test_hunyuan_resolves_its_tokens_from_the_vocabulary() -> None:
    plain = cases.tokenizer("hunyuan")
    assert hunyuan.suffix_of(plain.added_tokens) == ""
    assert hunyuan.resolve(plain.added_tokens) is formats.get("hunyuan")
    suffixed = ["<|eos|>", "<think:6124c78e>", "</think:6124c78e>", "<tool_calls:6124c78e>"]
    fmt = hunyuan.resolve(["hello", *suffixed, "</tool_calls:6124c78e>"])
    assert fmt.call == ("<tool_calls:6124c78e>", None)
    assert fmt.marks == ("</tool_calls:6124c78e>",)
    assert fmt.reasoning == ("<think:6124c78e>", "</think:6124c78e>")


def test_hunyuan_with_a_suffixed_vocabulary_parses_by_id() -> None:
    plain = cases.tokenizer("hunyuan")
    fmt = hunyuan.resolve(["<tool_calls:6124c78e>", "</tool_calls:6124c78e>"])
    text = "<think:6124c78e>Plan.</think:6124c78e>" + fmt.render([WEATHER])
    # A vocabulary whose tokens carry the suffix: the plain one's, renamed.
    tok = _suffixed(plain, ":6124c78e")
    for stream in (False, True):
        parser = Parser(fmt, tok, tools=cases.TOOLS, stream_arguments=stream)
        assert parser.gated
        msg = Message.from_events(parser.feed(tok.encode(text)) + parser.finish())
        assert calls_of(msg) == [WEATHER] and msg.reasoning == "Plan."
    # The unsuffixed format does not take the suffixed tokens for its own.
    msg = message_with(tok, "hunyuan", text)
    assert msg.tool_calls == []


def _suffixed(tok: Any, suffix: str) -> Any:
    import gzip
    import tempfile
    from pathlib import Path

    from toolwire import load_tokenizer

    vocab = json.loads(tok.backend.to_str())
    for entry in vocab["added_tokens"]:
        if hunyuan._STRUCTURAL.fullmatch(entry["content"]):
            entry["content"] = entry["content"][:-1] + suffix + ">"
    with tempfile.TemporaryDirectory(prefix="toolwire-hunyuan-") as name:
        folder = Path(name)
        with gzip.open(folder / "tokenizer.json.gz", "wt", encoding="utf-8") as fh:
            json.dump(vocab, fh)
        return load_tokenizer(folder)


def message_with(tok: Any, name: str, text: str) -> Message:
    parser = Parser(name, tok, tools=cases.TOOLS)
    return Message.from_events(parser.feed(tok.encode(text)) + parser.finish())


# -- Hunyuan V3 / V4: tagged calls, with or without the checkpoint's suffix ------------

#: Hy4's output as the shipping `:opensource` checkpoints write it.
HY4_OPENSOURCE = (
    "sure!<tool_calls:opensource><tool_call:opensource>get_weather"
    "<arg_key:opensource>city</arg_key:opensource><arg_value:opensource>Beijing"
    "</arg_value:opensource><arg_key:opensource>days</arg_key:opensource>"
    "<arg_value:opensource>3</arg_value:opensource></tool_call:opensource>"
    "</tool_calls:opensource>"
)


@pytest.mark.parametrize("family", ["hy_v3", "hy_v4"])
@pytest.mark.parametrize("suffix", ["", ":opensource"])
def test_hunyuan_v3_v4_calls_are_read_with_or_without_the_suffix(family: str, suffix: str) -> None:
    plain = cases.tokenizer(family)
    tok = _suffixed(plain, suffix) if suffix else plain
    fmt = hunyuan.resolve(tok.added_tokens)
    assert fmt.name == family
    sep = f"<tool_sep{suffix}>" if family == "hy_v3" else ""
    text = HY4_OPENSOURCE.replace(":opensource", suffix).replace("get_weather", "get_weather" + sep)
    ids = tok.encode(text)
    for stream in (False, True):
        for size in (1, 3, len(ids)):
            parser = Parser(fmt, tok, tools=cases.TOOLS, stream_arguments=stream)
            assert parser.gated
            events = []
            for start in range(0, len(ids), size):
                events += parser.feed(ids[start : start + size])
            msg = Message.from_events(events + parser.finish())
            assert msg.content == "sure!"
            # Values typed from the schema: `days` is an integer, 3 and not "3".
            assert calls_of(msg) == [("get_weather", {"city": "Beijing", "days": 3})]
    # The suffixed tokens are not the unsuffixed format's (and the reverse).
    other = formats.get(family)
    if suffix:
        assert Message.from_events(Parser(other, tok, tools=cases.TOOLS).feed(ids)).tool_calls == []


def test_hunyuan_resolve_tells_the_dialects_apart() -> None:
    assert hunyuan.resolve(cases.tokenizer("hy_v3").added_tokens) is formats.get("hy_v3")
    assert hunyuan.resolve(cases.tokenizer("hy_v4").added_tokens) is formats.get("hy_v4")
    assert hunyuan.resolve(cases.tokenizer("hunyuan").added_tokens) is formats.get("hunyuan")
    suffixed = hunyuan.resolve(["<tool_calls:x>", "<tool_call:x>", "<tool_sep:x>", "<arg_key:x>"])
    assert suffixed.name == "hy_v3" and suffixed.marks[0] == "<tool_sep:x>"


def test_phi4_mini_calls_follow_functools_at_a_line_start() -> None:
    tok = cases.tokenizer("phi4_mini")
    two = [WEATHER, ("get_weather", {"city": "Rome"})]
    native = formats.get("phi4_mini").render(two)
    assert native.endswith(', {"name": "get_weather", "arguments": {"city": "Rome"}}]')
    for text in (native, "Sure.\n" + native):
        for stream in (False, True):
            msg = message("phi4_mini", tok.encode(text), stream_arguments=stream)
            assert calls_of(msg) == two and (msg.content or "") == text[: -len(native)].strip()
    assert not Parser("phi4_mini", tok).gated
    quoted = "Sure. " + native  # mid-line: an echo, not a call
    for prose in (
        quoted,
        "I use functools a lot.",
        "for now, nothing",
        "functools[1, 2]",
        'functools[{"name": "nope"',
    ):
        msg = message("phi4_mini", tok.encode(prose))
        assert msg.tool_calls == [] and msg.content == prose


# -- FunctionGemma -----------------------------------------------------------------------

#: Google's FunctionGemma documentation ("formatting and best practices"), verbatim.
FUNCTIONGEMMA_DOC = (
    "<start_function_call>call:get_current_temperature{location:<escape>Paris<escape>,"
    "unit:<escape>celsius<escape>}<end_function_call>"
)
FG_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_current_temperature",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["location"],
            },
        },
    }
]


def test_functiongemma_documented_sample_and_its_stop_token() -> None:
    tok = cases.tokenizer("functiongemma")
    # The template writes <start_function_response> after the calls: a stop token.
    ids = tok.encode(FUNCTIONGEMMA_DOC + "<start_function_response>")
    for stream in (False, True):
        whole = feed("functiongemma", ids, tools=FG_TOOLS, stream_arguments=stream)
        msg = Message.from_events(whole)
        assert calls_of(msg) == [
            ("get_current_temperature", {"location": "Paris", "unit": "celsius"})
        ]
        assert msg.content is None
        chunked = feed(
            "functiongemma", ids, range(1, len(ids)), tools=FG_TOOLS, stream_arguments=stream
        )
        assert chunked == whole


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # Quoted values the schema types as numbers or booleans are those values...
        (
            "query:<escape>rain<escape>,limit:<escape>7<escape>,exact:<escape>true<escape>",
            {"query": "rain", "limit": 7, "exact": True},
        ),
        # ... bare ones too; a string parameter stays a string, quoted or bare.
        (
            "query:<escape>42<escape>,limit:7,exact:false",
            {"query": "42", "limit": 7, "exact": False},
        ),
        ("query:42,limit:<escape> 7 <escape>", {"query": "42", "limit": 7}),
        # Text that is not the schema's type stays the model's text.
        (
            "query:<escape>a<escape>,limit:<escape>seven<escape>,exact:<escape>1<escape>",
            {"query": "a", "limit": "seven", "exact": "1"},
        ),
        ("query:<escape>a<escape>,limit:<escape>true<escape>", {"query": "a", "limit": "true"}),
        ("query:<escape>a<escape>,limit:<escape>1e999<escape>", {"query": "a", "limit": "1e999"}),
        # Strings hold the body's structure characters; nested strings stay strings.
        (
            "query:<escape>a{b},c:d<escape>,tags:[<escape>1<escape>,<escape>}<escape>]",
            {"query": "a{b},c:d", "tags": ["1", "}"]},
        ),
    ],
)
def test_functiongemma_values_are_typed_by_the_schema(body: str, expected: dict[str, Any]) -> None:
    tok = cases.tokenizer("functiongemma")
    ids = tok.encode(f"<start_function_call>call:search{{{body}}}<end_function_call>")
    for stream in (False, True):
        for deltas in ([], range(1, len(ids))):
            msg = message("functiongemma", ids, deltas, stream_arguments=stream)
            assert calls_of(msg) == [("search", expected)]


def test_functiongemma_escape_spelled_from_sub_words_is_value_text() -> None:
    tok = cases.tokenizer("functiongemma")
    head = tok.encode("<start_function_call>call:search{query:<escape>")
    quoted = tok.encode("say <escape> here", delimiters=False)
    tail = tok.encode("<escape>}<end_function_call>")
    for stream in (False, True):
        msg = message("functiongemma", head + quoted + tail, stream_arguments=stream)
        assert calls_of(msg) == [("search", {"query": "say <escape> here"})]


# -- Apertus -----------------------------------------------------------------------------


def test_apertus_peer_sample_after_prose() -> None:
    """vLLM's parser docstring: prose, then one keyed call."""
    tok = cases.tokenizer("apertus")
    text = 'I will check. <|tools_prefix|>[{"get_weather": {"city": "Paris"}}]<|tools_suffix|>'
    ids = tok.encode(text)
    for stream in (False, True):
        whole = feed("apertus", ids, stream_arguments=stream)
        msg = Message.from_events(whole)
        assert calls_of(msg) == [("get_weather", {"city": "Paris"})]
        assert msg.content == "I will check."
        assert feed("apertus", ids, range(1, len(ids)), stream_arguments=stream) == whole


@pytest.mark.parametrize(
    "item",
    [
        '{"get_weather": {"city": "Paris"}, "search": {"query": "x"}}',  # two keys
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',  # not keyed
        '{"get_weather": "city=Paris"}',  # arguments not an object
        "{}",
    ],
)
def test_apertus_an_item_that_is_not_one_keyed_call_is_content(item: str) -> None:
    tok = cases.tokenizer("apertus")
    text = f"<|tools_prefix|>[{item}]<|tools_suffix|>"
    msg = message("apertus", tok.encode(text))
    assert msg.tool_calls == []
    assert msg.content == text
    # Streamed, a call whose name was already sent ends invalid; none is valid.
    streamed = message("apertus", tok.encode(text), stream_arguments=True)
    assert not [c for c in streamed.tool_calls if c.valid]


def test_apertus_a_call_inside_reasoning_ends_it() -> None:
    """SGLang's apertus2509 reasoning detector reads a call list inside the block."""
    tok = cases.tokenizer("apertus")
    text = (
        "<|inner_prefix|>Look it up. "
        '<|tools_prefix|>[{"get_weather": {"city": "Paris", "days": 3}}]<|tools_suffix|>'
    )
    ids = tok.encode(text)
    for stream in (False, True):
        msg = message("apertus", ids, stream_arguments=stream)
        assert msg.reasoning == "Look it up."
        assert calls_of(msg) == [WEATHER]


# -- xLAM --------------------------------------------------------------------------------


def test_xlam_lists_at_a_line_start_are_calls_and_others_content() -> None:
    tok = cases.tokenizer("xlam")
    two = [WEATHER, ("get_weather", {"city": "Rome"})]
    native = formats.get("xlam").render(two)
    assert native == (
        '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}, '
        '{"name": "get_weather", "arguments": {"city": "Rome"}}]'
    )
    assert not Parser("xlam", tok).gated
    for text in (native, "Sure.\n" + native, native.replace(", {", ",\n  {")):
        ids = tok.encode(text)
        for stream in (False, True):
            whole = feed("xlam", ids, stream_arguments=stream)
            msg = Message.from_events(whole)
            assert calls_of(msg) == two
            assert (msg.content or "") == text[: text.index("[")].strip()
            assert feed("xlam", ids, range(1, len(ids)), stream_arguments=stream) == whole
    for prose in (
        "Sure. " + native,  # mid-line: an echo, not a call
        "[1, 2, 3] are the numbers.",
        '[{"name": "nope", "arguments": {}}]',  # an undeclared tool
        '[{"city": "Paris"}]',  # not a call object
        '[{"name": "get_weather", "arguments": {"city": "Pa',  # cut
    ):
        msg = message("xlam", tok.encode(prose))
        assert msg.tool_calls == [] and msg.content == prose


# -- Jamba -------------------------------------------------------------------------------


def test_jamba_a_list_over_several_lines_after_prose() -> None:
    tok = cases.tokenizer("jamba")
    text = (
        "Checking both.<tool_calls>[\n"
        '    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},\n'
        '    {"name": "get_time", "arguments": {}}\n]</tool_calls>'
    )
    ids = tok.encode(text)
    for stream in (False, True):
        whole = feed("jamba", ids, stream_arguments=stream)
        msg = Message.from_events(whole)
        assert calls_of(msg) == [WEATHER, ("get_time", {})]
        assert msg.content == "Checking both."
        assert feed("jamba", ids, range(1, len(ids)), stream_arguments=stream) == whole


# -- GigaChat 3 / 3.1 --------------------------------------------------------------------

#: vLLM's parser tests' outputs (tests/tool_parsers/test_gigachat3_tool_parser.py):
#: text, then GigaChat 3's `function call` message or GigaChat 3.1's token.
GIGACHAT_TEXT = "I'll check that for you."
GIGACHAT_ARGS = {"action": "create", "id": "preferences"}
GIGACHAT_JSON = json.dumps({"name": "manage_user_memory", "arguments": GIGACHAT_ARGS})
GIGACHAT = {
    "gigachat3": f"{GIGACHAT_TEXT}<|message_sep|>\n\nfunction call<|role_sep|>\n{GIGACHAT_JSON}",
    "gigachat31": f"{GIGACHAT_TEXT}<|function_call|>{GIGACHAT_JSON}",
}
MEMORY_TOOL = {
    "type": "function",
    "function": {
        "name": "manage_user_memory",
        "parameters": {"type": "object", "properties": {"action": {"type": "string"}}},
    },
}


@pytest.mark.parametrize("name", sorted(GIGACHAT))
def test_gigachat_text_then_a_call_in_any_chunking(name: str) -> None:
    ids = cases.tokenizer(name).encode(GIGACHAT[name] + "</s>")
    tools = [*cases.TOOLS, MEMORY_TOOL]
    for stream in (False, True):
        whole = feed(name, ids, tools=tools, stream_arguments=stream)
        msg = Message.from_events(whole)
        assert msg.content == GIGACHAT_TEXT
        assert calls_of(msg) == [("manage_user_memory", GIGACHAT_ARGS)]
        assert feed(name, ids, range(1, len(ids)), tools=tools, stream_arguments=stream) == whole


def test_gigachat3_a_message_of_another_role_is_content() -> None:
    """After the separator only a `function call` header opens a call; any other text
    (a role the model should not write, the header misspelled) is released as it is,
    in any chunking."""
    tok = cases.tokenizer("gigachat3")
    for header in ("assistant", "function calls", "functioncall"):
        text = f"Done.<|message_sep|>\n\n{header}<|role_sep|>\n{NATIVE['gigachat31'][17:]}"
        ids = tok.encode(text)
        whole = feed("gigachat3", ids)
        msg = Message.from_events(whole)
        assert msg.tool_calls == []
        assert squash(msg.content) == squash(tok.decode(ids))
        assert feed("gigachat3", ids, range(1, len(ids))) == whole


def test_gigachat3_the_role_header_without_its_separator_token_is_content() -> None:
    """`function call<|role_sep|>` spelled from sub-words (quoted in prose) is text."""
    tok = cases.tokenizer("gigachat3")
    text = f"Write function call<|role_sep|>\n{NATIVE['gigachat31'][17:]} to call it."
    ids = tok.encode("Write ") + tok.encode(text[6:], delimiters=False)
    msg = message("gigachat3", ids)
    assert msg.tool_calls == []
    assert msg.content == text


# -- InternLM 2 / Intern-S1 ----------------------------------------------------------------


def test_internlm_the_space_a_decoding_puts_between_its_tokens_is_read() -> None:
    """SGLang's detector example: `<|action_start|> <|plugin|>` (the space written by
    a decoding that spaces special tokens), `parameters` for the arguments."""
    tok = cases.tokenizer("internlm")
    text = (
        "What's the weather like?<|action_start|> <|plugin|>\n"
        '{"name": "get_weather", "parameters": {"city": "Tokyo"}}<|action_end|>'
    )
    ids = tok.encode(text)
    for stream in (False, True):
        whole = feed("internlm", ids, stream_arguments=stream)
        msg = Message.from_events(whole)
        assert msg.content == "What's the weather like?"
        assert calls_of(msg) == [("get_weather", {"city": "Tokyo"})]
        assert feed("internlm", ids, range(1, len(ids)), stream_arguments=stream) == whole


def test_internlm_an_interpreter_action_is_content_as_written() -> None:
    tok = cases.tokenizer("internlm")
    text = "Run it.<|action_start|><|interpreter|>\nprint(1)<|action_end|>"
    ids = tok.encode(text)
    whole = feed("internlm", ids)
    msg = Message.from_events(whole)
    assert msg.tool_calls == []
    assert msg.content == text
    assert feed("internlm", ids, range(1, len(ids))) == whole


def test_intern_s1_reasons_then_calls() -> None:
    tok = cases.tokenizer("internlm")
    text = "<think>The user wants the weather.</think>\n\n" + NATIVE["internlm"]
    msg = message("internlm", tok.encode(text))
    assert msg.reasoning == "The user wants the weather."
    assert msg.content is None
    assert calls_of(msg) == [WEATHER]


# -- Step3 -------------------------------------------------------------------------------


def test_step3_a_call_of_another_type_is_content() -> None:
    """vLLM's parser takes only the `function` type before the separator."""
    tok = cases.tokenizer("step3")
    text = NATIVE["step3"].replace("function<｜tool_sep｜>", "plugin<｜tool_sep｜>")
    ids = tok.encode(text)
    whole = feed("step3", ids)
    msg = Message.from_events(whole)
    assert msg.tool_calls == []
    assert squash(msg.content) == squash(text)
    assert feed("step3", ids, range(1, len(ids))) == whole


def test_step3_output_after_its_prompt_opened_reasoning() -> None:
    """The generation prompt opens `<think>`: the output begins inside reasoning."""
    tok = cases.tokenizer("step3")
    text = "The user wants the weather.</think>\n\nChecking." + NATIVE["step3"]
    for stream in (False, True):
        msg = message("step3", tok.encode(text), in_reasoning=True, stream_arguments=stream)
        assert msg.reasoning == "The user wants the weather."
        assert msg.content == "Checking."
        assert calls_of(msg) == [WEATHER]


# -- LongCat -----------------------------------------------------------------------------


def test_longcat_the_parser_tests_outputs() -> None:
    """vLLM's parser tests: text around a call, and two calls one per line."""
    tok = cases.tokenizer("longcat")
    around = (
        "Let me check the weather for you.\n"
        '<longcat_tool_call>{"name": "get_weather", "arguments": {"city": "Tokyo"}}'
        "</longcat_tool_call>\nHere is the result."
    )
    ids = tok.encode(around)
    for stream in (False, True):
        whole = feed("longcat", ids, stream_arguments=stream)
        msg = Message.from_events(whole)
        assert calls_of(msg) == [("get_weather", {"city": "Tokyo"})]
        assert squash(msg.content) == squash("Let me check the weather for you.Here is the result.")
        assert feed("longcat", ids, range(1, len(ids)), stream_arguments=stream) == whole
    parallel = (
        '<longcat_tool_call>{"name": "get_weather", "arguments": {"city": "Tokyo"}}'
        '</longcat_tool_call>\n<longcat_tool_call>{"name": "get_time", '
        '"arguments": {"timezone": "Asia/Tokyo"}}</longcat_tool_call>'
    )
    msg = message("longcat", tok.encode(parallel))
    assert [c.name for c in msg.tool_calls] == ["get_weather", "get_time"]
    assert msg.content is None


# -- GigaChat 3.5 ------------------------------------------------------------------------


def test_gigachat35_an_invoke_outside_its_wrapper_is_content() -> None:
    """SGLang's detector reads invokes only inside `<｜GCML｜tool_calls>`."""
    tok = cases.tokenizer("gigachat35")
    invoke = NATIVE["gigachat35"].split("\n", 1)[1].rsplit("\n", 1)[0]
    text = f"Sure.\n{invoke}"
    for stream in (False, True):
        msg = message("gigachat35", tok.encode(text), stream_arguments=stream)
        assert msg.tool_calls == []
        assert msg.content == text


def test_gigachat35_text_before_the_calls_is_content() -> None:
    tok = cases.tokenizer("gigachat35")
    ids = tok.encode("Checking the weather.\n" + NATIVE["gigachat35"])
    whole = feed("gigachat35", ids)
    msg = Message.from_events(whole)
    assert msg.content == "Checking the weather."
    assert calls_of(msg) == [WEATHER]
    assert feed("gigachat35", ids, range(1, len(ids))) == whole


# -- ERNIE 4.5 ---------------------------------------------------------------------------


def test_ernie45_reads_the_parsers_own_samples_after_prefilled_reasoning() -> None:
    tok = cases.tokenizer("ernie45")
    call = NATIVE["ernie45"]
    # vLLM's ernie45 tool parser's sample: reasoning, `</think>`, blank lines, the call.
    text = "The user wants the weather.\n</think>\n\n\n" + call + "\n"
    ids = tok.encode(text)
    whole = message("ernie45", ids, in_reasoning=True)
    assert calls_of(whole) == [WEATHER]
    assert whole.reasoning == "The user wants the weather." and whole.content is None
    for stream in (False, True):
        cut = message(
            "ernie45", ids, range(1, len(ids)), in_reasoning=True, stream_arguments=stream
        )
        assert calls_of(cut) == [WEATHER] and cut.reasoning == whole.reasoning
    # The reasoning parser's answer form: `<response>` markers are dropped, their text kept.
    answer = tok.encode("Let me answer.\n</think>\n\n<response>\nIt is sunny.\n</response>\n")
    msg = message("ernie45", answer, in_reasoning=True)
    assert msg.reasoning == "Let me answer." and msg.tool_calls == []
    assert msg.content == "It is sunny."


def test_ernie45_a_call_quoted_inside_reasoning_is_reasoning() -> None:
    tok = cases.tokenizer("ernie45")
    text = "Maybe " + NATIVE["ernie45"] + " is wrong.\n</think>\n\nNo call."
    for deltas in ((), range(1, len(tok.encode(text)))):
        msg = message("ernie45", tok.encode(text), deltas, in_reasoning=True)
        assert msg.tool_calls == []
        assert msg.reasoning == "Maybe " + NATIVE["ernie45"] + " is wrong."
        assert msg.content == "No call."


# -- OLMo 3 ------------------------------------------------------------------------------


def test_olmo3_reads_one_call_a_line_with_json_literals() -> None:
    tok = cases.tokenizer("olmo3")
    text = (
        'Let me check.<function_calls>get_weather(city="Paris", days=3)\n'
        "get_weather(city='Rome', days=null)\n</function_calls>"
    )
    ids = tok.encode(text)
    for deltas in ((), range(1, len(ids))):
        for stream in (False, True):
            msg = message("olmo3", ids, deltas, stream_arguments=stream)
            assert calls_of(msg) == [WEATHER, ("get_weather", {"city": "Rome", "days": None})]
            assert msg.content == "Let me check."
    # JSON's constants at any depth, where the schema leaves the type open.
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    call = "<function_calls>f(a=true, b=[false, null], c={'k': true})</function_calls>"
    msg = message("olmo3", tok.encode(call), tools=tools)
    assert calls_of(msg) == [("f", {"a": True, "b": [False, None], "c": {"k": True}})]


@pytest.mark.parametrize(
    "body",
    ['[get_weather(city="Paris")]', "get_weather(city=)", "42", 'get_weather("Paris")'],
)
def test_olmo3_a_list_that_is_not_its_calls_is_content(body: str) -> None:
    tok = cases.tokenizer("olmo3")
    text = "<function_calls>" + body + "</function_calls> and more."
    ids = tok.encode(text)
    for deltas in ((), range(1, len(ids))):
        msg = message("olmo3", ids, deltas)
        assert msg.tool_calls == []
        assert msg.content == text


# -- Granite 3.1 ---------------------------------------------------------------------------


def test_granite31_calls_follow_its_text_opener_at_a_line_start() -> None:
    tok = cases.tokenizer("granite31")
    two = [WEATHER, ("get_weather", {"city": "Rome"})]
    native = formats.get("granite31").render(two)
    # vLLM's granite parser's sample writes a space before the list.
    spaced = native.replace("<tool_call>[", "<tool_call> [")
    for text in (native, spaced, "Sure.\n" + native):
        ids = tok.encode(text)
        for deltas in ((), range(1, len(ids))):
            for stream in (False, True):
                msg = message("granite31", ids, deltas, stream_arguments=stream)
                assert calls_of(msg) == two
                assert (msg.content or "") == text[: text.index("<tool_call>")].strip()
    assert not Parser("granite31", tok).gated
    # Granite 3's token opener is the `granite` format's, not this one's.
    token_form = formats.get("granite").render([WEATHER])
    assert message("granite31", tok.encode(token_form)).tool_calls == []
    for prose in (
        "Sure. " + native,  # mid-line: an echo, not a call
        "<b>bold</b> text",
        "<tool_call>[1, 2]",
        '<tool_call>[{"name": "nope"',
        "<tool_cal",
    ):
        for deltas in ((), range(1, len(tok.encode(prose)))):
            msg = message("granite31", tok.encode(prose), deltas)
            assert msg.tool_calls == [] and msg.content == prose


# -- MiniCPM -------------------------------------------------------------------------------


def test_minicpm5_reads_the_detectors_sample_and_parallel_calls_at_line_starts() -> None:
    tok = cases.tokenizer("minicpm5")
    sample = (
        '<function name="get_weather"><param name="city">北京</param>'
        '<param name="days">3</param></function>'
    )
    two = sample + '\n<function name="get_weather"><param name="city">Rome</param></function>'
    expected = [("get_weather", {"city": "北京", "days": 3}), ("get_weather", {"city": "Rome"})]
    for text in (two, "Let me look.\n" + two, "<think>Hmm.</think>" + two):
        ids = tok.encode(text)
        for deltas in ((), range(1, len(ids))):
            for stream in (False, True):
                msg = message("minicpm5", ids, deltas, stream_arguments=stream)
                assert calls_of(msg) == expected
                assert (msg.content or "") == ("Let me look." if text.startswith("Let") else "")
    assert not Parser("minicpm5", tok).gated
    for prose in (
        "Sure. " + sample,  # mid-line: an echo, not a call
        "<b>bold</b> text",
        '<function name="get_weather"><param name="city">Paris',
        '<function name="get_weather">',
        "<functions>",
    ):
        ids = tok.encode(prose)
        for deltas in ((), range(1, len(ids))):
            msg = message("minicpm5", ids, deltas)
            assert msg.tool_calls == [] and msg.content == prose
