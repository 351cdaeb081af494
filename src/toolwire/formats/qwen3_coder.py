"""Qwen3-Coder / Qwen3.5: XML parameters inside `<tool_call>` tags, values as text.

Sample (Qwen3-Coder's chat template)::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

`<function=` and `<parameter=` are ordinary text; only `<tool_call>`/`</tool_call>`
are tokens. Values are typed by the declared schema (`days` is an integer: 3).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.tagged import TaggedParams, Tags

TAGS = Tags(
    name=("<function=", ">"),
    key=("<parameter=", ">"),
    value=("", "</parameter>"),
    end="</function>",
)


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


CALL = ("<tool_call>", "</tool_call>")


def render(calls: Sequence[RenderedCall], call: tuple[str, str] = CALL) -> str:
    """The calls as the template writes them, each between `call`'s delimiters."""
    blocks = []
    for name, args in calls:
        params = "".join(
            f"<parameter={key}>\n{_text(value)}\n</parameter>\n" for key, value in args.items()
        )
        blocks.append(f"{call[0]}\n<function={name}>\n{params}</function>\n{call[1]}")
    return "\n".join(blocks)


def syntax(context: CallContext) -> TaggedParams:
    return TaggedParams(context, TAGS)


QWEN3_CODER = register(
    Format(
        name="qwen3_coder",
        call=CALL,
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        grammar=Shape(head="\n<function={name}>", tail="</function>\n", style="qwen_xml"),
    )
)
