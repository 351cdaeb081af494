"""Cases specific to the core formats (hermes, qwen3, qwen3_coder) and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cases import TOOLS
from tests.data import data_dir, tokenizer_for
from toolwire import MalformedOutput, Message, Parser, UsageError, parse

TOK = "qwen3"


def _msg(fmt: str, text: str, chunk: int = 1, **options: object) -> Message:
    tok = tokenizer_for(TOK)
    ids = tok.encode(text)
    parser = Parser(fmt, tok, tools=TOOLS, **options)  # type: ignore[arg-type]
    events = []
    for start in range(0, len(ids), chunk):
        events += parser.feed(ids[start : start + chunk])
    events += parser.finish()
    return Message.from_events(events)


@pytest.mark.parametrize("chunk", [1, 2, 1000])
def test_malformed_json_arguments_become_content(chunk: int) -> None:
    text = 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": }}\n</tool_call>'
    msg = _msg("hermes", text, chunk)
    assert msg.tool_calls == []
    assert msg.content == text
    with pytest.raises(MalformedOutput) as info:
        _msg("hermes", text, chunk, strict=True)
    assert '"city": }' in info.value.text


def test_arguments_that_are_not_an_object_become_content() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": [1, 2]}\n</tool_call>'
    assert _msg("hermes", text).tool_calls == []


def test_characters_split_across_ids_reach_content_and_arguments_whole() -> None:
    tok = tokenizer_for(TOK)
    text = '語 ☕ 𝄞 <tool_call>\n{"name": "search", "arguments": {"query": "語𝄞"}}\n</tool_call>'
    ids = tok.encode(text)
    assert any(tok.decode([i]) == "\ufffd" for i in ids)  # some id holds part of a character
    msg = _msg("hermes", text, 1)
    assert msg.content == "語 ☕ 𝄞"
    assert json.loads(msg.tool_calls[0].arguments) == {"query": "語𝄞"}


def test_prefilled_reasoning_and_stray_closing_tags() -> None:
    msg = _msg("qwen3", "thinking hard</think>\n\nHello", in_reasoning=True)
    assert (msg.reasoning, msg.content) == ("thinking hard", "Hello")
    msg = _msg("qwen3", "Hello</think> world")
    assert (msg.reasoning, msg.content) == (None, "Hello world")


def test_a_call_ends_reasoning() -> None:
    text = '<think>plan <tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>after'
    msg = _msg("qwen3", text)
    assert msg.reasoning == "plan"
    assert [c.name for c in msg.tool_calls] == ["get_time"]
    assert msg.content == "after"


def test_a_failed_call_in_reasoning_returns_to_reasoning() -> None:
    text = '<think>plan <tool_call>{"name": "nope", "arguments": {}}</tool_call> more</think>ok'
    msg = _msg("qwen3", text)
    assert msg.tool_calls == []
    assert msg.reasoning == 'plan <tool_call>{"name": "nope", "arguments": {}}</tool_call> more'
    assert msg.content == "ok"


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_qwen3_coder_values_are_typed_by_schema(chunk: int) -> None:
    text = (
        "<tool_call>\n<function=search>\n"
        "<parameter=query>\n42\n</parameter>\n"
        "<parameter=limit>\n7\n</parameter>\n"
        "<parameter=exact>\nTrue\n</parameter>\n"
        "<parameter=filters>\n{'a': [1, None]}\n</parameter>\n"
        '<parameter=tags>\n["x", "y"]\n</parameter>\n'
        "<parameter=extra>\nline one\nline two\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    for stream in (False, True):
        msg = _msg("qwen3_coder", text, chunk, stream_arguments=stream)
        (call,) = msg.tool_calls
        assert json.loads(call.arguments) == {
            "query": "42",
            "limit": 7,
            "exact": True,
            "filters": {"a": [1, None]},
            "tags": ["x", "y"],
            "extra": "line one\nline two",
        }


def test_qwen3_coder_incomplete_parameters_are_content() -> None:
    text = "<tool_call>\n<function=search>\n<parameter=query>\nabc\n</tool_call>"
    msg = _msg("qwen3_coder", text)
    assert msg.tool_calls == [] and msg.content == text


def test_usage_errors() -> None:
    tok = tokenizer_for(TOK)
    with pytest.raises(UsageError, match="unknown format"):
        Parser("nope", tok)
    with pytest.raises(UsageError, match="tool_choice"):
        Parser("hermes", tok, tools=TOOLS, tool_choice="sometimes")
    with pytest.raises(UsageError, match="not among the tools"):
        Parser("hermes", tok, tools=TOOLS, tool_choice={"function": {"name": "x"}})
    parser = Parser("hermes", tok)
    parser.feed([1])
    with pytest.raises(UsageError, match="mix"):
        parser.feed_text("x")
    parser.finish()
    with pytest.raises(UsageError, match="finished"):
        parser.feed([1])


def test_feed_text_matches_delimiters_as_text() -> None:
    parser = Parser("qwen3", tokenizer_for(TOK), tools=TOOLS)
    text = '<think>r</think>hi <tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    events = [e for ch in text for e in parser.feed_text(ch)] + parser.finish()
    msg = Message.from_events(events)
    assert (msg.reasoning, msg.content, [c.name for c in msg.tool_calls]) == (
        "r",
        "hi",
        ["get_time"],
    )


def test_parse_is_feed_then_finish() -> None:
    tok = tokenizer_for(TOK)
    ids = tok.encode('<tool_call>{"name": "get_time", "arguments": {}}</tool_call>')
    assert parse("hermes", tok, ids, tools=TOOLS).tool_calls[0].name == "get_time"


def test_cli_parse_prints_the_message_and_events(tmp_path: object) -> None:
    tools = data_dir().parent / "tools.json"
    del tools
    text = 'Hi <tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    folder = str(data_dir() / "tokenizers" / TOK)
    cmd = [sys.executable, "-m", "toolwire.cli", "parse", "--format", "hermes"]
    out = subprocess.run(
        [*cmd, "--tokenizer", folder, "--chunk", "1"], input=text, text=True, capture_output=True
    )
    assert out.returncode == 0, out.stderr
    msg = json.loads(out.stdout)
    assert msg["content"] == "Hi" and msg["tool_calls"][0]["function"]["name"] == "get_time"
    ids = json.dumps(tokenizer_for(TOK).encode(text))
    out = subprocess.run(
        [*cmd, "--tokenizer", folder, "--ids", "--events"],
        input=ids,
        text=True,
        capture_output=True,
    )
    kinds = [json.loads(line)["type"] for line in out.stdout.splitlines()]
    assert kinds == ["Content", "ToolCallBegin", "ToolCallArguments", "ToolCallEnd"]
    bad = subprocess.run(
        [*cmd, "--tokenizer", "/nonexistent"], input="x", text=True, capture_output=True
    )
    assert bad.returncode == 2 and "toolwire:" in bad.stderr


@pytest.mark.parametrize("chunk", [1, 2, 1000])
def test_an_incomplete_character_before_a_delimiter_stays_outside_the_call(chunk: int) -> None:
    tok = tokenizer_for(TOK)
    partial = 27398  # one byte of a multi-byte character
    assert tok.decode([partial]) == "\ufffd"
    call = tok.encode('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>')
    ids = [partial, *call]
    parser = Parser("hermes", tok, tools=TOOLS)
    events = []
    for start in range(0, len(ids), chunk):
        events += parser.feed(ids[start : start + chunk])
    msg = Message.from_events(events + parser.finish())
    assert msg.content == "\ufffd"
    assert [c.name for c in msg.tool_calls] == ["get_time"]
