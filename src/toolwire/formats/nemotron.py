"""Nemotron (NVIDIA Nemotron Nano v2): a JSON list of calls between `<TOOLCALL>` tags.

Sample (the tool parser published with `nvidia/NVIDIA-Nemotron-Nano-9B-v2` on Hugging
Face, `nemotron_toolcall_parser_no_streaming.py`, in the form its vLLM adaptations
quote: "tool calls wrapped in <TOOLCALL> ... </TOOLCALL> with JSON array payloads";
Dynamo's default tool-call format)::

    <TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]</TOOLCALL>

Each item is one call (`syntax.json_calls`, the model's own argument bytes);
`</TOOLCALL>` ends the list (`syntax.end_marked`), as Hunyuan A13B's `<tool_calls>`
(both are `formats.json_list.JsonList`).
Reasoning is `<think>`...`</think>`. Where the tags are tokens of the served
vocabulary the format is gated; elsewhere it matches them as text and says so.
(Nemotron 3 writes Qwen3-Coder's XML calls instead: the `nemotron3` alias of
`qwen3_coder`.)
"""

from __future__ import annotations

from toolwire.formats import register
from toolwire.formats.json_list import JsonList
from toolwire.formats.spec import Format

LIST = JsonList("<TOOLCALL>", "</TOOLCALL>")

NEMOTRON = register(
    Format(
        name="nemotron",
        call=(LIST.start, None),
        syntax=LIST.syntax,
        render=LIST.render,
        reasoning=("<think>", "</think>"),
        marks=(LIST.end,),
        grammar=LIST.shape,
    ),
    aliases=("nemotron_json", "nemotron_nano_v2"),
)
