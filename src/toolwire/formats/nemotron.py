"""Nemotron (NVIDIA Nemotron Nano v2): a JSON list of calls between `<TOOLCALL>` tags.

Sample (the tool parser published with `nvidia/NVIDIA-Nemotron-Nano-9B-v2` on Hugging
Face, `nemotron_toolcall_parser_no_streaming.py`, in the form its vLLM adaptations
quote: "tool calls wrapped in <TOOLCALL> ... </TOOLCALL> with JSON array payloads";
Dynamo's default tool-call format)::

    <TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]</TOOLCALL>

Each item is one call (`syntax.json_calls`, the model's own argument bytes);
`</TOOLCALL>` ends the list (`syntax.end_marked`), as Hunyuan A13B's `<tool_calls>`.
Reasoning is `<think>`...`</think>`. Where the tags are tokens of the served
vocabulary the format is gated; elsewhere it matches them as text and says so.
(Nemotron 3 writes Qwen3-Coder's XML calls instead: the `nemotron3` alias of
`qwen3_coder`.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.end_marked import EndMarked
from toolwire.syntax.json_calls import JsonCall

START, END = "<TOOLCALL>", "</TOOLCALL>"


def _item(context: CallContext) -> JsonCall:
    return JsonCall(context, separator=",")


def render(calls: Sequence[RenderedCall]) -> str:
    items = [
        json.dumps({"name": name, "arguments": dict(args)}, ensure_ascii=False)
        for name, args in calls
    ]
    return START + "[" + ", ".join(items) + "]" + END


def syntax(context: CallContext) -> EndMarked:
    return EndMarked(context, _item, END)


NEMOTRON = register(
    Format(
        name="nemotron",
        call=(START, None),
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        marks=(END,),
        grammar=Shape(
            head='{"name": "{name}", "arguments": ',
            tail="}",
            name="json",
            items=("[", "]"),
            separator=", ",
            list_end=END,
        ),
    ),
    aliases=("nemotron_json", "nemotron_nano_v2"),
)
