"""Apertus (Swiss AI, 2509): a JSON list of `{"NAME": {arguments}}` objects between tokens.

Sample (vLLM 0.33's parser docstring, `vllm/tool_parsers/apertus_tool_parser.py:59-60`;
SGLang 0.5.23's `sglang/srt/function_call/apertus2509_detector.py:22` writes the same
list, items "separated by ", "")::

    I will check. <|tools_prefix|>[{"get_weather": {"city": "Paris"}}]<|tools_suffix|>

Each item is one call whose one key is the tool's name and whose value is the model's
own argument bytes (`syntax.json_envelope`, keyed); `<|tools_suffix|>` ends the list
(`syntax.end_marked`), as Nemotron's `</TOOLCALL>`. Reasoning is
`<|inner_prefix|>`...`<|inner_suffix|>` (SGLang's `apertus2509` reasoning detector,
`sglang/srt/parser/reasoning_parser.py:1588`). That detector reads a call list inside
the reasoning block as calls (`_split_inner_reasoning`), so a call may begin inside
reasoning here too; it ends the reasoning (SGLang returns the thoughts after it as
reasoning again). All four are special tokens of the Apertus vocabulary (both peers
keep special tokens for their parsers), so the format is gated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.end_marked import EndMarked
from toolwire.syntax.json_calls import JsonCall
from toolwire.syntax.json_envelope import JsonEnvelope

START, END = "<|tools_prefix|>", "<|tools_suffix|>"


class KeyedCall(JsonEnvelope):
    """`{"NAME": {arguments}}`."""

    keyed = True


def _item(context: CallContext) -> JsonCall:
    return JsonCall(context, separator=",", envelope=KeyedCall)


def render(calls: Sequence[RenderedCall]) -> str:
    items = [json.dumps({name: dict(args)}, ensure_ascii=False) for name, args in calls]
    return START + "[" + ", ".join(items) + "]" + END


def syntax(context: CallContext) -> EndMarked:
    return EndMarked(context, _item, END)


APERTUS = register(
    Format(
        name="apertus",
        call=(START, None),
        syntax=syntax,
        render=render,
        reasoning=("<|inner_prefix|>", "<|inner_suffix|>"),
        calls_in_reasoning=True,
        marks=(END,),
        grammar=Shape(
            head='{"{name}": ',
            tail="}",
            name="json",
            items=("[", "]"),
            separator=", ",
            list_end=END,
        ),
    ),
    aliases=("apertus2509",),
)
