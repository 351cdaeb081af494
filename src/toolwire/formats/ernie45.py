"""ERNIE 4.5 (Baidu): Hermes' JSON calls between `<tool_call>` tags, after `</think>`.

Sample (vLLM 0.33's `ernie45` parser, `vllm/tool_parsers/ernie45_tool_parser.py:33`,
"abc\\n</think>\\n\\n\\n<tool_call>\\ndef\\n</tool_call>\\n", whose regex at :48 reads
`<tool_call>\\s*(?P<json>\\{.*?\\})\\s*</tool_call>` as a `{"name", "arguments"}`
object; its reasoning parser, `vllm/reasoning/ernie45_reasoning_parser.py:21`, the
answer form "abc\\n</think>\\n\\n<response>\\ndef\\n</response>\\n")::

    The user wants the weather.
    </think>


    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
    </tool_call>

The body is Hermes' (`syntax.json_envelope`); parallel calls are consecutive blocks.
Reasoning is `<think>`...`</think>`; ERNIE 4.5 Thinking's template pre-fills `<think>`
(vLLM's ERNIE parsers treat all text before `</think>` as reasoning), so pass
`in_reasoning=True` where the prompt ends with it, as for Qwen3. Calls follow the
reasoning (the parser's own sample): a `<tool_call>` inside unclosed reasoning is
reasoning text. The answer may be wrapped in `<response>`...`</response>`, special
tokens that are dropped (the text between them is the content). No ERNIE vocabulary
is available offline; where `<tool_call>` is a token of the served vocabulary (vLLM
looks all six markers up by id) the format is gated, elsewhere it matches the tags as
text and says so.
"""

from __future__ import annotations

from dataclasses import replace

from toolwire.formats import register
from toolwire.formats.hermes import HERMES

ERNIE45 = register(
    replace(
        HERMES,
        name="ernie45",
        reasoning=("<think>", "</think>"),
        # ERNIE 4.5's turns (`User: `/`Assistant: ` after `<|begin_of_sentence|>`), not
        # ChatML: tells its templates from Hermes' and Qwen's (detection only).
        template_markers=("<|begin_of_sentence|>",),
    )
)
