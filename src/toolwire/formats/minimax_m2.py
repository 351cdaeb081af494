"""MiniMax M2: `<invoke>` elements with `<parameter>` values inside a tool-call section.

Sample (MiniMax M2's chat template)::

    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    <parameter name="days">3</parameter>
    </invoke>
    </minimax:tool_call>

Only `<minimax:tool_call>`/`</minimax:tool_call>` (and `<think>`/`</think>`) are
tokens; `<invoke name="` and the other tags are plain text, recognized only where
the structure expects them: an invoke only between calls inside the section, its end
only by the body's own syntax (so neither in content nor inside a value). Values are typed
by the declared schema. The generation prompt ends in `<think>\\n`: pass
`in_reasoning=True` with that prompt, since the output starts inside reasoning.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import Bare, CallContext, Format, RenderedCall, Shape, value_text
from toolwire.syntax.tagged import TaggedParams, Tags

SECTION = ("<minimax:tool_call>", "</minimax:tool_call>")
TAGS = Tags(
    name=("", '">'),
    key=('<parameter name="', '">'),
    value=("", "</parameter>"),
    end="</invoke>",
    trim_newline=False,
)


def render(calls: Sequence[RenderedCall]) -> str:
    out = SECTION[0] + "\n"
    for name, args in calls:
        out += f'<invoke name="{name}">\n'
        for key, value in args.items():
            text = value_text(value)
            out += f'<parameter name="{key}">{text}</parameter>\n'
        out += "</invoke>\n"
    return out + SECTION[1]


def syntax(context: CallContext) -> TaggedParams:
    return TaggedParams(context, TAGS, self_ending=True)


MINIMAX_M2 = register(
    Format(
        name="minimax_m2",
        call=('<invoke name="', None),  # the body ends itself at `</invoke>`
        syntax=syntax,
        render=render,
        reasoning=("<think>", "</think>"),
        section=SECTION,
        loose_calls=False,
        # An `<invoke>` without its section (a body that ends itself at `</invoke>`).
        bare=Bare('<invoke name="', syntax),
        # Interleaved thinking: vLLM's MiniMax parser engine lets a tool call begin
        # while still inside `<think>`.
        calls_in_reasoning=True,
        # The call has no closing delimiter: its body ends itself at `</invoke>`.
        grammar=Shape(
            head='{name}">', tail="</invoke>", style="minimax_xml", section_text=("\n", "\n")
        ),
    )
)
