"""DeepSeek V4.1: V4's DSML with a space after `｜DSML｜` in every tag, in `calls`.

Sample (vLLM 0.33's `vllm/parser/deepseek_v41.py` terminals; SGLang's
`sglang/srt/function_call/deepseekv41_detector.py`: "The leading space in each tag name
below is intentional, not a typo")::

    <｜DSML｜ calls>
    <｜DSML｜ invoke name="get_weather">
    <｜DSML｜ parameter name="city" string="true">Paris</｜DSML｜ parameter>
    <｜DSML｜ parameter name="days" string="false">3</｜DSML｜ parameter>
    </｜DSML｜ invoke>
    </｜DSML｜ calls>

`｜DSML｜` is one token (the space after it is text), so every tag is gated by that
id as in V3.2/V4; values and attributes are read as there. An invoke outside the
wrapper is provisional; the DSML block ends reasoning (as V4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from toolwire.formats import register
from toolwire.formats.deepseek_v4 import DEEPSEEK_V4
from toolwire.formats.deepseek_v32 import DSML, attributes, render_dsml
from toolwire.formats.spec import CallContext, Params, RenderedCall, Shape
from toolwire.syntax.tagged import TaggedParams, Tags

TAGS = Tags(
    name=("", '">'),
    key=(f'<{DSML} parameter name="', '">'),
    value=("", f"</{DSML} parameter>"),
    end="",
    trim_newline=False,
    attributes=attributes,
)


def render(calls: Sequence[RenderedCall]) -> str:
    return render_dsml(calls, "calls", space=" ")


def syntax(context: CallContext) -> TaggedParams:
    return TaggedParams(context, TAGS.resolve(context.marks))


assert isinstance(DEEPSEEK_V4.grammar, Shape)
DEEPSEEK_V41 = register(
    replace(
        DEEPSEEK_V4,
        name="deepseek_v41",
        call=(f'<{DSML} invoke name="', f"</{DSML} invoke>"),
        syntax=syntax,
        render=render,
        section=(f"<{DSML} calls>", f"</{DSML} calls>"),
        grammar=replace(
            DEEPSEEK_V4.grammar,
            params=Params(
                open=f'<{DSML} parameter name="{{key}}" string="{{string}}">',
                close=f"</{DSML} parameter>",
                after="\n",
            ),
        ),
    )
)
