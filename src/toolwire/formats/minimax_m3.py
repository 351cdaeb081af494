"""MiniMax M3: M2's `<invoke>` calls with a namespace token before every tag, and
parameters as elements named after them.

Sample (vLLM 0.33, `parser/minimax_m3.py`'s docstring; NS is the token `]<]minimax[>[`,
written before every tag)::

    NS<tool_call>
    NS<invoke name="create_order">
    NS<user_id>42NS</user_id>
    NS<items>
    NS<item>NS<sku>book-001NS</sku>NS</item>
    NS</items>
    NS</invoke>
    NS</tool_call>

`]<]minimax[>[` is an added (not special) token, and each tag after it is ordinary
text: a delimiter here is that token and its tag, matched only where the token's
*id* stands, so the format is gated by that one token. An element holding elements
is an object, `<item>` children make an array (`syntax.elements`); text values are
typed by the declared schema. The call's end (NS`</invoke>`) is read by its body,
which ends itself there. Reasoning is `<mm:think>`...`</mm:think>` (vLLM's
`MiniMaxM3ReasoningParser`; SGLang's `MiniMaxM3Detector`). Where the vocabulary holds
them as tokens (vLLM's parser requires it; the derived test vocabulary adds them, not
special) they act only as ids, and a marker the model spells in pieces is text; in a
vocabulary without them they are matched as text where they act. With
`thinking_mode="enabled"` the prompt opens reasoning: pass `in_reasoning=True`.
Whitespace between the namespace token and `<` (which SGLang tolerates) is tolerated
inside a body; the section and invoke openers must be written whole. The name after
`name=` may be double-quoted (the template's form), single-quoted or unquoted
(`NS<invoke name=get_weather>`), as vLLM's M3 parser engine reads it
(`vllm/parser/minimax_m3.py:53-58`); SGLang's `minimax_m3.py:34` reads only the
double-quoted form.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.elements import ITEM, Elements

NS = "]<]minimax[>["
SECTION = (f"{NS}<tool_call>", f"{NS}</tool_call>")
INVOKE = f"{NS}<invoke name="
INVOKE_END = f"{NS}</invoke>"


def element(name: str, value: Any) -> str:
    """One element as the chat template writes it (lists as `<item>` children)."""
    if isinstance(value, dict):
        inner = "".join(element(k, v) for k, v in value.items())
    elif isinstance(value, list):
        inner = "".join(element(ITEM, v) for v in value)
    elif isinstance(value, str):
        inner = value
    else:
        inner = json.dumps(value, ensure_ascii=False)
    return f"{NS}<{name}>{inner}{NS}</{name}>"


def render(calls: Sequence[RenderedCall]) -> str:
    out = SECTION[0] + "\n"
    for name, args in calls:
        out += f'{INVOKE}"{name}">\n'
        out += "".join(element(key, value) + "\n" for key, value in args.items())
        out += INVOKE_END + "\n"
    return out + SECTION[1]


def syntax(context: CallContext) -> Elements:
    end = context.marks[INVOKE_END]
    return Elements(context, ns=end[: len(end) - len("</invoke>")], end=end)


MINIMAX_M3 = register(
    Format(
        name="minimax_m3",
        call=(INVOKE, None),  # the body ends itself at NS</invoke>
        syntax=syntax,
        render=render,
        reasoning=("<mm:think>", "</mm:think>"),
        section=SECTION,
        # The call's end, read by the body (its form gives the body the token's form).
        marks=(INVOKE_END,),
        calls_in_reasoning=True,  # as MiniMax M2 (vLLM's MiniMax parser engines)
        # Parameters as nested elements, each tag after the namespace token; the body
        # ends itself with the namespaced `</invoke>`.
        grammar=Shape(
            head='"{name}">\n',
            tail=INVOKE_END,
            style="elements",
            section_text=("\n", "\n"),
            namespace=NS,
        ),
    )
)
