"""Gemma 4: `call:NAME{...}` with unquoted keys and `<|"|>`-delimited strings.

Sample (Gemma 4's chat template; docs/formats.md; the call is broken here after `<channel|>`)::

    <|channel>thought
    The user wants the weather.<channel|>
    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>

`<|tool_call>`, `<tool_call|>`, `<|"|>`, `<|channel>` and `<channel|>` are tokens.
`<|"|>` delimits every string at any depth and is kept (never dropped as a special
token). Arguments are converted to JSON incrementally (`syntax.gemma`). Parallel
calls follow each other directly. Reasoning is the thought channel.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.gemma import GemmaCall

QUOTE = '<|"|>'
REASONING = ("<|channel>thought", "<channel|>")


def argument(value: Any) -> str:
    """A value as the template's `format_argument` writes it (keys unquoted)."""
    if isinstance(value, str):
        return QUOTE + value + QUOTE
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{argument(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(argument(v) for v in value) + "]"
    return json.dumps(value)


def render(calls: Sequence[RenderedCall]) -> str:
    return "".join(
        f"<|tool_call>call:{name}{argument(dict(args))}<tool_call|>" for name, args in calls
    )


def render_text(reasoning: str | None, content: str | None) -> str:
    thought = f"{REASONING[0]}\n{reasoning}{REASONING[1]}" if reasoning is not None else ""
    return thought + (content or "")


def syntax(context: CallContext) -> GemmaCall:
    return GemmaCall(context, context.marks[QUOTE])


GEMMA4 = register(
    Format(
        name="gemma4",
        call=("<|tool_call>", "<tool_call|>"),
        syntax=syntax,
        render=render,
        reasoning=REASONING,
        marks=(QUOTE,),
        render_text=render_text,
        # A call may follow the thought channel without its close (vLLM's Gemma 4
        # parser engine: a tool call directly from reasoning).
        calls_in_reasoning=True,
        # Token level: values element by element (`grammar.gemma_values`), so `<|"|>` is
        # its id; text level: XGrammar's `gemma` style.
        grammar=Shape(head="call:{name}", style="gemma", separator="", sort_keys=True),
    )
)
