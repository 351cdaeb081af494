"""DeepSeek V3.1: the name, the separator, then the arguments as plain JSON.

Sample (DeepSeek V3.1's chat template; one line, broken here after the separator)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>
    {"city": "Paris", "days": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>

No `function` type and no code fence; calls follow each other directly. The same
delimiter ids as V3. Thinking mode opens `<think>` in the prompt (pass
`in_reasoning=True`); otherwise the template writes `<think></think>` itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from toolwire.formats import register
from toolwire.formats.deepseek_v3 import CALL, CALLS, DEEPSEEK_V3, SEP
from toolwire.formats.spec import CallContext, Reject, RenderedCall, Shape
from toolwire.syntax.named_json import NamedJson


def render(calls: Sequence[RenderedCall]) -> str:
    blocks = [
        f"{CALL[0]}{name}{SEP}{json.dumps(dict(args), ensure_ascii=False)}{CALL[1]}"
        for name, args in calls
    ]
    return CALLS[0] + "".join(blocks) + CALLS[1]


def head(text: str) -> tuple[str, str | None]:
    name = text.strip()
    if not name:
        raise Reject("the call names no tool")
    return name, None


def syntax(context: CallContext) -> NamedJson:
    return NamedJson(context, head_end=context.marks[SEP], head=head)


DEEPSEEK_V31 = register(
    replace(
        DEEPSEEK_V3,
        name="deepseek_v31",
        syntax=syntax,
        render=render,
        grammar=Shape(head=f"{{name}}{SEP}", separator=""),
    )
)
