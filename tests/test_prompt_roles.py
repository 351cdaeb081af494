"""Instructions mid-conversation, developer messages and missing content, on every
template of the shared data (the templates and vocabularies of `tests.test_prompt_inert`).

A `system` or `developer` message in the middle of a conversation (Claude Code sends
them) is never dropped and never refused: it renders after the turn before it and
before the user turn after it, whether the template keeps it in place or it is folded
into that user message. A leading developer message renders before the first user
turn. An assistant message with tool calls and no `content` key (an OpenAI SDK
`model_dump(exclude_none=True)`) renders as one with `"content": null`, its call
written. Where a template keeps an instruction in place, the prompt is the one the
template renders from the messages as sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.data import tokenizer_for
from tests.test_prompt_inert import _cases, family_tokenizer, options_for, template_source
from toolwire import render_prompt

CASES = _cases()
CALL_ID = "a1b2c3d4e"


def _setup(folder: str, name: str | None, vocabulary: str) -> tuple[Any, str, dict[str, Any]]:
    tok = family_tokenizer(folder, vocabulary)
    source = template_source(folder, name, tok)
    if source is None:
        pytest.skip(f"{folder}: the vocabulary has no chat template of its own")
    return tok, source, options_for(folder, name)


def _call(name: str = "get_weather") -> dict[str, Any]:
    arguments = json.dumps({"city": "Lisbon"})
    return {"id": CALL_ID, "type": "function", "function": {"name": name, "arguments": arguments}}


def _before(text: str, *parts: str) -> bool:
    places = [text.find(p) for p in parts]
    return all(p >= 0 for p in places) and places == sorted(places)


@pytest.mark.parametrize(("folder", "name", "vocabulary"), CASES)
def test_instructions_mid_conversation_render_in_order(
    folder: str, name: str | None, vocabulary: str
) -> None:
    tok, source, options = _setup(folder, name, vocabulary)
    for role in ("system", "developer"):
        for lead in (True, False):
            for after_tool in (False, True):
                history: list[dict[str, Any]] = [{"role": "user", "content": "First question."}]
                if after_tool:
                    history += [
                        {"role": "assistant", "content": None, "tool_calls": [_call()]},
                        {"role": "tool", "tool_call_id": CALL_ID, "content": "Sunny."},
                    ]
                history.append({"role": "assistant", "content": "Sunny answer."})
                reminder = {"role": role, "content": f"Mid {role} reminder."}
                messages = [
                    *([{"role": "system", "content": "Leading rules."}] if lead else []),
                    *history,
                    reminder,
                    {"role": "user", "content": "Second question."},
                ]
                text = render_prompt(messages, tok, template=source, **options).text
                where = f"{role}, leading system {lead}, after a tool result {after_tool}"
                assert _before(
                    text, "Sunny answer.", f"Mid {role} reminder.", "Second question."
                ), where


@pytest.mark.parametrize(("folder", "name", "vocabulary"), CASES)
def test_an_instruction_after_the_last_user_turn_is_kept(
    folder: str, name: str | None, vocabulary: str
) -> None:
    tok, source, options = _setup(folder, name, vocabulary)
    for role in ("system", "developer"):
        messages = [
            {"role": "user", "content": "Only question."},
            {"role": "assistant", "content": None, "tool_calls": [_call()]},
            {"role": "tool", "tool_call_id": CALL_ID, "content": "Sunny answer."},
            {"role": "system" if role == "system" else "developer", "content": "Late note."},
        ]
        text = render_prompt(messages, tok, template=source, **options).text
        assert text.count("Late note.") == 1, role
        assert "Only question." in text and "Sunny answer." in text


@pytest.mark.parametrize(("folder", "name", "vocabulary"), CASES)
def test_a_leading_developer_message_renders_before_the_user(
    folder: str, name: str | None, vocabulary: str
) -> None:
    tok, source, options = _setup(folder, name, vocabulary)
    messages = [
        {"role": "developer", "content": "Developer rules."},
        {"role": "user", "content": "A question."},
    ]
    text = render_prompt(messages, tok, template=source, **options).text
    assert _before(text, "Developer rules.", "A question.")


@pytest.mark.parametrize(("folder", "name", "vocabulary"), CASES)
def test_an_assistant_message_without_content_renders_its_calls(
    folder: str, name: str | None, vocabulary: str
) -> None:
    tok, source, options = _setup(folder, name, vocabulary)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    dumped = {"role": "assistant", "tool_calls": [_call()]}  # model_dump(exclude_none=True)
    null = {"role": "assistant", "content": None, "tool_calls": [_call()]}
    turn = [
        {"role": "user", "content": "Weather in Lisbon?"},
        dumped,
        {"role": "tool", "tool_call_id": CALL_ID, "content": "Sunny."},
    ]
    prompt = render_prompt(turn, tok, tools=tools, template=source, **options)
    assert "Lisbon" in prompt.text.split("Weather in Lisbon?", 1)[1]  # the call is written
    with_null = render_prompt(
        [turn[0], null, turn[2]], tok, tools=tools, template=source, **options
    )
    assert prompt.ids == with_null.ids


def test_an_instruction_the_template_keeps_renders_as_the_template_writes_it() -> None:
    """Qwen3 writes a system turn anywhere: the message is sent on untouched."""
    tok = tokenizer_for("qwen3")
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "system", "content": "Plan mode is on."},
        {"role": "user", "content": "Go on."},
    ]
    text = render_prompt(messages, tok).text
    assert "<|im_start|>system\nPlan mode is on.<|im_end|>\n<|im_start|>user\nGo on." in text
    # Qwen3's template writes no developer turn at all: it becomes a system turn there.
    messages[2] = {"role": "developer", "content": "Plan mode is on."}
    assert render_prompt(messages, tok).text == text
