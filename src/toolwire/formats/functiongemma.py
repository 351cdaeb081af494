"""FunctionGemma: `call:NAME{...}` between function-call tokens, strings in `<escape>`.

Sample (Google's "FunctionGemma formatting and best practices" page, the model's
answer to a temperature question; vLLM 0.33's parser reads the same shape,
`vllm/tool_parsers/functiongemma_tool_parser.py:37-49`)::

    <start_function_call>call:get_current_temperature{location:<escape>Paris<escape>,unit:<escape>celsius<escape>}<end_function_call>

FunctionGemma (Gemma 3 270M tuned for calls) writes Gemma 4's body (`syntax.gemma`)
with another string quote: keys bare, every string between two `<escape>` tokens,
non-string values bare (its template writes `{{ value }}` for them, keys sorted).
Parallel calls follow each other directly; the template then writes
`<start_function_response>`, where generation stops. `<start_function_call>`,
`<end_function_call>` and `<escape>` are special tokens of its vocabulary, so the
format is gated. No reasoning.

vLLM's parser reads only quoted values and `json.loads` each (`days:<escape>3<escape>`
is 3); here a quoted value is read that way where the declared schema types the
parameter as an integer, number or boolean (`typed_strings`), and stays a string
where the schema says string; bare scalars are typed as in Gemma 4.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.gemma import GemmaCall

QUOTE = "<escape>"
START, END = "<start_function_call>", "<end_function_call>"


def argument(value: Any) -> str:
    """A value as the template writes it: strings quoted, keys bare and sorted."""
    if isinstance(value, str):
        return QUOTE + value + QUOTE
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{argument(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(argument(v) for v in value) + "]"
    return json.dumps(value)


def render(calls: Sequence[RenderedCall]) -> str:
    return "".join(f"{START}call:{name}{argument(dict(args))}{END}" for name, args in calls)


def syntax(context: CallContext) -> GemmaCall:
    return GemmaCall(context, context.marks[QUOTE], typed_strings=True)


FUNCTIONGEMMA = register(
    Format(
        name="functiongemma",
        call=(START, END),
        syntax=syntax,
        render=render,
        marks=(QUOTE,),
        # Values element by element (`grammar.gemma_values`): `<escape>` by id at token
        # level, as text otherwise (XGrammar's `gemma` style writes Gemma 4's quote).
        grammar=Shape(head="call:{name}", style="gemma", separator="", sort_keys=True, quote=QUOTE),
    )
)
