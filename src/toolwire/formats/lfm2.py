"""LFM2 / LFM2.5 (Liquid AI): a pythonic call list between `<|tool_call_start|>` tokens.

Sample (vLLM's `lfm2` parser, its class docstring "Example model output")::

    <|tool_call_start|>[get_weather(location="Paris")]<|tool_call_end|>
    The weather in Paris is sunny.

The list is the `pythonic` format's (`syntax.pythonic`: keyword arguments as Python
literals, typed by the schema; several calls are items of one list), read item by
item and ended by `<|tool_call_end|>` (`syntax.end_marked`). Ids in the LFM2
vocabulary (its tokenizer.json): `<|im_start|>` 6, `<|im_end|>` 7,
`<|tool_list_start|>` 8 ... `<|tool_call_start|>` 10, `<|tool_call_end|>` 11,
`<|tool_response_start|>` 12, `<|tool_response_end|>` 13; LFM2.5's thinking models
add `<think>` 64400 and `</think>` 64401. The call tokens are special, so the format
is gated. LFM2.5 models also write a bare list (`[get_weather(city="Paris")]`) with
no token around it: that is the text-gated `pythonic` format (`Parser.gated` False,
a list only at a line start), which covers it; this format matches only the tokens.

JSON mode. Liquid's documentation has the model write JSON call objects in the same
list when the system prompt asks for it, and SGLang's `lfm2` detector
(`sglang/srt/function_call/lfm2_detector.py`) reads both::

    <|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|tool_call_end|>

Each item is read as JSON when it begins with `{` (`syntax.either`), else as a
pythonic call. The grammar writes the default, pythonic, form.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.formats import pythonic, register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.either import Either
from toolwire.syntax.end_marked import EndMarked, ListItem
from toolwire.syntax.json_calls import JsonCall
from toolwire.syntax.pythonic import PythonicCall

START, END = "<|tool_call_start|>", "<|tool_call_end|>"


def render(calls: Sequence[RenderedCall]) -> str:
    return START + pythonic.render(calls) + END


def _json(context: CallContext) -> JsonCall:
    return JsonCall(context, separator=",")


def _item(context: CallContext) -> ListItem:
    return Either(context, json=_json, other=PythonicCall)


def syntax(context: CallContext) -> EndMarked:
    return EndMarked(context, _item, END)


LFM2 = register(
    Format(
        name="lfm2",
        call=(START, None),
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        marks=(END,),
        grammar=Shape(head="", style="pythonic", items=("[", "]"), separator=", ", list_end=END),
    )
)
