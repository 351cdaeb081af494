"""Granite 4: one JSON object per call between `<tool_call>` tags, as Hermes.

Sample (IBM's Granite 4.0 prompt guide, "Tools": the assistant turn the chat template
renders for a call; the same block the vLLM `granite4` parser reads)::

    <tool_call>
    {"name": "get_current_weather", "arguments": {"city": "New York"}}
    </tool_call>

Parallel calls are consecutive blocks. The model sometimes writes the arguments as a
JSON string holding the object (`"arguments": "{\\"city\\": ...}"`, which vLLM's
parser passes through as is); both forms are read, and the arguments returned are
always JSON object text (`syntax.escaped_arguments`). In the Granite 4.0 vocabulary
(its tokenizer.json: `<tool_call>` 100270, `</tool_call>` 100271, `<think>` 100274,
`</think>` 100275) the delimiters are added tokens marked `"special": false`: they
are single ids, so the format is gated; not being special only means a decoder that
skips special tokens keeps their text, which changes nothing here (the parser reads
ids). `<think>`...`</think>` is reasoning where the model writes it.
"""

from __future__ import annotations

from toolwire.formats import register
from toolwire.formats.hermes import HERMES, render
from toolwire.formats.spec import CallContext, Format
from toolwire.syntax.escaped_arguments import EscapedArguments


def syntax(context: CallContext) -> EscapedArguments:
    return EscapedArguments(context)


GRANITE4 = register(
    Format(
        name="granite4",
        call=("<tool_call>", "</tool_call>"),
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        # Granite's turn marker: tells its template from Hermes/Qwen's (detection only).
        template_markers=("<|start_of_role|>",),
        grammar=HERMES.grammar,
    )
)
