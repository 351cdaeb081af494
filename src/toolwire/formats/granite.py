"""Granite 3: a JSON list of calls after the `<|tool_call|>` token.

Sample (vLLM's `granite` parser docstring, Granite 3.0; IBM's Granite 3 tool prompt:
"respond only with <|tool_call|> followed by a JSON list of tools used")::

    <|tool_call|>[{"name": "get_weather", "arguments": {"city": "SF"}}]

The list may hold several calls and has no closing delimiter: its `]` ends it
(`syntax.json_calls`, one body per item, the model's own argument bytes), and text
after it is content. `<|tool_call|>` is a special token of the Granite 3 vocabulary
(49152-vocabulary GPT-2 BPE with `<|start_of_role|>`, `<|end_of_role|>`,
`<|tool_call|>` and, from 3.3, citation and plugin markers), so the format is gated.
Granite 3.1's variant writes the text `<tool_call>` instead of the token; vLLM's
parser also matches that text, which this gated format does not: that is the
text-gated, line-anchored `granite31` format. Granite 3 has no reasoning delimiters.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.json_list import NAMED_HEAD, named_items
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.json_calls import JsonCall

TOOL_CALL = "<|tool_call|>"


def render(calls: Sequence[RenderedCall]) -> str:
    return TOOL_CALL + "[" + named_items(calls) + "]"


def syntax(context: CallContext) -> JsonCall:
    return JsonCall(context, separator=",")


GRANITE = register(
    Format(
        name="granite",
        call=(TOOL_CALL, None),
        syntax=syntax,
        render=render,
        # A JSON list after the token; its `]` ends it.
        grammar=Shape(
            head=NAMED_HEAD,
            tail="}",
            name="json",
            items=("[", "]"),
            separator=", ",
        ),
    )
)
