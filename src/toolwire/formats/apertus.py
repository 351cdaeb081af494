"""Apertus (Swiss AI, 2509): a JSON list of `{"NAME": {arguments}}` objects between tokens.

Sample (vLLM 0.33's parser docstring, `vllm/tool_parsers/apertus_tool_parser.py:59-60`;
SGLang 0.5.23's `sglang/srt/function_call/apertus2509_detector.py:22` writes the same
list, items "separated by ", "")::

    I will check. <|tools_prefix|>[{"get_weather": {"city": "Paris"}}]<|tools_suffix|>

Each item is one call whose one key is the tool's name and whose value is the model's
own argument bytes (`syntax.json_envelope`, keyed; `formats.json_list`);
`<|tools_suffix|>` ends the list, as Nemotron's `</TOOLCALL>`. Reasoning is
`<|inner_prefix|>`...`<|inner_suffix|>` (SGLang's `apertus2509` reasoning detector,
`sglang/srt/parser/reasoning_parser.py:1588`). That detector reads a call list inside
the reasoning block as calls (`_split_inner_reasoning`), so a call may begin inside
reasoning here too; it ends the reasoning (SGLang returns the thoughts after it as
reasoning again). All four are special tokens of the Apertus vocabulary (both peers
keep special tokens for their parsers), so the format is gated.
"""

from __future__ import annotations

from typing import Any

from toolwire.formats import register
from toolwire.formats.json_list import JsonList
from toolwire.formats.spec import Format
from toolwire.syntax.json_envelope import JsonEnvelope


class KeyedCall(JsonEnvelope):
    """`{"NAME": {arguments}}`."""

    keyed = True


def _keyed(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {name: args}


LIST = JsonList("<|tools_prefix|>", "<|tools_suffix|>", KeyedCall, _keyed, head='{"{name}": ')

APERTUS = register(
    Format(
        name="apertus",
        call=(LIST.start, None),
        syntax=LIST.syntax,
        render=LIST.render,
        reasoning=("<|inner_prefix|>", "<|inner_suffix|>"),
        calls_in_reasoning=True,
        marks=(LIST.end,),
        grammar=LIST.shape,
    ),
    aliases=("apertus2509",),
)
