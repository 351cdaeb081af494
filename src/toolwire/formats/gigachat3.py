"""GigaChat 3: one JSON call object in a message of the `function call` role.

Sample (vLLM 0.33's `gigachat3` parser, `vllm/tool_parsers/gigachat3_tool_parser.py`:29-37,
whose pattern reads the object after `function call<|role_sep|>` and a newline and ends
content at `<|message_sep|>`; the same patterns in SGLang 0.5.23's
`sglang/srt/function_call/gigachat3_detector.py`:16-24; the GigaChat 3 outputs of vLLM's
parser tests, `tests/tool_parsers/test_gigachat3_tool_parser.py`)::

    I'll check that for you.<|message_sep|>

    function call<|role_sep|>
    {"name": "manage_user_memory", "arguments": {"action": "create", "id": "preferences"}}

GigaChat 3 ends its text message with the `<|message_sep|>` token and writes the call
as a message of the role `function call`: a blank line, the role's name as text, the
`<|role_sep|>` token and a newline, then the call (`gigachat3`: the call opens at
`<|message_sep|>`, and the body's header, `syntax.headed`, must read `function
call<|role_sep|>`, that token in its structural form; a message of any other role
after the separator is released as content). The output begins with the separator
when the call has no text before it. GigaChat 3.1 opens a call with a token
instead (`gigachat31`). The body is one JSON object naming
the tool (`syntax.json_envelope`, the model's own argument bytes) that ends at its
closing brace: no closing delimiter; the turn ends with `</s>`. Parallel calls are
consecutive calls, each with its own opener. The format is gated by the two tokens'
ids, so the words quoted in prose are content. It writes no reasoning delimiters.
GigaChat 3.5's DSML-like `<｜GCML｜tool_calls>` (SGLang's `gigachat35` detector) is
another wire form, not read here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.headed import Headed
from toolwire.syntax.json_envelope import JsonEnvelope

MESSAGE_SEP = "<|message_sep|>"
ROLE_SEP = "<|role_sep|>"
ROLE = "function call"
HEADER = f"\n\n{ROLE}{ROLE_SEP}\n"


def json_object(name: str, args: object) -> str:
    return json.dumps({"name": name, "arguments": args}, ensure_ascii=False)


def render(calls: Sequence[RenderedCall]) -> str:
    return "".join(MESSAGE_SEP + HEADER + json_object(name, dict(args)) for name, args in calls)


def json_call(context: CallContext) -> JsonEnvelope:
    return JsonEnvelope(context, self_ending=True)


def syntax(context: CallContext) -> Headed:
    return Headed(context, ROLE + context.marks[ROLE_SEP], json_call)


GIGACHAT3 = register(
    Format(
        name="gigachat3",
        call=(MESSAGE_SEP, None),
        syntax=syntax,
        render=render,
        marks=(ROLE_SEP,),
        template_markers=(ROLE_SEP,),
        grammar=Shape(
            head=HEADER + '{"name": "{name}", "arguments": ',
            tail="}",
            name="json",
            separator="",
        ),
    ),
)
