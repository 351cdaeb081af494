"""Phi-4-mini: a JSON list of calls after the word `functools`.

Sample (vLLM's `phi4_mini_json` parser, `vllm/tool_parsers/phi4mini_tool_parser.py`,
which reads `functools\\[(.*?)\\]` as a JSON list of `{"name", "arguments"}` objects)::

    functools[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]

`functools` is ordinary text in Phi-4-mini's vocabulary (no added token), so this
format matches it as text and says so (`Parser.gated` False); a list that is not
calls is released as content. Each item is one call (`syntax.json_calls`, the model's
own argument bytes; `parameters` is read too); the list ends at its `]`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.json_calls import JsonCall

START = "functools"


def render(calls: Sequence[RenderedCall]) -> str:
    items = [
        json.dumps({"name": name, "arguments": dict(args)}, ensure_ascii=False)
        for name, args in calls
    ]
    return START + "[" + ", ".join(items) + "]"


def syntax(context: CallContext) -> JsonCall:
    return JsonCall(context, separator=",")


PHI4_MINI = register(
    Format(
        name="phi4_mini",
        call=(START, None),
        syntax=syntax,
        render=render,
        grammar=Shape(
            head='{"name": "{name}", "arguments": ',
            tail="}",
            name="json",
            items=("[", "]"),
            separator=", ",
        ),
    ),
    aliases=("phi4_mini_json",),
)
