"""Hunyuan (Tencent): a JSON list of calls between `<tool_calls>` tokens.

Sample (vLLM's `hunyuan_a13b` parser, which reads `<tool_calls>([\\s\\S]*?)</tool_calls>`
as a JSON list of `{"name", "arguments"}` objects)::

    <tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>

Each item is one call (`syntax.json_calls`, the model's own argument bytes);
`</tool_calls>` ends the list (`syntax.end_marked`). Reasoning is `<think>`...
`</think>`; Hunyuan A13B wraps its answer in `<answer>`...`</answer>`, special tokens
that are dropped (the text between them is the content). The call tokens are added
tokens, so the format is gated.

Suffixed vocabularies. Some Hunyuan checkpoints (HY V3/V4 in vLLM's `hy_v3`/`hy_v4`
parsers) spell every structural token with a per-checkpoint suffix, `<tool_calls:6124c78e>`.
`resolve(vocabulary)` is the pure hook that finds the suffix in the served vocabulary
(the token texts) and returns this format with its delimiters spelled as that
vocabulary spells them; a vocabulary without suffixes gets the format unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.end_marked import EndMarked
from toolwire.syntax.json_calls import JsonCall

#: A structural token, with the checkpoint's suffix when it has one.
_STRUCTURAL = re.compile(r"</?(?:think|tool_calls|tool_call|arg_key|arg_value|answer)(:[^\s>]+)?>")


def _item(context: CallContext) -> JsonCall:
    return JsonCall(context, separator=",")


def _format(suffix: str) -> Format:
    start, end = f"<tool_calls{suffix}>", f"</tool_calls{suffix}>"

    def render(calls: Sequence[RenderedCall]) -> str:
        items = [
            json.dumps({"name": name, "arguments": dict(args)}, ensure_ascii=False)
            for name, args in calls
        ]
        return start + "[" + ", ".join(items) + "]" + end

    def syntax(context: CallContext) -> EndMarked:
        return EndMarked(context, _item, end)

    render_calls: Callable[[Sequence[RenderedCall]], str] = render
    return Format(
        name="hunyuan",
        call=(start, None),
        syntax=syntax,
        render=render_calls,
        reasoning=(f"<think{suffix}>", f"</think{suffix}>"),
        marks=(end,),
        grammar=Shape(
            head='{"name": "{name}", "arguments": ',
            tail="}",
            name="json",
            items=("[", "]"),
            separator=", ",
            list_end=end,
        ),
    )


def suffix_of(vocabulary: Iterable[str]) -> str:
    """The suffix the vocabulary's structural tokens carry (`:6124c78e`), or ""."""
    for token in vocabulary:
        match = _STRUCTURAL.fullmatch(token)
        if match and match.group(1):
            return match.group(1)
    return ""


def resolve(vocabulary: Iterable[str]) -> Format:
    """This format as the served vocabulary spells its tokens (pure)."""
    suffix = suffix_of(vocabulary)
    return _format(suffix) if suffix else HUNYUAN


HUNYUAN = register(_format(""))
