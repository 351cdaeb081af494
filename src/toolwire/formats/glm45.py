"""GLM-4.5 / 4.6: the name, then `<arg_key>`/`<arg_value>` pairs, one per line.

Sample (GLM-4.6's chat template)::

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>

`<tool_call>`, `</tool_call>` and the four argument tags are tokens of GLM's
vocabulary. Values are text: a string-typed parameter stays a string, others are
JSON by the declared schema. Reasoning is `<think>`...`</think>`, written by the
model after the template's `<|assistant|>`.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, Params, RenderedCall, Shape, value_text
from toolwire.syntax.tagged import TaggedParams, Tags

KEY = ("<arg_key>", "</arg_key>")
VALUE = ("<arg_value>", "</arg_value>")
TAGS = Tags(name=("", ""), key=KEY, value=VALUE, end="", trim_newline=False)


def render_glm(calls: Sequence[RenderedCall], newline: str) -> str:
    blocks = []
    for name, args in calls:
        params = "".join(
            f"{newline}{KEY[0]}{key}{KEY[1]}{newline}{VALUE[0]}{value_text(value)}{VALUE[1]}"
            for key, value in args.items()
        )
        blocks.append(f"<tool_call>{name}{params}{newline}</tool_call>")
    return newline.join(blocks)


def render(calls: Sequence[RenderedCall]) -> str:
    return render_glm(calls, "\n")


def syntax(context: CallContext) -> TaggedParams:
    return TaggedParams(context, TAGS.resolve(context.marks))


GLM45 = register(
    Format(
        name="glm45",
        call=("<tool_call>", "</tool_call>"),
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        marks=(*KEY, *VALUE),
        grammar=Shape(
            head="{name}",
            tail="\n",
            style="glm_xml",
            params=Params(open="\n<arg_key>{key}</arg_key>\n<arg_value>", close="</arg_value>"),
        ),
    )
)
