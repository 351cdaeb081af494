"""DeepSeek V3.2: DSML, XML-like invocations whose tags hold the `｜DSML｜` token.

Sample (DeepSeek V3.2's chat template)::

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

`｜DSML｜` is one token (128825 in the V4 vocabulary); `<` and the tag names around
it are ordinary text, so every DSML tag is gated by that id. `string="true"` values
are text; `string="false"` values are JSON; without the attribute the declared
schema decides. An invoke outside the wrapper is provisional.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, Params, RenderedCall, Shape, value_text
from toolwire.syntax.tagged import TaggedParams, Tags

DSML = "｜DSML｜"
_ATTRIBUTES = re.compile(r'\s*([^"]*?)\s*"\s*string\s*=\s*"(true|false)\s*', re.S)


def attributes(text: str) -> tuple[str, str | None]:
    """`city" string="true` -> ("city", "string"); string="false" means JSON."""
    match = _ATTRIBUTES.fullmatch(text)
    if match is None:
        return text.strip().strip('"'), None
    return match[1], "string" if match[2] == "true" else "any"


def dsml_tags(tag: str = DSML) -> Tags:
    """The tagged syntax's tags of DSML parameters, `tag` being the word (and any space)
    that follows `<` in every tag."""
    return Tags(
        name=("", '">'),
        key=(f'<{tag}parameter name="', '">'),
        value=("", f"</{tag}parameter>"),
        end="",
        trim_newline=False,
        attributes=attributes,
    )


TAGS = dsml_tags()


def render_dsml(
    calls: Sequence[RenderedCall], wrapper: str, *, space: str = "", word: str = DSML
) -> str:
    """DSML calls in `wrapper`; `space` follows `｜DSML｜` (or `word`, GigaChat 3.5's
    `｜GCML｜`) in every tag (V4.1's)."""
    tag = word + space
    out = f"<{tag}{wrapper}>\n"
    for name, args in calls:
        out += f'<{tag}invoke name="{name}">\n'
        for key, value in args.items():
            text = value_text(value)
            kind = "true" if isinstance(value, str) else "false"
            out += f'<{tag}parameter name="{key}" string="{kind}">{text}</{tag}parameter>\n'
        out += f"</{tag}invoke>\n"
    return out + f"</{tag}{wrapper}>"


def render(calls: Sequence[RenderedCall]) -> str:
    return render_dsml(calls, "function_calls")


def syntax(context: CallContext) -> TaggedParams:
    return TaggedParams(context, TAGS.resolve(context.marks))


DEEPSEEK_V32 = register(
    Format(
        name="deepseek_v32",
        call=(f'<{DSML}invoke name="', f"</{DSML}invoke>"),
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        section=(f"<{DSML}function_calls>", f"</{DSML}function_calls>"),
        marks=(DSML,),
        grammar=Shape(
            head='{name}">\n',
            style="deepseek_xml",
            section_text=("\n", "\n"),
            params=Params(
                open=f'<{DSML}parameter name="{{key}}" string="{{string}}">',
                close=f"</{DSML}parameter>",
                after="\n",
            ),
        ),
    )
)
