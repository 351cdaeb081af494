"""Kimi's call ids across turns: history ids from other models or clients become
`functions.NAME:IDX`, the same for each call and its tool result.

On the Kimi K2 templates of the shared data (with the derived Kimi tokenizer of
`tests.derived`), a conversation whose calls carry other ids renders exactly as the
same conversation with Kimi's own ids, and every `## Return of ID` names the head of
its own call. A template that prints ids as it gets them (as Kimi's later templates
do) gets Kimi ids for the `kimi_k2` format, keeps ids that already are Kimi's, and
leaves ids alone for other formats.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.data import data_dir
from tests.derived import derived_tokenizer
from toolwire import render_prompt

KIMI_TEMPLATES = ("moonshotai-Kimi-K2.jinja", "Kimi-K2-Thinking.jinja", "Kimi-K2-Instruct.jinja")
HEAD = re.compile(r"<\|tool_call_begin\|>(.*?)<\|tool_call_argument_begin\|>")
RETURN = re.compile(r"## Return of (\S+?)(?:\\n|\n)")


def _call(call_id: str, name: str) -> dict[str, Any]:
    arguments = json.dumps({"city": "Paris"})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def conversation(ids: tuple[str, str, str]) -> list[dict[str, Any]]:
    first, second, third = ids
    return [
        {"role": "user", "content": "Weather and time?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [_call(first, "get_weather"), _call(second, "get_time")],
        },
        {"role": "tool", "tool_call_id": first, "content": "sunny"},
        {"role": "tool", "tool_call_id": second, "content": "noon"},
        {"role": "assistant", "content": "Sunny, noon."},
        {"role": "user", "content": "And tomorrow?"},
        {"role": "assistant", "content": "", "tool_calls": [_call(third, "get_weather")]},
        {"role": "tool", "tool_call_id": third, "content": "rain"},
    ]


KIMI_IDS = ("functions.get_weather:0", "functions.get_time:1", "functions.get_weather:2")
FOREIGN = ("call_abc123", "toolu_01XyZ", "call_abc123")  # a client reusing an id


@pytest.mark.parametrize("name", KIMI_TEMPLATES)
@pytest.mark.parametrize("fmt", ["kimi_k2", None])
def test_foreign_ids_render_as_kimi_ids(name: str, fmt: str | None) -> None:
    tok = derived_tokenizer("kimi_k2")
    template = (data_dir() / "tokenizers" / "kimi_k2" / name).read_text(encoding="utf-8")
    foreign = render_prompt(conversation(FOREIGN), tok, template=template, format=fmt)
    own = render_prompt(conversation(KIMI_IDS), tok, template=template, format=fmt)
    assert foreign.ids == own.ids
    heads, returns = HEAD.findall(foreign.text), RETURN.findall(foreign.text)
    assert len(heads) == len(returns) == 3
    assert heads == returns  # each result names its own call, in this conversation's order
    assert all(re.fullmatch(r"functions\.get_(weather|time):\d+", h) for h in heads)
    assert not any(i in foreign.text for i in FOREIGN)


#: A template that prints the ids it is given, as Kimi's later templates do.
PRINTS_IDS = (
    "{%- for m in messages -%}"
    "{%- if m.tool_calls -%}{%- for c in m.tool_calls -%}"
    "<|tool_call_begin|>{{ c.id }}<|tool_call_argument_begin|>{{ c.function.arguments | tojson }}"
    "<|tool_call_end|>{%- endfor -%}"
    "{%- elif m.role == 'tool' -%}## Return of {{ m.tool_call_id }}\n{{ m.content }}"
    "{%- else -%}{{ m.content }}{%- endif -%}\n{%- endfor -%}"
)


def test_a_template_printing_ids_gets_kimi_ids_for_kimi_only() -> None:
    tok = derived_tokenizer("kimi_k2")
    mixed = ("call_abc123", "functions.get_time:1", "toolu_9")
    text = render_prompt(conversation(mixed), tok, template=PRINTS_IDS, format="kimi_k2").text
    assert HEAD.findall(text) == list(KIMI_IDS)
    assert RETURN.findall(text) == list(KIMI_IDS)
    # Another format's ids are the client's business: rendered as given.
    text = render_prompt(conversation(mixed), tok, template=PRINTS_IDS, format="hermes").text
    assert HEAD.findall(text) == list(mixed)
