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

from toolwire.formats import register
from toolwire.formats.deepseek_v4 import dsml_variant

DEEPSEEK_V41 = register(dsml_variant("deepseek_v41", space=" ", wrapper="calls"))
