"""DeepSeek V4: DSML as in V3.2, wrapped in `<｜DSML｜tool_calls>`.

Sample (docs/formats.md; XGrammar's built-in template accepts it)::

    <｜DSML｜tool_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜tool_calls>

Models sometimes omit the wrapper. An invoke found outside it is provisional: held
(even when streaming) and committed only once closed and naming a declared tool;
otherwise every held character is released as content.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from toolwire.formats import register
from toolwire.formats.deepseek_v32 import DEEPSEEK_V32, DSML, dsml_tags, render_dsml
from toolwire.formats.spec import CallContext, Format, Params, RenderedCall, Shape
from toolwire.syntax.tagged import TaggedParams


def render(calls: Sequence[RenderedCall]) -> str:
    return render_dsml(calls, "tool_calls")


DEEPSEEK_V4 = register(
    replace(
        DEEPSEEK_V32,
        name="deepseek_v4",
        render=render,
        section=(f"<{DSML}tool_calls>", f"</{DSML}tool_calls>"),
        # The DSML block ends reasoning (vLLM's deepseek_v4 parser engine).
        calls_in_reasoning=True,
    )
)


def dsml_variant(
    name: str, *, word: str = DSML, space: str = "", wrapper: str = "tool_calls", **fields: Any
) -> Format:
    """V4's wire form with another tag word (`word`, GigaChat 3.5's `｜GCML｜`), `space`
    after it in every tag (V4.1's) and another wrapper name: the calls, the section,
    the tagged syntax, the renderer and the grammar's parameters follow together.
    `fields` replace any other field of the format (its reasoning, marks...)."""
    tag = word + space
    tags = dsml_tags(tag)

    def render(calls: Sequence[RenderedCall]) -> str:
        return render_dsml(calls, wrapper, space=space, word=word)

    def syntax(context: CallContext) -> TaggedParams:
        return TaggedParams(context, tags.resolve(context.marks))

    assert isinstance(DEEPSEEK_V4.grammar, Shape)
    params = Params(
        open=f'<{tag}parameter name="{{key}}" string="{{string}}">',
        close=f"</{tag}parameter>",
        after="\n",
    )
    return replace(
        DEEPSEEK_V4,
        name=name,
        call=(f'<{tag}invoke name="', f"</{tag}invoke>"),
        section=(f"<{tag}{wrapper}>", f"</{tag}{wrapper}>"),
        syntax=syntax,
        render=render,
        grammar=replace(DEEPSEEK_V4.grammar, params=params),
        **fields,
    )
