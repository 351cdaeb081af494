"""Delimiter text in a request is inert for the template as well as for the model.

For every chat template of the shared data (each with its folder's vocabulary, or the
derived one of `tests.derived` where the folder has only templates; Mistral's with its
tekken vocabulary, which those models use), every message field that carries text
(system and developer content, user content as a string and as text parts, an
assistant's answer and reasoning, tool-call argument values and keys, tool results,
tool names, tool descriptions), and every delimiter text of that template (the added
tokens it writes, its format's delimiters, the markup its source quotes, and the
common `<think>`, `</think>`, `<|im_start|>`, `<tool_call>`): the request renders (no
error), the sequence of added-token ids in the prompt is the one of the same request
with neutral text in that field, and wherever the template wrote the field's text it
is there exactly, spelled from ordinary ids.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.data import data_dir, has_data, has_mistral_common, mistral_tokenizer, tokenizer_for
from tests.derived import derived_tokenizer
from tests.prompt_cases import DERIVED, TEMPLATES, TOOLS, prompt_options
from toolwire import Tokenizer, formats, render_prompt

COMMON = ("<think>", "</think>", "<|im_start|>", "<tool_call>")
MISTRAL = ("tekken_240718.json.gz",)
CALL_ID = "a1b2c3d4e"  # nine alphanumerics: Mistral's templates refuse other ids
NEUTRAL = "plain words"
#: Markup the template's own source spells in quotes (`'</think>'`, `"[TOOL_CALLS]"`).
MARKUP = re.compile(r"""(['"])(<[^'"\s]{1,40}>|\[/?[A-Z_]{2,30}\])\1""")


def _cases() -> list[Any]:
    if not has_data():
        return [pytest.param(None, None, None, id="no-data")]
    out = []
    root = data_dir() / "tokenizers"
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        vocabularies = list(MISTRAL) if folder.name == "mistral" else [folder.name]
        names: list[str | None] = [f.name for f in sorted(folder.glob("*.jinja"))]
        for vocabulary in vocabularies:
            for name in [*names, None]:
                out.append(
                    pytest.param(
                        folder.name,
                        name,
                        vocabulary,
                        id=f"{folder.name}-{name or 'own'}-{vocabulary[:6]}",
                    )
                )
    return out


def family_tokenizer(folder: str, vocabulary: str) -> Tokenizer:
    if folder == "mistral":
        if not has_mistral_common():
            pytest.skip("mistral-common is not installed")
        return mistral_tokenizer(vocabulary)
    return derived_tokenizer(folder) if folder in DERIVED else tokenizer_for(folder)


def options_for(folder: str, name: str | None) -> dict[str, Any]:
    for entry, kwarg_sets in TEMPLATES.get(folder, []):
        if entry == name:
            return prompt_options(kwarg_sets[0])
    return prompt_options({"bos_token": "<|begin_of_text|>"} if folder == "llama3" else {})


#: field -> where a conversation carries it
FIELDS = (
    "system",
    "developer",
    "user",
    "user_parts",
    "assistant_answer",
    "reasoning",
    "argument_value",
    "argument_key",
    "tool_result",
    "tool_name",
    "tool_description",
)


def request(field: str, text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """A conversation with `text` (inside `x ... y`) in `field` only; and that text."""
    value = f"x {text} y"

    def at(name: str, neutral: str) -> str:
        return value if field == name else neutral

    name = "get_weather" + (text.replace(" ", "") if field == "tool_name" else "")
    key = at("argument_key", "city")
    arguments = {key: at("argument_value", "Paris"), "days": 3}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": at("system", "Be brief.")},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "text", "text": at("user_parts", "For Paris.")},
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": at("reasoning", "Call the tool."),
            "tool_calls": [
                {
                    "id": CALL_ID,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": CALL_ID, "name": name,
         "content": at("tool_result", "rain")},
        {"role": "assistant", "content": at("assistant_answer", "It rains.")},
        {"role": "user", "content": at("user", "Thanks.")},
    ]  # fmt: skip
    if field == "developer":
        messages.insert(1, {"role": "developer", "content": value})
    tool = json.loads(json.dumps(TOOLS[0]))
    tool["function"]["name"] = name
    tool["function"]["description"] = at("tool_description", "Current weather for a city.")
    properties = tool["function"]["parameters"]["properties"]
    properties[key] = properties.pop("city")
    tool["function"]["parameters"]["required"] = [key]
    shown = name if field == "tool_name" else value
    return messages, [tool, TOOLS[1]], shown


def specials(tok: Tokenizer, ids: list[int]) -> list[int]:
    return [i for i in ids if i in tok.added_ids]


def spans(tok: Tokenizer, ids: list[int]) -> list[tuple[int, int]]:
    detok = tok.detokenizer()
    out, at = [], 0
    for token_id in ids:
        piece = detok.step(token_id)
        out.append((at, at + len(piece)))
        at += len(piece)
    return out


def forms(text: str) -> list[str]:
    """How a template may write `text`: as is, or inside a JSON string."""
    return list(dict.fromkeys([text, json.dumps(text, ensure_ascii=False)[1:-1]]))


@cache
def delimiters(folder: str, name: str | None, vocabulary: str) -> tuple[str, ...]:
    tok = family_tokenizer(folder, vocabulary)
    source = template_source(folder, name, tok)
    assert source is not None
    messages, tools, _ = request("system", NEUTRAL)
    base = render_prompt(messages, tok, tools=tools, template=source, **options_for(folder, name))
    emitted = {tok.token_text(i) for i in specials(tok, base.ids)}
    found = formats.detect(tok, template=source).format
    own = set(found.delimiters) if found is not None else set()
    quoted = {m.group(2) for m in MARKUP.finditer(source)}
    texts = {*emitted, *own, *quoted, *COMMON}
    return tuple(sorted(t for t in texts if t.strip()))


def template_source(folder: str, name: str | None, tok: Tokenizer) -> str | None:
    if name is None:
        return tok.chat_template
    return (Path(data_dir()) / "tokenizers" / folder / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(("folder", "name", "vocabulary"), _cases())
def test_delimiter_text_in_every_field_is_inert(
    folder: str | None, name: str | None, vocabulary: str | None
) -> None:
    assert folder is not None and vocabulary is not None, "the shared data is missing"
    tok = family_tokenizer(folder, vocabulary)
    source = template_source(folder, name, tok)
    if source is None:
        pytest.skip(f"{folder}: the vocabulary has no chat template of its own")
    options = options_for(folder, name)
    failures: list[str] = []
    for field in FIELDS:
        messages, tools, shown = request(field, NEUTRAL)
        base = render_prompt(messages, tok, tools=tools, template=source, **options)
        written = any(form in base.text for form in forms(shown))
        for text in delimiters(folder, name, vocabulary):
            messages, tools, shown = request(field, text)
            where = f"{field} with {text!r}"
            try:
                prompt = render_prompt(messages, tok, tools=tools, template=source, **options)
            except Exception as exc:  # collected: every field is reported
                failures.append(f"{where}: {type(exc).__name__}: {exc}")
                continue
            if tok.decode(prompt.ids) != prompt.text:
                failures.append(f"{where}: the ids do not decode to the prompt text")
            if specials(tok, prompt.ids) != specials(tok, base.ids):
                failures.append(f"{where}: special ids differ from the neutral request's")
            if not written:
                continue
            found = [f for f in forms(shown) if f in prompt.text]
            if not found:
                failures.append(f"{where}: the text is not in the prompt as written")
                continue
            start = prompt.text.index(found[0])
            end = start + len(found[0])
            covering = [
                i
                for i, (a, b) in zip(prompt.ids, spans(tok, prompt.ids), strict=True)
                if a < end and start < b
            ]
            if set(covering) & tok.added_ids:
                failures.append(f"{where}: a delimiter id stands inside the text")
    assert not failures, "\n".join(failures[:40])


def test_a_stored_answer_holding_the_reasoning_close_continues() -> None:
    """Qwen3's template splits assistant content at `</think>`: the literal text in a
    stored answer (ordinary tokens) stays the answer's text, whole and in place."""
    tok = tokenizer_for("qwen3")
    answer = "The tag </think> closes reasoning; <think> opens it."
    messages = [
        {"role": "user", "content": "What closes reasoning?"},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "And </think> alone?"},
    ]
    prompt = render_prompt(messages, tok, format="qwen3")
    assert f"<|im_start|>assistant\n{answer}<|im_end|>" in prompt.text
    assert tok.added_tokens["</think>"] not in prompt.ids
    assert tok.added_tokens["<think>"] not in prompt.ids
    # Without isolation the template acts on the text: the answer is cut at `</think>`.
    unsafe = render_prompt(messages, tok, format="qwen3", isolate=False)
    assert answer not in unsafe.text
