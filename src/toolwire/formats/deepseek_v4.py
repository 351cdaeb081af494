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

from toolwire.formats import register
from toolwire.formats.deepseek_v32 import DEEPSEEK_V32, DSML, render_dsml
from toolwire.formats.spec import RenderedCall


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
