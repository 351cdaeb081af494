"""LongCat (LongCat-Flash): Hermes-style JSON calls between `<longcat_tool_call>` tags.

Sample (vLLM 0.33's `longcat` parser, `vllm/tool_parsers/longcat_tool_parser.py`:16-23,
Hermes' parser with these tags; the outputs of vLLM's parser tests,
`tests/tool_parsers/test_longcat_tool_parser.py`, parallel calls one per line; the
second broken here before its close)::

    <longcat_tool_call>{"name": "get_weather", "arguments": {"city": "Tokyo"}}</longcat_tool_call>
    <longcat_tool_call>{"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}
    </longcat_tool_call>

Each call is one JSON object naming the tool (`syntax.json_envelope`, the model's own
argument bytes), as `hermes`, with no newline required inside the tags. The tags are
added tokens of the LongCat vocabulary (vLLM's parser looks both up by id), so the
format is gated. No reasoning delimiters: vLLM and SGLang name no LongCat reasoning
parser.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.json_envelope import JsonEnvelope

START, END = "<longcat_tool_call>", "</longcat_tool_call>"


def render(calls: Sequence[RenderedCall]) -> str:
    return "\n".join(
        START + json.dumps({"name": name, "arguments": dict(args)}, ensure_ascii=False) + END
        for name, args in calls
    )


def syntax(context: CallContext) -> JsonEnvelope:
    return JsonEnvelope(context)


LONGCAT = register(
    Format(
        name="longcat",
        call=(START, END),
        syntax=syntax,
        render=render,
        template_markers=(START,),
        grammar=Shape(head='{"name": "{name}", "arguments": ', tail="}", name="json"),
    ),
    aliases=("longcat_flash",),
)
