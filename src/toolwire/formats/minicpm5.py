"""MiniCPM (MiniCPM-4/5): `<function name="...">` elements with `<param name="...">` values.

Sample (SGLang 0.5.23's `minicpm5` detector,
`sglang/srt/function_call/minicpm5_detector.py:60-63`, "Expected format example
(multiple calls allowed)"; vLLM 0.33's `minicpm5` parser,
`vllm/tool_parsers/minicpm5xml_tool_parser.py:44-49`, reads the same tags)::

    <function name="get_weather"><param name="city">北京</param><param name="date">2024-06-27</param></function>

Each call is one element; its parameters are `<param>` elements whose text is typed
by the declared schema (`syntax.tagged`, as MiniMax M2's `<parameter>` values), and
`</function>` ends the body. None of these tags is a token (both peers match the
text `<function`), so the format is text-gated (`Parser.gated` False) and, like
`phi4_mini`, line-anchored: a call may begin only where a line begins (the output's
start, after a newline, or right after a call), so a `<function name=` quoted
mid-sentence is content (the peers read it anywhere). A line that only begins like
it, or an element that is not a complete call (its `</function>` included), is
released as content (`syntax.word_calls`). Reasoning is `<think>`...`</think>`
(vLLM's parser keeps only the text after `</think>`). Not read here: a value wrapped
in `<![CDATA[...]]>` keeps the wrapper as text (both peers strip it), and vLLM's
repairs of collapsed tags (`<functionname=`).
"""  # noqa: E501 (the sample is one line, as the detector writes it)

from __future__ import annotations

from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import (
    Anchor,
    AnchoredShape,
    CallContext,
    Format,
    Params,
    Reject,
    RenderedCall,
    value_text,
)
from toolwire.syntax.tagged import TaggedParams, Tags
from toolwire.syntax.word_calls import WordCall

WORD = '<function name="'
TAGS = Tags(
    name=("", '">'),
    key=('<param name="', '">'),
    value=("", "</param>"),
    end="</function>",
    trim_newline=False,
)


def render(calls: Sequence[RenderedCall]) -> str:
    out = []
    for name, args in calls:
        params = "".join(
            f'<param name="{key}">' + value_text(value) + "</param>" for key, value in args.items()
        )
        out.append(f'{WORD}{name}">{params}</function>')
    return "\n".join(out)


class _Element(TaggedParams):
    """The tagged body, complete only with its `</function>` (as both peers read it)."""

    def close(self) -> None:
        if not self.done:
            raise Reject("the call does not end with </function>")
        super().close()


def _body(context: CallContext) -> TaggedParams:
    return _Element(context, TAGS, self_ending=True)


def syntax(context: CallContext) -> WordCall:
    return WordCall(context, WORD, _body)


MINICPM5 = register(
    Format(
        name="minicpm5",
        call=("", None),
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        anchor=Anchor(begins=WORD[0], word=WORD),
        grammar=AnchoredShape(
            "params",
            WORD + '{name}">',
            "</function>",
            separator="\n",
            params=Params(open='<param name="{key}">', close="</param>"),
        ),
    ),
    aliases=("minicpm", "minicpm4"),
)
