"""Hunyuan V4 (Hy4): Hy3's tagged calls without `<tool_sep>` or line breaks.

Sample (Hy4's output, as checkpoints ship it with the `:opensource` suffix; vLLM's `hy_v4`
parser, `vllm/tool_parsers/hy_v4_tool_parser.py`, reads `<tool_call>NAME<arg_key>...`
and SGLang's `hunyuan` detector notes "Hy4 dropped <tool_sep> from its vocab entirely"
and writes no separator between adjacent calls)::

    <tool_calls><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call></tool_calls>

The name runs to the first `<arg_key>` (or the call's close); values are typed by
the declared schema. A suffixed vocabulary (`<tool_calls:opensource>`) is served by
`formats.hunyuan.resolve(vocabulary)`, which picks this format when the vocabulary
has argument tags and no `<tool_sep>`.
"""

from __future__ import annotations

from toolwire.formats import register
from toolwire.formats.hy_v3 import spelled

HY_V4 = register(spelled("", sep=False, name="hy_v4"), aliases=("hy4", "hunyuan_v4"))
