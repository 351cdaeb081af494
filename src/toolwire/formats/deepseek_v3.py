"""DeepSeek V3 / R1: a typed head, the name, then JSON in a fenced block.

Sample (DeepSeek V3's chat template; docs/formats.md)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Paris", "days": 3}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

Ids (DeepSeek vocabulary): 128806 calls-begin, 128807 calls-end, 128808 call-begin,
128809 call-end, 128814 sep. Parallel calls are blocks separated by a newline. R1
reasons in `<think>`...`</think>` (a token in R1's vocabulary; the original V3
vocabulary has none, so there it is matched as text). A call outside the section
is provisional. Arguments are the model's own JSON bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, Reject, RenderedCall, Shape
from toolwire.syntax.named_json import NamedJson

SEP = "<｜tool▁sep｜>"
CALLS = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>")
CALL = ("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>")


def render(calls: Sequence[RenderedCall]) -> str:
    blocks = [
        f"{CALL[0]}function{SEP}{name}\n```json\n"
        f"{json.dumps(dict(args), ensure_ascii=False)}\n```{CALL[1]}"
        for name, args in calls
    ]
    return CALLS[0] + "\n".join(blocks) + CALLS[1]


def syntax(context: CallContext) -> NamedJson:
    sep = context.marks[SEP]

    def head(text: str) -> tuple[str, str | None]:
        kind, found, name = text.partition(sep)
        if not found or kind.strip() != "function" or not name.strip():
            raise Reject("expected 'function<｜tool▁sep｜>NAME' before the arguments")
        return name.strip(), None

    return NamedJson(context, head_end="```json", head=head, tail="```")


DEEPSEEK_V3 = register(
    Format(
        name="deepseek_v3",
        call=CALL,
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        section=CALLS,
        marks=(SEP,),
        grammar=Shape(head=f"function{SEP}{{name}}\n```json\n", tail="\n```"),
    )
)
