"""GigaChat 3.5: DeepSeek V4's DSML calls with `｜GCML｜` in every tag.

Sample (SGLang 0.5.23's `gigachat35` detector,
`sglang/srt/function_call/gigachat35_detector.py`:16-30, its wrapper, invoke and
parameter patterns: `string="true"` values are text, `string="false"` values JSON)::

    <｜GCML｜tool_calls>
    <｜GCML｜invoke name="get_weather">
    <｜GCML｜parameter name="city" string="true">Paris</｜GCML｜parameter>
    <｜GCML｜parameter name="days" string="false">3</｜GCML｜parameter>
    </｜GCML｜invoke>
    </｜GCML｜tool_calls>

The tags are DeepSeek V4's (`deepseek_v4`, read by the same tagged syntax) with
GigaChat's word, so this is a variant of the family's wire form, not an alias of
`gigachat3`. SGLang reads invokes only inside the wrapper, and so does this format
(`loose_calls` False). `｜GCML｜` is taken to be one token, as `｜DSML｜` is in
DeepSeek's vocabulary (no GigaChat 3.5 vocabulary is available offline to check);
where the served vocabulary lacks it the tags are matched as text. The turn ends
with GigaChat's `</s>`; the detector names no reasoning delimiters, and vLLM 0.33
has no GigaChat 3.5 parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from toolwire.formats import register
from toolwire.formats.deepseek_v4 import DEEPSEEK_V4
from toolwire.formats.deepseek_v32 import attributes, render_dsml
from toolwire.formats.spec import CallContext, Params, RenderedCall, Shape
from toolwire.syntax.tagged import TaggedParams, Tags

GCML = "｜GCML｜"
TAGS = Tags(
    name=("", '">'),
    key=(f'<{GCML}parameter name="', '">'),
    value=("", f"</{GCML}parameter>"),
    end="",
    trim_newline=False,
    attributes=attributes,
)


def render(calls: Sequence[RenderedCall]) -> str:
    return render_dsml(calls, "tool_calls", word=GCML)


def syntax(context: CallContext) -> TaggedParams:
    return TaggedParams(context, TAGS.resolve(context.marks))


assert isinstance(DEEPSEEK_V4.grammar, Shape)
GIGACHAT35 = register(
    replace(
        DEEPSEEK_V4,
        name="gigachat35",
        call=(f'<{GCML}invoke name="', f"</{GCML}invoke>"),
        syntax=syntax,
        render=render,
        reasoning=None,
        section=(f"<{GCML}tool_calls>", f"</{GCML}tool_calls>"),
        loose_calls=False,
        calls_in_reasoning=False,
        marks=(GCML,),
        grammar=replace(
            DEEPSEEK_V4.grammar,
            params=Params(
                open=f'<{GCML}parameter name="{{key}}" string="{{string}}">',
                close=f"</{GCML}parameter>",
                after="\n",
            ),
        ),
    ),
)
