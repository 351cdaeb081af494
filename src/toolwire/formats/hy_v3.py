"""Hunyuan V3 (Hy3): GLM-like tagged calls, the name ended by `<tool_sep>`, in a section.

Sample (SGLang's `hunyuan` detector, `sglang/srt/function_call/hunyuan_detector.py`,
its class docstring; vLLM's `hy_v3` parser, `vllm/tool_parsers/hy_v3_tool_parser.py`,
reads the same tags)::

    <tool_calls>
    <tool_call>get_weather<tool_sep>
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>
    </tool_calls>

Every tag is an added token. Values are text, typed by the declared schema (`days`
3, not "3"; `syntax.tagged`). Reasoning is `<think>`...`</think>`. A call outside
`<tool_calls>` is provisional, as with every sectioned format.

Suffixed vocabularies: the shipping checkpoints spell every structural token with a
suffix (`<tool_calls:opensource>`, both parsers read it from the vocabulary);
`spelled(suffix)` is this format as such a vocabulary spells it, and
`formats.hunyuan.resolve(vocabulary)` picks it (or Hy4's, or A13B's JSON lists) from
the served vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, Params, RenderedCall, Shape, value_text
from toolwire.syntax.tagged import TaggedParams, Tags


def spelled(suffix: str, *, sep: bool = True, name: str = "hy_v3") -> Format:
    """The format with every structural token carrying `suffix` ("" for none); `sep`:
    the name ends with `<tool_sep>` (Hy3) or runs to the first key tag (Hy4)."""

    def tag(word: str) -> tuple[str, str]:
        return f"<{word}{suffix}>", f"</{word}{suffix}>"

    calls, call, key, value, think = (
        tag(w) for w in ("tool_calls", "tool_call", "arg_key", "arg_value", "think")
    )
    tool_sep = f"<tool_sep{suffix}>" if sep else ""
    newline = "\n" if sep else ""  # Hy3's template breaks lines between tags; Hy4's not
    tags = Tags(name=("", tool_sep), key=key, value=value, end="", trim_newline=False)

    def render(rendered: Sequence[RenderedCall]) -> str:
        blocks = []
        for fn, args in rendered:
            params = "".join(
                f"{newline}{key[0]}{k}{key[1]}{newline}{value[0]}{value_text(v)}{value[1]}"
                for k, v in args.items()
            )
            blocks.append(f"{call[0]}{fn}{tool_sep}{params}{newline}{call[1]}")
        return f"{calls[0]}{newline}" + newline.join(blocks) + f"{newline}{calls[1]}"

    def syntax(context: CallContext) -> TaggedParams:
        return TaggedParams(context, tags.resolve(context.marks))

    return Format(
        name=name,
        call=call,
        syntax=syntax,
        render=render,
        reasoning=think,
        section=calls,
        marks=(*((tool_sep,) if sep else ()), *key, *value),
        grammar=Shape(
            head="{name}" + tool_sep,
            tail=newline,
            style="glm_xml",
            separator=newline,
            section_text=(newline, newline),
            params=Params(
                open=f"{newline}{key[0]}{{key}}{key[1]}{newline}{value[0]}", close=value[1]
            ),
        ),
    )


HY_V3 = register(spelled(""), aliases=("hy3", "hunyuan_v3"))
