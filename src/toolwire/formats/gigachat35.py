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

from toolwire.formats import register
from toolwire.formats.deepseek_v4 import dsml_variant

GCML = "｜GCML｜"
GIGACHAT35 = register(
    dsml_variant(
        "gigachat35",
        word=GCML,
        reasoning=None,
        loose_calls=False,
        calls_in_reasoning=False,
        marks=(GCML,),
    )
)
