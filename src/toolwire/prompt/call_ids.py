"""Kimi's call ids across turns: `functions.NAME:IDX`, the same for a call and its result.

Kimi K2 names each call `functions.NAME:IDX` (IDX counts the calls of the conversation)
and reads that id back: the call's head and the tool result's `## Return of ID` must
agree. History from another model or client carries other ids (`call_abc123`), which
a template that prints ids as given renders as they are, and a template that
numbers the calls itself renders beside results that name the old ids.

Data flow::

    template --probe chat, rendered once per template (cached)--> Numbering:
        does it write `functions.NAME:IDX` heads itself, counting across the
        conversation or within each message?
    prepared messages --renumber()--> every call id that is not `functions.NAME:IDX`
        (or, where the template numbers calls itself, every id) becomes the id the
        template writes for that call, and each tool result's `tool_call_id` names
        the new id of the latest call that had its old one

Applied for the `kimi_k2` format, and for any template whose probe shows it writes
Kimi's heads itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from toolwire.errors import PromptError
from toolwire.prompt.accepts import PROBE_CHARS, Accepts, fit
from toolwire.prompt.template import render

__all__ = ["Numbering", "numbering", "renumber"]

_KIMI_ID = re.compile(r"functions\.(.+):(\d+)")
_FIRST, _SECOND = "toolwire_probe_first", "toolwire_probe_second"


@dataclass(frozen=True)
class Numbering:
    """How a template numbers calls."""

    #: The template writes `functions.NAME:IDX` heads whatever ids it is given.
    own: bool
    #: IDX restarts in each assistant message (else it counts the whole conversation).
    per_message: bool


@lru_cache(maxsize=64)
def _numbering(source: str, variables: tuple[tuple[str, str], ...], taken: Accepts) -> Numbering:
    def call(n: int, name: str) -> dict[str, Any]:
        function = {"name": name, "arguments": {}}
        return {"id": f"toolwire-probe-id-{n}", "type": "function", "function": function}

    def result(n: int) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": f"toolwire-probe-id-{n}", "content": f"r{n}"}

    chat: list[dict[str, Any]] = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "tool_calls": [call(1, _FIRST)]},
        result(1),
        {"role": "assistant", "tool_calls": [call(2, _SECOND)]},
        result(2),
        {"role": "user", "content": "q2"},
    ]
    try:
        text = render(
            source,
            fit(chat, taken),
            tools=None,
            add_generation_prompt=True,
            variables=dict(variables),
            max_chars=PROBE_CHARS,
        )
    except PromptError:
        return Numbering(own=False, per_message=False)
    own = f"functions.{_SECOND}:" in text
    return Numbering(own=own, per_message=own and f"functions.{_SECOND}:0" in text)


def numbering(source: str, variables: Mapping[str, str], taken: Accepts) -> Numbering:
    """How the template `source` numbers calls (see the module docstring)."""
    return _numbering(source, tuple(sorted(variables.items())), taken)


def renumber(messages: list[dict[str, Any]], scheme: Numbering) -> None:
    """Give every call the id the template writes for it, and its results the same
    (in place, on prepared messages)."""
    new_of: dict[str, str] = {}
    used: set[str] = set()
    count = 0
    for message in messages:
        if message.get("role") == "assistant" and isinstance(message.get("tool_calls"), list):
            for index, call in enumerate(message["tool_calls"]):
                if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
                    continue
                name = call["function"].get("name")
                old = call.get("id")
                position = index if scheme.per_message else count
                count += 1
                if not scheme.own and isinstance(old, str) and _KIMI_ID.fullmatch(old):
                    new = old
                else:
                    new = f"functions.{name}:{position}"
                    while new in used and not scheme.own:
                        position += 1
                        new = f"functions.{name}:{position}"
                used.add(new)
                call["id"] = new
                if isinstance(old, str):
                    new_of[old] = new
        elif message.get("role") == "tool":
            old = message.get("tool_call_id")
            if isinstance(old, str) and old in new_of:
                message["tool_call_id"] = new_of[old]
