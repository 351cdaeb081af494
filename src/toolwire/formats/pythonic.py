"""Pythonic tool calls (Llama 3.2 and 4, ToolACE): a Python list of calls.

Sample (the Llama 3.2 tool prompt "[func_name1(params_name1=params_value1, ...),
func_name2(params)]", as vLLM's pythonic parser reads it; docs/formats.md)::

    [get_weather(city="Paris", days=3), get_time()]

Arguments are Python literals, converted to JSON and typed by the declared schema
(`syntax.pythonic`). No delimiter is a token, so this format is the text-gated
fallback (`Parser.gated` is False): a list of calls may begin only where a line
begins (the output's start, after a newline, or right after a call), with `[`; a
bracket anywhere else is content, and a list that is not calls is released as content.
Llama 4's `<|python_start|>`...`<|python_end|>` wrapper is the `llama4` format's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolwire.formats import register
from toolwire.formats.spec import Anchor, AnchoredShape, CallContext, Format, RenderedCall
from toolwire.syntax.pythonic import PythonicCall


def literal(value: Any) -> str:
    """A JSON value as Python literal source (JSON string escapes are valid Python)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def render(calls: Sequence[RenderedCall]) -> str:
    return (
        "["
        + ", ".join(
            f"{name}(" + ", ".join(f"{k}={literal(v)}" for k, v in args.items()) + ")"
            for name, args in calls
        )
        + "]"
    )


def syntax(context: CallContext) -> PythonicCall:
    return PythonicCall(context)


PYTHONIC = register(
    Format(
        name="pythonic",
        call=("", None),
        syntax=syntax,
        render=render,
        anchor=Anchor(begins="["),
        grammar=AnchoredShape("pythonic"),
    )
)
