"""Llama 4: the pythonic call list between `<|python_start|>` and `<|python_end|>`.

Sample (vLLM's `llama4_pythonic` parser, `vllm/tool_parsers/llama4_pythonic_tool_parser.py`,
which strips the two tokens around the list; SGLang's pythonic detector notes "Llama 4
model sometime will output <|python_start|> and <|python_end|> tokens")::

    <|python_start|>[get_weather(city="Paris", days=3)]<|python_end|>

The list is the `pythonic` format's (`syntax.pythonic`), read item by item and ended
by `<|python_end|>` (`syntax.end_marked`), as LFM2's. Both are special tokens of the
Llama 4 vocabulary, so the format is gated; Llama 4's bare lists (no token around
them) are the text-gated `pythonic` format. Reasoning: none.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.formats import pythonic, register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.end_marked import EndMarked
from toolwire.syntax.pythonic import PythonicCall

START, END = "<|python_start|>", "<|python_end|>"


def render(calls: Sequence[RenderedCall]) -> str:
    return START + pythonic.render(calls) + END


def syntax(context: CallContext) -> EndMarked:
    return EndMarked(context, PythonicCall, END)


LLAMA4 = register(
    Format(
        name="llama4",
        call=(START, None),
        syntax=syntax,
        render=render,
        marks=(END,),
        template_markers=("<|header_start|>",),
        grammar=Shape(head="", style="pythonic", items=("[", "]"), separator=", ", list_end=END),
    ),
    aliases=("llama4_pythonic",),
)
