"""Qwen3-Coder / Qwen3.5: XML parameters inside `<tool_call>` tags, values as text.

Sample (Qwen3-Coder's chat template)::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

`<function=` and `<parameter=` are ordinary text; only `<tool_call>`/`</tool_call>`
are tokens. Values are typed by the declared schema (`days` is an integer: 3).
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import Bare, CallContext, Format, RenderedCall, Shape, value_text
from toolwire.syntax.tagged import TaggedParams, Tags

TAGS = Tags(
    name=("<function=", ">"),
    key=("<parameter=", ">"),
    value=("", "</parameter>"),
    end="</function>",
)


CALL = ("<tool_call>", "</tool_call>")


def render(calls: Sequence[RenderedCall], call: tuple[str, str] = CALL) -> str:
    """The calls as the template writes them, each between `call`'s delimiters."""
    blocks = []
    for name, args in calls:
        params = "".join(
            f"<parameter={key}>\n{value_text(value)}\n</parameter>\n" for key, value in args.items()
        )
        blocks.append(f"{call[0]}\n<function={name}>\n{params}</function>\n{call[1]}")
    return "\n".join(blocks)


def syntax(context: CallContext) -> TaggedParams:
    return TaggedParams(context, TAGS)


#: What opens a body that stands alone (`<function=NAME>...</function>`, no wrapper).
FUNCTION = TAGS.name[0]


def bare_syntax(context: CallContext) -> TaggedParams:
    """A body without `<tool_call>`: it ends itself at `</function>`."""
    body = TaggedParams(context, TAGS, self_ending=True)
    body.feed(FUNCTION)  # the opener is the body's own first tag
    return body


#: Models of the family write the body without its wrapper (vLLM's Qwen3 parser
#: engine and Dynamo read `<function=` with no `<tool_call>` before it).
BARE = Bare(FUNCTION, bare_syntax)


QWEN3_CODER = register(
    Format(
        name="qwen3_coder",
        call=CALL,
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        # Qwen3.5 writes `<tool_call>` before `</think>` (vLLM's Qwen3 parser: an
        # implicit end of reasoning).
        calls_in_reasoning=True,
        bare=BARE,
        grammar=Shape(head="\n<function={name}>", tail="</function>\n", style="qwen_xml"),
    )
)
