"""GLM-4.7 / GLM-5: GLM-4.5's calls without the newlines between their parts.

Sample (GLM-4.7-Flash's chat template)::

    <tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>

The template's generation prompt ends in `<think>` when thinking is on (the
default): pass `in_reasoning=True` then, since the output starts inside reasoning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from toolwire.formats import register
from toolwire.formats.glm45 import GLM45, render_glm
from toolwire.formats.spec import Params, RenderedCall, Shape


def render(calls: Sequence[RenderedCall]) -> str:
    return render_glm(calls, "")


GLM47 = register(
    replace(
        GLM45,
        name="glm47",
        render=render,
        grammar=Shape(
            head="{name}",
            style="glm_xml",
            separator="",
            params=Params(open="<arg_key>{key}</arg_key><arg_value>", close="</arg_value>"),
        ),
    )
)
