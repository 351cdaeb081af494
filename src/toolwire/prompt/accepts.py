"""What a chat template accepts, found by rendering it, and the request fitted to it.

Data flow::

    template --probe chats, rendered once per template (cached)--> Accepts:
        which instruction roles (system, developer) it keeps in order mid-conversation,
        which it keeps as the first message, and whether it writes an assistant's
        tool calls beside an empty content or only beside none
    prepared messages --fit()--> the same messages, each where the template takes it

Clients send what the template may not take: Claude Code puts `{"role": "system"}`
messages in the middle of a conversation, OpenAI clients send `developer` messages
that most open templates drop without a word, and an SDK's
`model_dump(exclude_none=True)` leaves an assistant message with tool calls and no
`content` key (Qwen3's template then fails on `message.content`). `fit` never drops an
instruction and never refuses one:

1. an instruction message (system or developer) stays where it is, as it is, where
   the template keeps it there (the probe found its text after the preceding
   assistant turn and before the following user turn; as the first message: before
   the first user turn);
2. else, a developer message becomes a system message where the template keeps that;
3. else its text is folded into the nearest place the template takes: the next user
   message (before that message's own text), else the last user message before it
   (after its text), else the leading system message (one is made when there is none
   and the template takes it), else it becomes a user message;
4. every message has a `content` (assistant messages beside tool calls: "" or None,
   whichever the template writes the calls with), and tool-call arguments are objects,
   or JSON text for a template that writes calls only from text.

Probes use plain text only, so they say nothing about delimiters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from toolwire.errors import PromptError
from toolwire.prompt.template import render

__all__ = ["PROBE_CHARS", "Accepts", "accepts", "fit"]

INSTRUCTIONS = ("system", "developer")
_MID = "toolwire-probe-instruction"
_USER1, _ANSWER, _USER2 = "toolwire-probe-first", "toolwire-probe-answer", "toolwire-probe-then"
_CALL, _ARGUMENT = "toolwire_probe_tool", "toolwire-probe-city"


@dataclass(frozen=True)
class Accepts:
    """What one template takes (see the module docstring)."""

    #: Instruction roles kept in order after the conversation began.
    middle: frozenset[str]
    #: Instruction roles kept as the first message.
    leading: frozenset[str]
    #: The assistant content beside tool calls that the template writes calls with.
    call_content: str | None
    #: Whether it writes calls only from arguments given as JSON text (DeepSeek V3's
    #: template concatenates them), not as the object `prepare` makes.
    arguments_text: bool = False


#: A probe chat is a few short messages: its rendering is small for any real template.
PROBE_CHARS = 2**18


def _renders(source: str, messages: list[dict[str, Any]], variables: Mapping[str, Any]) -> str:
    try:
        return render(
            source,
            messages,
            tools=None,
            add_generation_prompt=True,
            variables=variables,
            max_chars=PROBE_CHARS,
        )
    except PromptError:
        return ""


def _in_order(text: str, *texts: str) -> bool:
    places = [text.find(t) for t in texts]
    return all(p >= 0 for p in places) and places == sorted(places)


@lru_cache(maxsize=64)
def _accepts(source: str, variables: tuple[tuple[str, str], ...]) -> Accepts:
    named = dict(variables)
    user1 = {"role": "user", "content": _USER1}
    answer = {"role": "assistant", "content": _ANSWER}
    user2 = {"role": "user", "content": _USER2}
    middle, leading = set(), set()
    for role in INSTRUCTIONS:
        mid = {"role": role, "content": _MID}
        first = {"role": "system", "content": "toolwire-probe-system"}
        shapes = ([first, user1, answer, mid, user2], [user1, answer, mid, user2])
        if all(_in_order(_renders(source, list(s), named), _ANSWER, _MID, _USER2) for s in shapes):
            middle.add(role)
        if _in_order(_renders(source, [mid, user1], named), _MID, _USER1):
            leading.add(role)
    result = {"role": "tool", "tool_call_id": "a1b2c3d4e", "content": "toolwire-probe-result"}
    for as_text in (False, True):
        arguments: Any = {"city": _ARGUMENT}
        if as_text:
            arguments = json.dumps(arguments)
        function = {"name": _CALL, "arguments": arguments}
        call = {"id": "a1b2c3d4e", "type": "function", "function": function}
        for content in ("", None):
            calling = {"role": "assistant", "content": content, "tool_calls": [call]}
            text = _renders(source, [user1, calling, result], named)
            if _CALL in text and _ARGUMENT in text:
                return Accepts(frozenset(middle), frozenset(leading), content, as_text)
    return Accepts(frozenset(middle), frozenset(leading), "")


def accepts(source: str, variables: Mapping[str, str]) -> Accepts:
    """What the template `source` takes, rendered with the tokenizer's named tokens."""
    return _accepts(source, tuple(sorted(variables.items())))


def fit(messages: list[dict[str, Any]], taken: Accepts) -> list[dict[str, Any]]:
    """`messages` (prepared, private) with each one where the template takes it."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []  # folded text waiting for the next user message
    for index, message in enumerate(messages):
        role = message["role"]
        if "content" not in message or (
            role == "assistant" and message.get("tool_calls") and not message["content"]
        ):
            message["content"] = (
                taken.call_content if role == "assistant" and message.get("tool_calls") else ""
            )
        if taken.arguments_text and role == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and not isinstance(function.get("arguments"), str):
                    function["arguments"] = json.dumps(function["arguments"], ensure_ascii=False)
        if role not in INSTRUCTIONS:
            if role == "user" and pending:
                message["content"] = _prepend(pending, message["content"])
                pending = []
            out.append(message)
            continue
        kept = taken.leading if index == 0 else taken.middle
        if role in kept:
            out.append(message)
        elif role == "developer" and "system" in kept:
            out.append({**message, "role": "system"})
        elif any(m["role"] == "user" for m in messages[index + 1 :]):
            pending.append(_text(message["content"]))
        elif any(m["role"] == "user" for m in out):
            last = next(m for m in reversed(out) if m["role"] == "user")
            last["content"] = _append(last["content"], _text(message["content"]))
        elif "system" in taken.leading:
            _into_leading(out, _text(message["content"]))
        else:
            out.append({**message, "role": "user"})
    return out


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _prepend(texts: list[str], content: Any) -> Any:
    if isinstance(content, list):
        return [*({"type": "text", "text": t} for t in texts), *content]
    return "\n\n".join([*texts, content] if content else texts)


def _append(content: Any, text: str) -> Any:
    if isinstance(content, list):
        return [*content, {"type": "text", "text": text}]
    return f"{content}\n\n{text}" if content else text


def _into_leading(out: list[dict[str, Any]], text: str) -> None:
    if out and out[0]["role"] == "system":
        out[0]["content"] = _append(out[0]["content"], text)
    else:
        out.insert(0, {"role": "system", "content": text})
