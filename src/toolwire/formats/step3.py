"""Step3: steptml `<steptml:invoke>` elements inside DeepSeek-style tool-call tokens.

Sample (SGLang 0.5.23's `sglang/srt/function_call/step3_detector.py`:55-60, its docstring's
"Format Structure"; vLLM 0.33's `step3` parser, `vllm/tool_parsers/step3_tool_parser.py`:40-44
and 259-300, reads the same tokens and requires the `function` type before the separator)::

    <｜tool_calls_begin｜>
    <｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_weather">
    <steptml:parameter name="city">Paris</steptml:parameter>
    <steptml:parameter name="days">3</steptml:parameter>
    </steptml:invoke><｜tool_call_end｜>
    <｜tool_calls_end｜>

The five `｜`-bracketed markers (fullwidth bars, ASCII underscores) are tokens, so the
format is gated; the steptml tags are text, read only by the call's own syntax
(`syntax.tagged`, as MiniMax M2's `<invoke>`): the type `function`, the separator,
then the invoke's name and its parameters. Values are text typed by the declared
schema (as vLLM's and SGLang's parsers type them). A call outside the section is
provisional. Reasoning is `<think>`...`</think>`; Step3's generation prompt opens it,
so pass `in_reasoning=True` with that prompt (vLLM's `step3` reasoning parser reads
everything before `</think>` as reasoning). Step 3.5 writes Qwen3-Coder's XML calls
instead: the `step3p5` alias of `qwen3_coder`.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, Params, RenderedCall, Shape, value_text
from toolwire.syntax.tagged import TaggedParams, Tags

SECTION = ("<｜tool_calls_begin｜>", "<｜tool_calls_end｜>")
CALL = ("<｜tool_call_begin｜>", "<｜tool_call_end｜>")
SEP = "<｜tool_sep｜>"
TAGS = Tags(
    name=(f'function{SEP}<steptml:invoke name="', '">'),
    key=('<steptml:parameter name="', '">'),
    value=("", "</steptml:parameter>"),
    end="</steptml:invoke>",
    trim_newline=False,
)


def render(calls: Sequence[RenderedCall]) -> str:
    out = SECTION[0] + "\n"
    for name, args in calls:
        out += f'{CALL[0]}function{SEP}<steptml:invoke name="{name}">\n'
        for key, value in args.items():
            text = value_text(value)
            out += f'<steptml:parameter name="{key}">{text}</steptml:parameter>\n'
        out += f"</steptml:invoke>{CALL[1]}\n"
    return out + SECTION[1]


def syntax(context: CallContext) -> TaggedParams:
    return TaggedParams(context, TAGS.resolve(context.marks))


STEP3 = register(
    Format(
        name="step3",
        call=CALL,
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        section=SECTION,
        marks=(SEP,),
        grammar=Shape(
            head=f'function{SEP}<steptml:invoke name="{{name}}">\n',
            tail="</steptml:invoke>",
            style="params",
            section_text=("\n", "\n"),
            params=Params(
                open='<steptml:parameter name="{key}">',
                close="</steptml:parameter>",
                after="\n",
            ),
        ),
    ),
)
