"""Kimi K3 ("XTML"): channels and elements built from three tokens and the text after them.

Sample (vLLM 0.33, `tool_parsers/kimi_k3_tool_parser.py`'s docstring and the byte
layout its structural tag writes, `structural_tag_registry.get_kimi_k3_structural_tag`;
SGLang 0.5.23, `function_call/kimik3_detector.py`; one line in the output, broken here)::

    <|open|>think<|sep|>The user wants the weather.<|close|>think<|sep|>
    <|open|>response<|sep|>Checking.<|close|>response<|sep|>
    <|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>
    <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>
    <|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>
    <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>

Only `<|open|>`, `<|close|>`, `<|sep|>` and `<|end_of_msg|>` are tokens; a channel or
element name (`tools`, `call`, `argument`) is ordinary text after `<|open|>` or
`<|close|>`. Each delimiter here is such a run, token, text, token: it holds the
tokens, so it is matched only where its *ids* stand (the same characters spelled
from ordinary ids are text), and the format is gated when the vocabulary has
`<|open|>` and `<|sep|>` as tokens.

A `string` value is raw text; any other `type` (`number`, `boolean`, `null`,
`object`, `array`; the encoder folds `integer` into `number`) is JSON, whatever its
kind. Without a known `type` attribute the declared schema decides. Attribute values
escape `&` and `"` (`&amp;`, `&quot;`). `index` counts calls from 1; it is not an id.

The `response` channel's markers and the turn's `<|close|>message<|sep|>` are listed
as further reasoning closes: where they stand in reasoning they end it (a response
began), and anywhere else outside a call they are consumed markup, as any delimiter
that does not act. `<|end_of_msg|>` is an ordinary special token: dropped. K3 ships
no Jinja chat template (its tokenizer renders prompts in Python), so there is no
prompt parity to check; in thinking mode the prompt ends in `<|open|>think<|sep|>`:
pass `in_reasoning=True` there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from toolwire.formats import register
from toolwire.formats.spec import CallContext, Format, Params, RenderedCall, Shape, value_text
from toolwire.syntax.tagged import TaggedParams, Tags

OPEN, CLOSE, SEP = "<|open|>", "<|close|>", "<|sep|>"
THINK = (f"{OPEN}think{SEP}", f"{CLOSE}think{SEP}")
RESPONSE = (f"{OPEN}response{SEP}", f"{CLOSE}response{SEP}")
MESSAGE_CLOSE = f"{CLOSE}message{SEP}"
SECTION = (f"{OPEN}tools{SEP}", f"{CLOSE}tools{SEP}")
CALL = (f"{OPEN}call", f"{CLOSE}call{SEP}")
ARGUMENT = (f"{OPEN}argument", f"{CLOSE}argument{SEP}")

#: K3's `type` attribute -> how its value is read: a string is raw text, any other
#: type JSON (as vLLM and SGLang decode it, whatever the declared schema says).
TYPES = {"string": "string"} | {k: "any" for k in ("number", "boolean", "null", "object", "array")}
_ATTRIBUTE = re.compile(r'([A-Za-z_]\w*)\s*=\s*"([^"]*)"')


def attributes_of(text: str) -> dict[str, str]:
    """`key="a&quot;b" type="string"` -> {"key": 'a"b', "type": "string"}."""
    return {
        m[1]: m[2].replace("&quot;", '"').replace("&amp;", "&") for m in _ATTRIBUTE.finditer(text)
    }


def head(text: str) -> str:
    """` tool="get_weather" index="1"` -> "get_weather" ("" when it names no tool)."""
    return attributes_of(text).get("tool", "")


def argument(text: str) -> tuple[str, str | None]:
    """` key="days" type="number"` -> ("days", "number")."""
    found = attributes_of(text)
    return found.get("key", ""), TYPES.get(found.get("type", ""))


def type_of(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return "object" if isinstance(value, dict) else "array"


def escape(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;")


def render(calls: Sequence[RenderedCall]) -> str:
    out = SECTION[0]
    for index, (name, args) in enumerate(calls, 1):
        out += f'{CALL[0]} tool="{escape(name)}" index="{index}"{SEP}'
        for key, value in args.items():
            text = value_text(value)
            out += f'{ARGUMENT[0]} key="{escape(key)}" type="{type_of(value)}"{SEP}'
            out += f"{text}{ARGUMENT[1]}"
        out += CALL[1]
    return out + SECTION[1]


def render_text(reasoning: str | None, content: str | None) -> str:
    out = "" if reasoning is None else f"{THINK[0]}{reasoning}{THINK[1]}"
    return out + ("" if content is None else f"{RESPONSE[0]}{content}{RESPONSE[1]}")


TAGS = Tags(
    name=("", SEP),
    key=(ARGUMENT[0], SEP),
    value=("", ARGUMENT[1]),
    end="",
    trim_newline=False,
    attributes=argument,
    head=head,
)


def syntax(context: CallContext) -> TaggedParams:
    return TaggedParams(context, TAGS.resolve(context.marks))


KIMI_K3 = register(
    Format(
        name="kimi_k3",
        call=CALL,
        syntax=syntax,
        render=render,
        render_text=render_text,
        reasoning=THINK,
        more_reasoning=(
            (THINK[0], RESPONSE[0]),
            (THINK[0], RESPONSE[1]),
            (THINK[0], MESSAGE_CLOSE),
        ),
        section=SECTION,
        # Longest first: `Tags.resolve` replaces each mark's text in this order.
        marks=(ARGUMENT[1], ARGUMENT[0], SEP),
        # Channels: a `tools` channel opens as the think channel does, ending it.
        calls_in_reasoning=True,
        # Arguments element by element at either level (`style` "params": no XGrammar
        # style writes them); `types`: the schema's type -> K3's `type` attribute.
        grammar=Shape(
            head=f' tool="{{name}}" index="{{index}}"{SEP}',
            style="params",
            separator="",
            params=Params(
                open=f'{ARGUMENT[0]} key="{{key}}" type="{{type}}"{SEP}',
                close=ARGUMENT[1],
                types=(
                    ("string", "string"),
                    ("integer", "number"),
                    ("number", "number"),
                    ("boolean", "boolean"),
                    ("null", "null"),
                    ("object", "object"),
                    ("array", "array"),
                ),
            ),
            content=RESPONSE,
        ),
    )
)
