"""GigaChat 3.1: GigaChat 3's JSON call object after the `<|function_call|>` token.

Sample (vLLM 0.33's `gigachat3` parser, `vllm/tool_parsers/gigachat3_tool_parser.py`:29,
which reads the object after `<|function_call|>` as after GigaChat 3's role header; the
same pattern in SGLang 0.5.23's `sglang/srt/function_call/gigachat3_detector.py`:16; the
GigaChat 3.1 outputs of vLLM's parser tests,
`tests/tool_parsers/test_gigachat3_tool_parser.py`)::

    I'll check that for you.<|function_call|>{"name": "manage_user_memory", "arguments": {}}

The token opens the call directly (no message separator, no role header). The body
is one JSON object naming the tool (`syntax.json_envelope`, the model's own argument
bytes) that ends at its closing brace; the turn ends with `</s>`. Parallel calls are
consecutive calls, each after its own token. Gated by the token's id; no reasoning
delimiters. The peers' `gigachat3` parser name serves both versions; it stays with
`gigachat3` here.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.gigachat3 import json_call, json_object
from toolwire.formats.spec import Format, RenderedCall, Shape

FUNCTION_CALL = "<|function_call|>"


def render(calls: Sequence[RenderedCall]) -> str:
    return "".join(FUNCTION_CALL + json_object(name, dict(args)) for name, args in calls)


GIGACHAT31 = register(
    Format(
        name="gigachat31",
        call=(FUNCTION_CALL, None),
        syntax=json_call,
        render=render,
        template_markers=(FUNCTION_CALL,),
        grammar=Shape(head='{"name": "{name}", "arguments": ', tail="}", name="json", separator=""),
    ),
)
