"""Cohere Command A (and Command A Reasoning): a JSON list of actions.

Sample (SGLang's `cohere_command4` detector: `<|START_ACTION|>[...JSON array...]
<|END_ACTION|>`, items `{tool_call_id, tool_name, parameters}`; the layout is the
Command A chat template's, one item per line)::

    <|START_ACTION|>[
        {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}
    ]<|END_ACTION|>

Each item is one call (`syntax.json_calls` with Command's keys; the arguments are the
model's own `parameters` bytes); `<|END_ACTION|>` ends the list
(`syntax.end_marked`). `tool_call_id` is read and not used as the call's id (as
SGLang's detector does: the server numbers calls itself). Reasoning is
`<|START_THINKING|>`...`<|END_THINKING|>`; Command A Reasoning's template writes
`<|START_THINKING|>` in the prompt when reasoning is on (pass `in_reasoning=True`).
Content stands in `<|START_RESPONSE|>`...`<|END_RESPONSE|>` (Command A) or
`<|START_TEXT|>`...`<|END_TEXT|>` (Command A Reasoning, as vLLM's `cohere_command`
parser lists them): special tokens, so they are dropped and the text between them is
the content. Every marker is a special token of the Command A vocabulary, so the
format is gated. Command R/R+'s older `Action: ```json [...]```` form is not this
format.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.end_marked import EndMarked
from toolwire.syntax.json_calls import JsonCall
from toolwire.syntax.json_envelope import JsonEnvelope

START, END = "<|START_ACTION|>", "<|END_ACTION|>"


class Action(JsonEnvelope):
    """`{"tool_call_id": "0", "tool_name": NAME, "parameters": {...}}`."""

    name_keys = ("tool_name",)
    argument_keys = ("parameters",)


def render(calls: Sequence[RenderedCall]) -> str:
    items = [
        json.dumps(
            {"tool_call_id": str(n), "tool_name": name, "parameters": dict(args)},
            ensure_ascii=False,
        )
        for n, (name, args) in enumerate(calls)
    ]
    return START + "[\n    " + ",\n    ".join(items) + "\n]" + END


def _item(context: CallContext) -> JsonCall:
    return JsonCall(context, separator=",", envelope=Action)


def syntax(context: CallContext) -> EndMarked:
    return EndMarked(context, _item, END)


COMMAND = register(
    Format(
        name="command",
        call=(START, None),
        syntax=syntax,
        render=render,
        reasoning=("<|START_THINKING|>", "<|END_THINKING|>"),
        marks=(END,),
        grammar=Shape(
            head='{"tool_call_id": "{index}", "tool_name": "{name}", "parameters": ',
            tail="}",
            name="json",
            items=("[\n    ", "\n]"),
            separator=",\n    ",
            list_end=END,
        ),
    )
)
