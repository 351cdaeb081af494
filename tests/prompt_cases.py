"""Conversations and templates for the prompt tests (test data only, no assertions).

Every conversation is OpenAI-shaped: tool-call arguments are JSON strings.
`as_template_data` gives the shape transformers' templates expect (arguments as
objects), for the transformers oracle.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.data import data_dir

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "days": {"type": "integer"},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The local time in a timezone.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
    },
}
TOOLS = [WEATHER, TIME]


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


#: name -> (messages, uses tools)
CONVERSATIONS: dict[str, tuple[list[dict[str, Any]], bool]] = {
    "user": ([{"role": "user", "content": "Hello there."}], False),
    "system_user": (
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is 2+2?"},
        ],
        False,
    ),
    "multi_turn": (
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Name a color."},
            {"role": "assistant", "content": "Blue."},
            {"role": "user", "content": "Another one?"},
        ],
        False,
    ),
    "tools_first_turn": (
        [
            {"role": "system", "content": "Use tools when useful."},
            {"role": "user", "content": "Weather in Paris for 3 days?"},
        ],
        True,
    ),
    "tool_call_and_result": (
        [
            {"role": "system", "content": "Use tools when useful."},
            {"role": "user", "content": "Weather in Paris for 3 days?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_call("call_1", "get_weather", {"city": "Paris", "days": 3})],
            },
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
             "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
        ],
        True,
    ),
    "reasoning_then_call": (
        [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "The user wants the weather; call the tool.",
                "tool_calls": [_call("call_1", "get_weather", {"city": "Paris"})],
            },
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
             "content": "rain"},
        ],
        True,
    ),
    "parallel_calls_then_answer": (
        [
            {"role": "user", "content": "Weather in Paris and time in Tokyo?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    _call("call_1", "get_weather", {"city": "Paris"}),
                    _call("call_2", "get_time", {"tz": "Asia/Tokyo"}),
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
             "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_2", "name": "get_time", "content": "09:00"},
            {"role": "assistant", "content": "Sunny in Paris; 09:00 in Tokyo."},
            {"role": "user", "content": "Thanks!"},
        ],
        True,
    ),
}  # fmt: skip


#: family -> [(template file or None for the tokenizer's own, template variables sets)]
THINKING_QWEN = [{}, {"enable_thinking": True}, {"enable_thinking": False}]
THINKING_DEEPSEEK = [{}, {"thinking": True}, {"thinking": False}]
LLAMA_BOS = {"bos_token": "<|begin_of_text|>"}
TEMPLATES: dict[str, list[tuple[str | None, list[dict[str, Any]]]]] = {
    "qwen3": [
        (None, THINKING_QWEN),
        ("Qwen-Qwen3-0.6B.jinja", THINKING_QWEN),
        ("Qwen-Qwen2.5-7B-Instruct.jinja", [{}]),
        ("Qwen3-Coder.jinja", [{}]),
    ],
    "deepseek_v3": [
        (None, [{}]),
        ("deepseek-ai-DeepSeek-V3.1.jinja", THINKING_DEEPSEEK),
        ("deepseek-ai-DeepSeek-V3.2.jinja", THINKING_DEEPSEEK),
    ],
    "gpt_oss": [(None, [{}, {"reasoning_effort": "high"}])],
    "llama3": [
        ("meta-llama-Llama-3.1-8B-Instruct.jinja", [LLAMA_BOS]),
        ("meta-llama-Llama-3.2-3B-Instruct.jinja", [LLAMA_BOS]),
        ("meta-llama-Llama-3.3-70B-Instruct.jinja", [LLAMA_BOS]),
    ],
    "kimi_k2": [
        ("Kimi-K2-Thinking.jinja", [{}]),
        ("Kimi-K2-Instruct.jinja", [{}]),
        ("moonshotai-Kimi-K2.jinja", [{}]),
    ],
    "glm": [("GLM-4.6.jinja", THINKING_QWEN), ("GLM-4.7-Flash.jinja", THINKING_QWEN)],
    "minimax_m2": [("MiniMax-M2.jinja", [{}])],
    "gemma4": [
        ("google-gemma-4-31B-it.jinja", [{}, {"enable_thinking": True}]),
        ("google-gemma-4-31B-it-interleaved.jinja", [{}, {"enable_thinking": True}]),
    ],
}


def prompt_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`render_prompt` options for one kwarg set: the tokenizer's named tokens (Llama's
    `bos_token`, which its shared config lacks) are `special_tokens`, trusted; the rest
    are `template_kwargs`, request data."""
    special = {k: v for k, v in kwargs.items() if k.endswith("_token")}
    rest = {k: v for k, v in kwargs.items() if k not in special}
    return {"template_kwargs": rest, "special_tokens": special}


#: Families whose vocabulary is not available offline: tests use `tests.derived`.
DERIVED = frozenset({"kimi_k2", "glm", "minimax_m2", "gemma4"})


def template_text(family: str, name: str | None) -> str | None:
    """A template file's text from the shared data (None: the tokenizer's own)."""
    if name is None:
        return None
    return (data_dir() / "tokenizers" / family / name).read_text(encoding="utf-8")


def as_template_data(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with tool-call arguments parsed, as templates expect them."""
    out = copy.deepcopy(messages)
    for message in out:
        for call in message.get("tool_calls", []):
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out
