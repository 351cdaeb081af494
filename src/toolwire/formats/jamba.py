"""Jamba (AI21 Jamba 1.5 / 1.6 / 1.7): a JSON list of calls between `<tool_calls>` tokens.

Sample (vLLM 0.33's `jamba` parser, `vllm/tool_parsers/jamba_tool_parser.py:48-53`:
`<tool_calls>(.*?)</tool_calls>` read as a JSON list whose items are
`{"name", "arguments"}` objects, lines 96-108)::

    <tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]</tool_calls>

Each item is one call (`formats.json_list`: the model's own argument bytes);
`</tool_calls>` ends the list: Hunyuan A13B's calls, without its `<think>` reasoning
and `<answer>` markers (Jamba writes neither). Both tags are tokens of the Jamba
vocabulary (vLLM's parser looks their ids up and keeps special tokens for them), so
the format is gated. No reasoning.
"""

from __future__ import annotations

from toolwire.formats import register
from toolwire.formats.json_list import JsonList
from toolwire.formats.spec import Format

LIST = JsonList("<tool_calls>", "</tool_calls>")

JAMBA = register(
    Format(
        name="jamba",
        call=(LIST.start, None),
        syntax=LIST.syntax,
        render=LIST.render,
        marks=(LIST.end,),
        grammar=LIST.shape,
    )
)
