"""Qwen3: hermes calls, with `<think>`...`</think>` reasoning first.

Sample (Qwen3's chat template, thinking on)::

    <think>
    The user wants the weather in Paris.
    </think>

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
    </tool_call>

`<think>` is 151667 and `</think>` 151668. With thinking off the template itself
writes an empty `<think>\\n\\n</think>\\n\\n`, so the output starts in content; pass
`in_reasoning=True` when a template pre-fills `<think>` and leaves it open.
"""

from __future__ import annotations

from dataclasses import replace

from toolwire.formats import register
from toolwire.formats.hermes import HERMES

# Calls may begin inside unclosed reasoning: writing `<tool_call>` before `</think>` is a
# known habit of Qwen3 models (vLLM's Qwen3 reasoning parser ends reasoning there).
QWEN3 = register(
    replace(HERMES, name="qwen3", reasoning=("<think>", "</think>"), calls_in_reasoning=True)
)
