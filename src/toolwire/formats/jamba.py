"""Jamba (AI21 Jamba 1.5 / 1.6 / 1.7): a JSON list of calls between `<tool_calls>` tokens.

Sample (vLLM 0.33's `jamba` parser, `vllm/tool_parsers/jamba_tool_parser.py:48-53`:
`<tool_calls>(.*?)</tool_calls>` read as a JSON list whose items are
`{"name", "arguments"}` objects, lines 96-108)::

    <tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]</tool_calls>

Each item is one call (`syntax.json_calls`, the model's own argument bytes);
`</tool_calls>` ends the list (`syntax.end_marked`): Hunyuan A13B's calls, without its
`<think>` reasoning and `<answer>` markers (Jamba writes neither). Both tags are tokens
of the Jamba vocabulary (vLLM's parser looks their ids up and keeps special tokens
for them), so the format is gated. No reasoning.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.end_marked import EndMarked
from toolwire.syntax.json_calls import JsonCall

START, END = "<tool_calls>", "</tool_calls>"


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


JAMBA = register(
    Format(
        name="jamba",
        call=(START, None),
        syntax=syntax,
        render=render,
        marks=(END,),
        grammar=Shape(
            head='{"name": "{name}", "arguments": ',
            tail="}",
            name="json",
            items=("[", "]"),
            separator=", ",
            list_end=END,
        ),
    )
)
