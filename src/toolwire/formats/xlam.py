"""xLAM (Salesforce xLAM-2 "fc" models): a bare JSON list of calls, at a line start.

Sample (vLLM 0.33's `xlam` parser, `vllm/tool_parsers/xlam_tool_parser.py:105-117`: an
output that is a JSON array is the calls, each item a `{"name", "arguments"}` object,
lines 150-155)::

    [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]

No token introduces the list (xLAM-2 runs on Llama 3.1's and Qwen2.5's vocabularies,
where `[` is text), so this format is text-gated (`Parser.gated` False) and, like
`pythonic` and `phi4_mini`, line-anchored (`Format.anchor`): a list may begin only
where a line begins (the output's start, after a newline, or right after a call), so
a bracket quoted mid-sentence is content, and a list that is not calls is released
as content. Each item is one call (`syntax.json_calls`, the model's own argument
bytes); the list ends at its `]`. (vLLM's parser also looks inside code fences,
`[TOOL_CALLS]` and `<tool_call>` tags, and after `</think>`; those wrappers are
other formats' here.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import Anchor, AnchoredShape, CallContext, Format, RenderedCall
from toolwire.syntax.json_calls import JsonCall


def render(calls: Sequence[RenderedCall]) -> str:
    items = [
        json.dumps({"name": name, "arguments": dict(args)}, ensure_ascii=False)
        for name, args in calls
    ]
    return "[" + ", ".join(items) + "]"


def syntax(context: CallContext) -> JsonCall:
    return JsonCall(context, separator=",")


XLAM = register(
    Format(
        name="xlam",
        call=("", None),
        syntax=syntax,
        render=render,
        anchor=Anchor(begins="["),
        grammar=AnchoredShape(
            "json", '{"name": "{name}", "arguments": ', "}", separator=", ", items=("[", "]")
        ),
    )
)
