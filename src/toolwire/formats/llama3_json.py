"""Llama 3.1-3.3 JSON tool calls: a bare JSON object, no token around it.

Sample (the Llama 3.1/3.2/3.3 chat templates: "Respond in the format {"name": function
name, "parameters": dictionary of argument name and its value}"; docs/formats.md)::

    {"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}

Several calls are separated by `; `; the model may write `<|python_tag|>` (128010)
first. No delimiter of a call is a token, so this format is the text-gated fallback
(`Parser.gated` is False): a call may begin only where a line begins (the output's
start, after a newline, after `<|python_tag|>` matched by its id, or right after a
call), with `{`; an object quoted mid-sentence is content, and an object that is not a
complete call to a declared tool is released as content.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import Anchor, AnchoredShape, CallContext, Format, RenderedCall
from toolwire.syntax.json_calls import JsonCall


def render(calls: Sequence[RenderedCall]) -> str:
    return "; ".join(
        json.dumps({"name": name, "parameters": dict(args)}, ensure_ascii=False)
        for name, args in calls
    )


def syntax(context: CallContext) -> JsonCall:
    return JsonCall(context, separator=";")


LLAMA3_JSON = register(
    Format(
        name="llama3_json",
        call=("", None),
        syntax=syntax,
        render=render,
        anchor=Anchor(begins="{", after=("<|python_tag|>",)),
        grammar=AnchoredShape("json", '{"name": "{name}", "parameters": ', "}", separator="; "),
    )
)
