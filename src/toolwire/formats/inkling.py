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

A message is `<|message_model|>`, an optional header (the tool's name before a tool
block: SGLang's `inkling_detector.py` documents
`<|message_model|>name<|content_invoke_tool_json|>{...}<|end_message|>` and its
structural tag writes that header), the block's kind, the block. A header that is a
name is metadata; other text there (prose before a block) is content. The header is the
format's `Header`: `<|message_model|>` opens it, each block kind closes it and
`route` sends the block by its kind (thinking to reasoning, text and the raw and
error tool blocks to content, a JSON tool block to a call whose JSON names the
tool). The header is metadata, markup as vLLM's `parser/inkling.py` treats it (its
MESSAGE_HEADER state discards it); a header that ends without a block kind (at
`<|end_message|>`, a new message or the output's end) was text the model wrote,
content there as in vLLM (TEXT_CHUNK) and SGLang. The prompt ends with
`<|message_model|>`, so the output begins inside the first header
(`Header.initial`).

Blocks also open without a header (after `<|end_message|>`, or where a block's
content runs on): `<|content_thinking|>` opens reasoning, `<|content_invoke_tool_json|>`
a call and `<|end_message|>` closes either; `<|content_text|>` is listed as a
further reasoning close (a text block ends reasoning that was not closed; elsewhere
it is consumed markup). `<|content_model_end_sampling|>`, with which sampling may
end a block, is dropped (the output ends there; a call it ends is a call when its
arguments are complete, as any call whose close is missing at the end).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, Header, RenderedCall, Route, Shape
from toolwire.syntax.json_envelope import JsonEnvelope

MESSAGE = "<|message_model|>"
THINKING = "<|content_thinking|>"
TEXT = "<|content_text|>"
INVOKE = "<|content_invoke_tool_json|>"
INVOKE_TEXT = "<|content_invoke_tool_text|>"
TOOL_ERROR = "<|content_tool_error|>"
END = "<|end_message|>"
#: What closes a header: the block kinds.
KINDS = (THINKING, TEXT, INVOKE, INVOKE_TEXT, TOOL_ERROR)
#: A header that is metadata: a tool's name, or nothing.
_NAME = re.compile(r"\s*[\w.:-]*\s*")


class InklingCall(JsonEnvelope):
    """`{"name": ..., "args": {...}}`."""

    argument_keys = ("args", "arguments", "parameters")


def route(header: str) -> Route:
    """A message's header, its block kind last: where the block goes. A header that
    is a name (or nothing) is metadata; other text there is prose the model wrote."""
    kind = next(k for k in KINDS if header.endswith(k))
    text = header[: len(header) - len(kind)].removeprefix(MESSAGE)
    prose = "" if _NAME.fullmatch(text) else text
    if kind == THINKING:
        return Route("reasoning", content=prose)
    if kind == INVOKE:
        return Route("call", content=prose)  # the JSON names the tool
    return Route("content", content=prose)  # a text block, a raw or error tool block


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
        header=Header(
            opens=(MESSAGE,),
            close=KINDS,
            ends=(END,),
            route=route,
            initial=True,
            unclosed="content",
        ),
        # Blocks: an invoke block begins a new message, ending a thinking one.
        calls_in_reasoning=True,
        # Each call after the first is a message of its own, as `render` writes it.
        grammar=Shape(
            head='{"name": "{name}", "args": ',
            tail="}",
            name="json",
            separator=MESSAGE,
            content=(TEXT, END),
        ),
    )
)
