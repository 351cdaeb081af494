"""InternLM 2 / 2.5 and Intern-S1: one JSON call object between action tokens, after `<|plugin|>`.

Sample (SGLang 0.5.23's `sglang/srt/function_call/internlm_detector.py`:34-37, its
docstring's example, the space between the two tokens as a decoding that puts spaces
between special tokens writes it; vLLM 0.33's `internlm2` parser,
`vllm/tool_parsers/internlm2_tool_parser.py`:219-224, reads the same call with no space)::

    What's the weather like?<|action_start|> <|plugin|>
    {"name": "get_weather", "parameters": {"location": "Tokyo"}}<|action_end|>

`<|action_start|>` opens an action and `<|action_end|>` ends it; `<|plugin|>`, the
first thing in the body (whitespace before it skipped, `syntax.headed`), says the
action is a tool call. An action of another kind (`<|interpreter|>`, InternLM's code
interpreter) is not a call: the body is released as content, that token's text
included (`keep`). The call object names
the tool and holds its arguments under `parameters` (as InternLM's chat template
writes them) or `arguments` (`syntax.json_envelope`, the model's own argument bytes).
All four are special tokens of the InternLM 2 vocabulary, so the format is gated.
Intern-S1 reasons in `<think>`...`</think>` (SGLang's `interns1` reasoning parser);
InternLM 2 writes no reasoning.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.headed import Headed
from toolwire.syntax.json_envelope import JsonEnvelope

START, END, PLUGIN = "<|action_start|>", "<|action_end|>", "<|plugin|>"
INTERPRETER = "<|interpreter|>"


def render(calls: Sequence[RenderedCall]) -> str:
    return "\n".join(
        f"{START}{PLUGIN}\n"
        + json.dumps({"name": name, "parameters": dict(args)}, ensure_ascii=False)
        + END
        for name, args in calls
    )


def _json(context: CallContext) -> JsonEnvelope:
    return JsonEnvelope(context)


def syntax(context: CallContext) -> Headed:
    return Headed(context, context.marks[PLUGIN], _json)


INTERNLM = register(
    Format(
        name="internlm",
        call=(START, END),
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        marks=(PLUGIN,),
        # Another kind of action is released as content, its kind included.
        keep=(INTERPRETER,),
        template_markers=(PLUGIN,),
        grammar=Shape(head=PLUGIN + '\n{"name": "{name}", "parameters": ', tail="}", name="json"),
    ),
    aliases=("internlm2", "interns1"),
)
