"""Inkling: typed message blocks, every marker a special token; a call is a JSON block.

Sample (vLLM 0.33, `parser/inkling.py`'s docstring and terminals; one line in the
output, broken here; the first `<|message_model|>` is the prompt's)::

    <|content_thinking|>The user wants the weather.<|end_message|>
    <|message_model|><|content_text|>Checking.<|end_message|>
    <|message_model|><|content_invoke_tool_json|>
    {"name": "get_weather", "args": {"city": "Paris", "days": 3}}<|end_message|>

Blocks may come in any order and repeat. The prompt ends with `<|message_model|>`,
so the output starts at the first block's content-kind token. A thinking block is
reasoning, a text block content, a `content_invoke_tool_json` block one call whose
JSON names the tool (`name`) and holds its arguments (`args`; `arguments` and
`parameters` are read too). The model's own argument bytes are passed through.

`<|content_thinking|>`, `<|content_invoke_tool_json|>` and `<|end_message|>` are the
delimiters; `<|content_text|>` is listed as a further reasoning close (a text block
ends reasoning that was not closed; elsewhere it is consumed markup). The other
markers are special tokens and dropped: `<|message_model|>`, the raw and error tool
blocks' kinds (their text is content), and `<|content_model_end_sampling|>`, with
which sampling may end a block (the output ends there; a call it ends is a call when
its arguments are complete, as any call whose close is missing at the end). Text
between `<|message_model|>` and a block's kind (an optional function name the vLLM
parser discards) is content here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.json_envelope import JsonEnvelope

MESSAGE = "<|message_model|>"
THINKING = "<|content_thinking|>"
TEXT = "<|content_text|>"
INVOKE = "<|content_invoke_tool_json|>"
END = "<|end_message|>"


class InklingCall(JsonEnvelope):
    """`{"name": ..., "args": {...}}`."""

    argument_keys = ("args", "arguments", "parameters")


def render(calls: Sequence[RenderedCall]) -> str:
    """One block per call, `<|message_model|>` between blocks (the prompt writes the
    first block's)."""
    return MESSAGE.join(
        INVOKE + json.dumps({"name": name, "args": dict(args)}, ensure_ascii=False) + END
        for name, args in calls
    )


def render_text(reasoning: str | None, content: str | None) -> str:
    blocks = [] if reasoning is None else [f"{THINKING}{reasoning}{END}"]
    blocks += [] if content is None else [f"{TEXT}{content}{END}"]
    return MESSAGE.join(blocks)


def syntax(context: CallContext) -> InklingCall:
    return InklingCall(context)


INKLING = register(
    Format(
        name="inkling",
        call=(INVOKE, END),
        syntax=syntax,
        render=render,
        render_text=render_text,
        reasoning=(THINKING, END),
        more_reasoning=((THINKING, TEXT),),
        # Blocks: an invoke block begins a new message, ending a thinking one.
        calls_in_reasoning=True,
        # Calls follow each other without the `<|message_model|>` the model writes
        # between blocks (a dropped special token to the parser).
        grammar=Shape(
            head='{"name": "{name}", "args": ',
            tail="}",
            name="json",
            separator="",
            content=(TEXT, END),
        ),
    )
)
