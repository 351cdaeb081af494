"""Granite 3.1: Granite 3's JSON list of calls after the text `<tool_call>`, at a line start.

Sample (vLLM 0.33's `granite` parser, `vllm/parser/granite.py:7-10`, served as
`--tool-call-parser granite` by `vllm/tool_parsers/granite_engine_tool_parser.py`: "Granite
3.0/3.1 emit tool calls as a JSON array following a marker", `<|tool_call|>` for 3.0,
"``<tool_call>`` is plain text" for 3.1)::

    <tool_call> [{"name": "get_weather", "arguments": {"city": "SF"}}]

The list is the `granite` format's (`syntax.json_calls`, one body per item, no closing
delimiter: its `]` ends it); only the opener differs, and it is text: Granite 3's
vocabulary holds `<|tool_call|>` as a token but no `<tool_call>`, so this variant is
text-gated (`Parser.gated` False) and, like `phi4_mini`, line-anchored: a list may
begin only where a line begins (the output's start, after a newline, or right after a
call), so a `<tool_call>` quoted mid-sentence is content (vLLM's parser matches the
text anywhere). A line that only begins like it, or a list that is not calls, is
released as content (`syntax.word_calls`). It is a format of its own, not data on
`granite`, because a format has one opener and the two are told apart by gating: the
token opener is acted on only as its id, the text one only at a line start.
"""

from __future__ import annotations

from toolwire.formats import register
from toolwire.formats.json_list import word_list

WORD = "<tool_call>"
GRANITE31 = register(word_list("granite31", WORD, WORD + "["))
