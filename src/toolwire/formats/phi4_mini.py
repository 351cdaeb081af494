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
is released as content, as is a list that is not calls. Each item is one call
(`syntax.json_calls`, the model's own argument bytes); the list ends at its `]`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import Anchor, AnchoredShape, CallContext, Format, RenderedCall
from toolwire.syntax.json_calls import JsonCall
from toolwire.syntax.protocol import Reject

WORD = "functools["


class Phi4Call:
    """`functools[` then a JSON call object (`JsonCall`); a body that follows a call
    in the same list (after its `,`) begins at the object, without the word."""

    def __init__(self, context: CallContext) -> None:
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self.follows = False
        self._inner = JsonCall(context, separator=",")
        self._matched = 0  # characters of WORD read; -1: the body is a list's next item
        self._error = ""

    def feed(self, text: str) -> int:
        i = 0
        if self._matched == 0 and text and text[0] != WORD[0]:
            self._matched = -1
        while 0 <= self._matched < len(WORD) and i < len(text):
            if text[i] != WORD[self._matched]:
                self._error = f"the call list does not begin with {WORD!r}"
                self.done = True
                return i
            self._matched += 1
            i += 1
            if self._matched == len(WORD):
                self._inner.feed("[")
        if 0 <= self._matched < len(WORD):
            return i
        used = i + self._inner.feed(text[i:])
        self.name, self.done, self.follows = self._inner.name, self._inner.done, self._inner.follows
        return used

    def arguments(self) -> str:
        return self._inner.arguments()

    def close(self) -> None:
        if self._error:
            raise Reject(self._error)
        if 0 <= self._matched < len(WORD):
            raise Reject(f"the body ended inside {WORD!r}")
        self._inner.close()


def render(calls: Sequence[RenderedCall]) -> str:
    items = [
        json.dumps({"name": name, "arguments": dict(args)}, ensure_ascii=False)
        for name, args in calls
    ]
    return WORD + ", ".join(items) + "]"


def syntax(context: CallContext) -> Phi4Call:
    return Phi4Call(context)


PHI4_MINI = register(
    Format(
        name="phi4_mini",
        call=("", None),
        syntax=syntax,
        render=render,
        anchor=Anchor(begins=WORD[0], word=WORD),
        grammar=AnchoredShape(
            "json", '{"name": "{name}", "arguments": ', "}", separator=", ", items=(WORD, "]")
        ),
    ),
    aliases=("phi4_mini_json",),
)
