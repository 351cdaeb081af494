"""`render_prompt` ids equal transformers' `apply_chat_template(..., tokenize=True)`.

transformers is a test-only oracle: the same tokenizer (a copy of ours, with the same
special tokens) and the same template text, over every template in the shared data and
a set of conversations without special-token text in content, isolation on. The
oracle gets tool-call arguments as objects (what templates expect); `render_prompt`
gets the OpenAI shape (JSON strings) and must parse them as vLLM does.

Kimi K2, GLM, MiniMax M2 and Gemma 4 have no vocabulary offline: they use the derived
tokenizers of `tests.derived` (Qwen3's vocabulary plus the family's special tokens).
Mistral is not covered: its vocabularies here are mistral-common files, not Hugging
Face tokenizers.

One oracle difference, on purpose: transformers' sandbox refuses templates that
mutate lists (Kimi K2 appends to and pops from a queue), so the oracle runs with
Jinja's ordinary sandbox, as `toolwire.prompt` does.

And one difference in the data: DeepSeek V3's own template writes an assistant's tool
calls only when its content is None and its arguments are JSON text (given "" and
objects, it drops the calls without a word). `render_prompt` finds that by rendering
(`toolwire.prompt.accepts`) and writes the calls; transformers, which drops None
keys, cannot, so for that template the test checks the calls are there instead. Kimi's
templates get their calls' ids as `functions.NAME:IDX` (`toolwire.prompt.call_ids`
renumbers others): the oracle is given Kimi's ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

transformers = pytest.importorskip("transformers")

import jinja2.sandbox  # noqa: E402
import tokenizers  # noqa: E402

from tests.data import tokenizer_for  # noqa: E402
from tests.derived import derived_tokenizer  # noqa: E402
from tests.prompt_cases import (  # noqa: E402
    CONVERSATIONS,
    DERIVED,
    TEMPLATES,
    TOOLS,
    as_template_data,
    prompt_options,
    template_text,
)
from toolwire import PromptError, Tokenizer, render_prompt  # noqa: E402

SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token")


def family_tokenizer(family: str) -> Tokenizer:
    return derived_tokenizer(family) if family in DERIVED else tokenizer_for(family)


@cache
def oracle(family: str) -> Any:
    """A transformers tokenizer over a copy of our vocabulary, same special tokens."""
    tok = family_tokenizer(family)
    special = {k: v for k in SPECIAL if (v := tok.token_string(k)) is not None}
    backend = tokenizers.Tokenizer.from_str(tok.backend.to_str())
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, **special)


@pytest.fixture(scope="module", autouse=True)
def mutable_oracle_sandbox() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            jinja2.sandbox.ImmutableSandboxedEnvironment,
            "is_safe_attribute",
            jinja2.sandbox.SandboxedEnvironment.is_safe_attribute,
        )
        yield


CASES = [
    pytest.param(family, name, kwargs, id=f"{family}-{name or 'own'}-{kwargs or 'default'}")
    for family, entries in TEMPLATES.items()
    for name, kwarg_sets in entries
    for kwargs in kwarg_sets
]


@pytest.mark.parametrize(("family", "name", "kwargs"), CASES)
def test_ids_match_transformers(family: str, name: str | None, kwargs: dict[str, Any]) -> None:
    tok = family_tokenizer(family)
    template = template_text(family, name)
    hf = oracle(family)
    rendered = 0
    for conversation, (messages, uses_tools) in CONVERSATIONS.items():
        tools = TOOLS if uses_tools else None
        data = as_template_data(messages)
        if family == "kimi_k2":
            data = kimi_ids(data)
        try:
            expected = hf.apply_chat_template(
                data,
                tools=tools,
                chat_template=template or tok.chat_template,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
                **kwargs,
            )
        except jinja2.exceptions.TemplateError as exc:  # the template refuses this chat
            with pytest.raises(PromptError, match="refused") as refused:
                render_prompt(
                    messages, tok, tools=tools, template=template, **prompt_options(kwargs)
                )
            assert str(exc) in str(refused.value)
            continue
        prompt = render_prompt(
            messages, tok, tools=tools, template=template, **prompt_options(kwargs)
        )
        if family == "deepseek_v3" and name is None and any("tool_calls" in m for m in messages):
            begin = tok.added_tokens["<｜tool▁call▁begin｜>"]
            assert begin in prompt.ids and begin not in expected, conversation
            rendered += 1
            continue
        assert prompt.ids == expected, conversation
        assert tok.decode(prompt.ids) == prompt.text, conversation
        rendered += 1
    messages = CONVERSATIONS["multi_turn"][0]
    expected = hf.apply_chat_template(
        messages,
        chat_template=template or tok.chat_template,
        tokenize=True,
        return_dict=False,
        **kwargs,
    )
    options = {"template": template, **prompt_options(kwargs), "add_generation_prompt": False}
    assert render_prompt(messages, tok, **options).ids == expected
    assert rendered >= len(CONVERSATIONS) - 1


def kimi_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as a Kimi client sends it: each call's id `functions.NAME:IDX`
    (here one assistant message calls, so IDX is also its place in that message)."""
    new_of: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls", []):
            new_of[call["id"]] = call["id"] = f"functions.{call['function']['name']}:{len(new_of)}"
        if message.get("tool_call_id") in new_of:
            message["tool_call_id"] = new_of[message["tool_call_id"]]
    return messages


def test_arguments_as_objects_render_the_same() -> None:
    tok = tokenizer_for("qwen3")
    messages, _ = CONVERSATIONS["tool_call_and_result"]
    as_strings = render_prompt(messages, tok, tools=TOOLS)
    as_objects = render_prompt(as_template_data(messages), tok, tools=TOOLS)
    assert as_strings.ids == as_objects.ids
    assert '"city": "Paris"' in as_strings.text


def test_text_parts_follow_the_template() -> None:
    """Text parts: a list for templates that iterate content, else joined with a newline."""
    parts = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    qwen = tokenizer_for("qwen3")
    joined = render_prompt([{"role": "user", "content": "first\nsecond"}], qwen)
    assert render_prompt([{"role": "user", "content": parts}], qwen).ids == joined.ids
    kimi = derived_tokenizer("kimi_k2")
    expected = oracle("kimi_k2").apply_chat_template(
        [{"role": "user", "content": parts}],
        chat_template=kimi.chat_template,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    assert render_prompt([{"role": "user", "content": parts}], kimi).ids == expected
