"""Phi-4-mini: a JSON list of calls after the word `functools`, at a line start.

Sample (vLLM 0.33's `phi4_mini_json` parser, `vllm/tool_parsers/phi4mini_tool_parser.py`:
bot token "functools", pattern `functools\\[(.*?)\\]`, the list's items read as
`{"name", "arguments"}` objects, `parameters` accepted too)::

    functools[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]

`functools` is ordinary text in Phi-4-mini's vocabulary (no added token), so this
format is text-gated (`Parser.gated` False) and, like `llama3_json` and `pythonic`,
line-anchored (`Format.anchor`): a list may begin only where a line begins (the
output's start, after a newline, or right after a call), so `functools[...]` quoted
mid-sentence is content. A line that begins with `f` opens a body; the body's syntax
reads the word `functools[` first, and a line that only begins like it (`for ...`)
is released as content, as is a list that is not calls (`syntax.word_calls`). Each
item is one call (`syntax.json_calls`, the model's own argument bytes); the list ends
at its `]`.
"""

from __future__ import annotations

from toolwire.formats import register
from toolwire.formats.json_list import word_list

WORD = "functools["
PHI4_MINI = register(word_list("phi4_mini", WORD, WORD), aliases=("phi4_mini_json",))
