"""Kimi K2: `functions.NAME:IDX` heads, then the model's own JSON arguments.

Sample (Kimi K2's chat template, `render_toolcalls`; one line, broken here)::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Paris", "days": 3}<|tool_call_end|>
    <|tool_calls_section_end|>

Ids (Kimi's tokenizer_config.json): 163595 section-begin, 163596 section-end, 163597
call-begin, 163598 argument-begin, 163599 call-end, `<think>` 163606, `</think>`
163607. The head is the call's id (IDX counts calls across the conversation) and
NAME its name. Kimi's vision and k1.5 models write reasoning as `◁think▷`...
`◁/think▷` instead. A call outside the section is provisional.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, Reject, RenderedCall, Shape
from toolwire.syntax.named_json import NamedJson

SECTION = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>")
CALL = ("<|tool_call_begin|>", "<|tool_call_end|>")
ARGUMENTS = "<|tool_call_argument_begin|>"


def render(calls: Sequence[RenderedCall]) -> str:
    blocks = [
        f"{CALL[0]}functions.{name}:{index}{ARGUMENTS}"
        f"{json.dumps(dict(args), ensure_ascii=False)}{CALL[1]}"
        for index, (name, args) in enumerate(calls)
    ]
    return SECTION[0] + "".join(blocks) + SECTION[1]


def head(text: str) -> tuple[str, str | None]:
    """`functions.get_weather:0` -> ("get_weather", "functions.get_weather:0")."""
    call_id = text.strip()
    name = call_id.removeprefix("functions.")
    base, colon, index = name.rpartition(":")
    if colon and index.isdigit():
        name = base
    if not name or any(c.isspace() for c in name):
        raise Reject("expected 'functions.NAME:IDX' before the arguments")
    return name, call_id


def syntax(context: CallContext) -> NamedJson:
    return NamedJson(context, head_end=context.marks[ARGUMENTS], head=head)


KIMI_K2 = register(
    Format(
        name="kimi_k2",
        call=CALL,
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        more_reasoning=(("◁think▷", "◁/think▷"),),
        section=SECTION,
        marks=(ARGUMENTS,),
        # Kimi K2 writes its tool section without closing `<think>` (vLLM's K2 and K2.5
        # reasoning parsers end reasoning at the section and call tokens).
        calls_in_reasoning=True,
        grammar=Shape(head=f"functions.{{name}}:{{index}}{ARGUMENTS}", separator=""),
    )
)
