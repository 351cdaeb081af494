"""The agent APIs' pieces without HTTP: segments, the two writers, input mapping, the store.

The property: however a turn's events are cut into steps, each writer's stream ends
in the same final object as the whole turn written at once, and its deltas join to it.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolwire.events import (
    Content,
    Event,
    Reasoning,
    ToolCallArguments,
    ToolCallBegin,
    ToolCallEnd,
)
from toolwire.server.core.segments import Closed, Grew, Opened, Segment, Segmenter, assemble
from toolwire.server.messages.request import parse_messages
from toolwire.server.messages.writer import MessageWriter
from toolwire.server.responses.request import parse_responses, to_messages
from toolwire.server.responses.writer import ResponseWriter


def _call(index: int, arguments: str) -> list[Event]:
    begin = ToolCallBegin(index, f"call_{index}", "f")
    pieces = [arguments[i : i + 3] for i in range(0, len(arguments), 3)]
    return [begin, *[ToolCallArguments(index, p) for p in pieces], ToolCallEnd(index)]


@st.composite
def turns(draw: st.DrawFn) -> list[Event]:
    """A turn's events: reasoning, content and calls in any order, as parsers emit them."""
    events: list[Event] = []
    calls = 0
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["reasoning", "content", "call"]))
        text = draw(st.text(st.sampled_from('ab <>{}\n"é'), min_size=1, max_size=8))
        if kind == "reasoning":
            events.append(Reasoning(text))
        elif kind == "content":
            events.append(Content(text))
        else:
            events += _call(calls, json.dumps({"x": text}))
            calls += 1
    return events


def _cuts(draw: st.DrawFn, events: list[Event]) -> list[list[Event]]:
    points = sorted(set(draw(st.lists(st.integers(0, len(events)), max_size=len(events)))))
    bounds = [0, *points, len(events)]
    return [events[a:b] for a, b in itertools.pairwise(bounds)]


def _request(**body: Any) -> Any:
    return parse_responses({"model": "m", "input": "x", **body})


@given(st.data())
def test_response_writer_is_chunk_invariant(data: st.DataObject) -> None:
    events = data.draw(turns())
    whole = ResponseWriter(_request(), "resp_1", "m", 0)
    whole.feed(events)
    whole.finish("stop", 3, 4)
    streamed = ResponseWriter(_request(), "resp_1", "m", 0)
    stream = streamed.start()
    for step in _cuts(data.draw, events):
        stream += streamed.feed(step)
    stream += streamed.finish("stop", 3, 4)

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("id", "item_id")}
        return [strip(v) for v in value] if isinstance(value, list) else value

    assert strip(streamed.response) == strip(whole.response)
    assert [e["sequence_number"] for e in stream] == list(range(len(stream)))
    joined = "".join(e.get("delta", "") for e in stream)
    output = whole.response["output"]
    expected = "".join(
        i["arguments"] if i["type"] == "function_call" else i["content"][0]["text"] for i in output
    )
    assert joined == expected
    kinds = [s.kind for s in assemble(events)]
    names = {"reasoning": "reasoning", "text": "message", "call": "function_call"}
    assert [i["type"] for i in output] == [names[k] for k in kinds]


@given(st.data())
def test_message_writer_is_chunk_invariant(data: st.DataObject) -> None:
    events = data.draw(turns())
    whole = MessageWriter("msg_1", "m", 3)
    whole.feed(events)
    whole.finish("stop", None, 4)
    streamed = MessageWriter("msg_1", "m", 3)
    stream = streamed.start()
    for step in _cuts(data.draw, events):
        stream += streamed.feed(step)
    stream += streamed.finish("stop", None, 4)
    assert streamed.message == whole.message
    starts = [p["index"] for name, p in stream if name == "content_block_start"]
    stops = [p["index"] for name, p in stream if name == "content_block_stop"]
    assert starts == stops == list(range(len(whole.message["content"])))
    assert [name for name, _ in stream][-2:] == ["message_delta", "message_stop"]


def test_a_released_call_is_opened_and_closed_at_once() -> None:
    segmenter = Segmenter()
    assert segmenter.feed([Content("a")]) == [Opened("text"), Grew("a")]
    begin = ToolCallBegin(0, "call_0", "f")
    assert segmenter.feed(_call(0, "{}")) == [Closed(), Opened("call", begin), Grew("{}"), Closed()]
    assert segmenter.finish() == []


def test_segments_open_a_call_when_it_is_released() -> None:
    events = [Reasoning("r"), Content("a"), *_call(0, '{"x": 1}'), Content("b"), *_call(1, "{}")]
    assert assemble(events) == [
        Segment("reasoning", "r"),
        Segment("text", "a"),
        Segment("call", '{"x": 1}', ToolCallBegin(0, "call_0", "f")),
        Segment("text", "b"),
        Segment("call", "{}", ToolCallBegin(1, "call_1", "f")),
    ]


def test_stop_reasons_and_a_cut_call() -> None:
    writer = MessageWriter("msg_1", "m", 1)
    writer.feed([ToolCallBegin(0, "call_0", "f"), ToolCallArguments(0, '{"x": ')])
    writer.finish("length", None, 9)
    assert writer.message["stop_reason"] == "max_tokens"
    assert writer.message["content"] == [
        {"type": "tool_use", "id": "call_0", "name": "f", "input": {}}
    ]
    writer = MessageWriter("msg_1", "m", 1)
    writer.feed([Content("one ")])
    writer.finish("stop", "END", 2)
    assert writer.message["stop_reason"] == "stop_sequence"
    assert writer.message["stop_sequence"] == "END"


def _items(*raw: Any) -> list[dict[str, Any]]:
    return _request(input=list(raw)).items


def test_input_items_become_chat_messages() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'}
    items = _items(
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "think"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok"}],
        },
        call,
        {**call, "call_id": "c2"},
        {"type": "function_call_output", "call_id": "c1", "output": "r1"},
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": [{"type": "input_text", "text": "r2"}],
        },
        {"type": "reasoning", "summary": [], "encrypted_content": "lost turn"},
        {"role": "user", "content": "next"},
    )
    calls = [
        {"id": c, "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
        for c in ("c1", "c2")
    ]
    assert to_messages(items, "rules") == [
        {"role": "system", "content": "rules\n\nbe brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ok", "reasoning_content": "think", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
        {"role": "assistant", "content": "", "reasoning_content": "lost turn"},
        {"role": "user", "content": "next"},
    ]


def test_message_blocks_become_chat_messages() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}
    request = parse_messages(
        {
            "model": "m",
            "max_tokens": 9,
            "system": [{"type": "text", "text": "s1"}, {"type": "text", "text": "s2"}],
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "x"},
                        {"type": "redacted_thinking", "data": "opaque"},
                        {"type": "text", "text": "calling"},
                        use,
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": "bad",
                            "is_error": True,
                        },
                        {"type": "text", "text": "and?"},
                    ],
                },
            ],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
            "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "stop_sequences": ["END"],
            "thinking": {"type": "enabled", "budget_tokens": 4},
        }
    )
    chat = request  # the neutral request the turn runs
    call = {"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    assert chat.messages == [
        {"role": "system", "content": "s1\ns2"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "calling",
            "reasoning_content": "hmm",
            "tool_calls": [call],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "Error: bad"},
        {"role": "user", "content": "and?"},
    ]
    assert chat.tool_choice == "required" and chat.parallel_tool_calls is False
    assert chat.stop == ["END"] and chat.template_kwargs == {"enable_thinking": True}
