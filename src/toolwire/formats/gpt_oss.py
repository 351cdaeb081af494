"""gpt-oss (harmony): messages whose header routes the body by channel and recipient.

Sample (the gpt-oss chat template, `openai-gpt-oss-120b.jinja`; docs/formats.md)::

    <|channel|>analysis<|message|>The user wants the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json
    <|message|>{"city": "Paris", "days": 3}<|call|>

(one line in the output; the prompt ends with `<|start|>assistant`, so the first
header starts at `<|channel|>`). The analysis channel is reasoning, final is content,
and a recipient `to=functions.NAME` makes the body a call to NAME, whatever the
channel. The recipient may also stand before `<|channel|>` (the template writes
`<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>`), and
`<|constrain|>` comes with or without a space before it. Every delimiter is a special
token of o200k_harmony (`<|start|>` 200006, `<|channel|>` 200005, `<|message|>` 200008,
`<|constrain|>` 200003, `<|end|>` 200007, `<|call|>` 200012, `<|return|>` 200002).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, Header, HeaderShape, RenderedCall, Route
from toolwire.syntax.json_arguments import JsonArguments

_CHANNEL = re.compile(r"<\|channel\|>\s*([^\s<]+)")
_RECIPIENT = re.compile(r"(?:^|[\s>])to=([^\s<]+)")


def route(header: str) -> Route:
    """`<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json`."""
    recipient = _RECIPIENT.search(header)
    if recipient is not None and recipient.group(1) != "assistant":
        return Route("call", recipient.group(1).removeprefix("functions."))
    channel = _CHANNEL.search(header)
    if channel is not None and channel.group(1) == "analysis":
        return Route("reasoning")
    return Route("content")


def render(calls: Sequence[RenderedCall]) -> str:
    return "".join(
        f"<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json"
        f"<|message|>{json.dumps(dict(args), ensure_ascii=False)}<|call|>"
        for name, args in calls
    )


def render_text(reasoning: str | None, content: str | None) -> str:
    """Reasoning on the analysis channel, then content on the final channel; content
    alone is written bare, as the output of a prompt that ends by opening the final
    channel (`<|start|>assistant<|channel|>final<|message|>`)."""
    if reasoning is None:
        return content or ""
    out = f"<|channel|>analysis<|message|>{reasoning}<|end|>"
    if content is not None:
        out += f"<|start|>assistant<|channel|>final<|message|>{content}<|end|>"
    return out


def syntax(context: CallContext) -> JsonArguments:
    return JsonArguments(context)


GPT_OSS = register(
    Format(
        name="gpt_oss",
        call=("", "<|call|>"),
        syntax=syntax,
        render=render,
        render_text=render_text,
        header=Header(
            opens=("<|start|>", "<|channel|>"),
            close="<|message|>",
            ends=("<|end|>", "<|return|>"),
            marks=("<|constrain|>",),
            route=route,
        ),
        # A call is its own message: its header ends the analysis message before it.
        calls_in_reasoning=True,
        # The headers `route` reads, as XGrammar's built-in harmony template writes them.
        grammar=HeaderShape(
            start="<|start|>assistant",
            reasoning=("<|channel|>analysis<|message|>", "<|end|>"),
            content=("<|channel|>final<|message|>", ("<|end|>", "<|return|>")),
            calls=(
                "<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>",
                "<|channel|>commentary to=functions.{name}<|constrain|>json<|message|>",
            ),
            calls_after_start=(
                " to=functions.{name}<|channel|>commentary <|constrain|>json<|message|>",
                " to=functions.{name}<|channel|>commentary json<|message|>",
            ),
        ),
    )
)
