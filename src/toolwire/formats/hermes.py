"""Hermes 2 Pro / Qwen2.5: one JSON object per call between `<tool_call>` tags.

Sample (the Qwen2.5 chat template's tool instructions; docs/formats.md)::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
    </tool_call>

Parallel calls are consecutive blocks separated by a newline. In the Qwen vocabulary
`<tool_call>` (151657) and `</tool_call>` (151658) are added tokens, so the format is
gated there; with a vocabulary that lacks them it falls back to text matching.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.json_envelope import JsonEnvelope


def render(calls: Sequence[RenderedCall]) -> str:
    return "\n".join(
        "<tool_call>\n"
        + json.dumps({"name": name, "arguments": dict(args)}, ensure_ascii=False)
        + "\n</tool_call>"
        for name, args in calls
    )


def syntax(context: CallContext) -> JsonEnvelope:
    return JsonEnvelope(context)


HERMES = register(
    Format(
        name="hermes",
        call=("<tool_call>", "</tool_call>"),
        syntax=syntax,
        render=render,
        # Hermes 2 Pro/3/4 and Qwen2.5 chat in ChatML: tells them from other families
        # whose templates write the same `<tool_call>` JSON (detection only).
        template_markers=("<|im_start|>",),
        grammar=Shape(head='\n{"name": "{name}", "arguments": ', tail="}\n", name="json"),
    )
)
