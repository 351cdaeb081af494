"""Mistral: calls after the `[TOOL_CALLS]` control token.

Sample (tokenizer v11+, as `Mistral-Small-3.2-24B-Instruct-2506.jinja` and
mistral-common's `InstructTokenizerV11` write it; docs/formats.md)::

    [TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}

optionally with `[CALL_ID]a1b2c3d4e` before `[ARGS]` (its text becomes the call's id);
parallel calls repeat `[TOOL_CALLS]`. Before v11 (`Mistral-Nemo-Instruct-2407.jinja`,
tekken v3, SentencePiece v7) the body is a JSON array of call objects::

    [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {...}]

and each object becomes one call. Both are read: a body starting with `[` or `{` is
the array, anything else the v11 form. The arguments are the model's own bytes.
`[TOOL_CALLS]` is a control token (9 in tekken, 5 in SentencePiece v7) that
mistral-common never produces from text, so the format is gated; `[ARGS]` and
`[CALL_ID]`, tokens only from v11 on, are matched inside a call as text otherwise.
Reasoning models (Magistral, `mistralai-Ministral-3-14B-Reasoning-2512.jinja`) think in
`[THINK]`...`[/THINK]`, control tokens from v13 on; older vocabularies can only spell
them, so there they are matched as text (which moves text to reasoning, never a call).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from toolwire.formats import register
from toolwire.formats.spec import CallContext, CallSyntax, Format, Reject, RenderedCall, Shape
from toolwire.syntax.json_calls import JsonCall
from toolwire.syntax.named_json import NamedJson

TOOL_CALLS, ARGS, CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"


def render(calls: Sequence[RenderedCall]) -> str:
    return "".join(
        f"{TOOL_CALLS}{name}{ARGS}{json.dumps(dict(args), ensure_ascii=False)}"
        for name, args in calls
    )


def _head(call_id_mark: str) -> Callable[[str], tuple[str, str | None]]:
    def head(text: str) -> tuple[str, str | None]:
        name, _, call_id = text.partition(call_id_mark)
        name = name.strip()
        if not name or any(c.isspace() for c in name):
            raise Reject("the call's head is not a tool name")
        return name, call_id.strip() or None

    return head


class MistralCall:
    """Reads the first non-space character, then hands the body to the form it opens."""

    def __init__(self, context: CallContext) -> None:
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self.follows = False
        self._context = context
        self._inner: CallSyntax | None = None

    def feed(self, text: str) -> int:
        skipped = 0
        if self._inner is None:
            skipped = len(text) - len(text.lstrip())
            if skipped == len(text):
                return skipped
            context = self._context
            if text[skipped] in "[{":
                self._inner = JsonCall(context, separator=",")
            else:
                head = _head(context.marks[CALL_ID])
                self._inner = NamedJson(
                    context, head_end=context.marks[ARGS], head=head, self_ending=True
                )
        inner = self._inner
        used = skipped + inner.feed(text[skipped:])
        self.name, self.call_id, self.done = inner.name, inner.call_id, inner.done
        self.follows = isinstance(inner, JsonCall) and inner.follows
        return used

    def arguments(self) -> str:
        return self._inner.arguments() if self._inner is not None else ""

    def close(self) -> None:
        if self._inner is None:
            raise Reject("the call is empty")
        self._inner.close()


MISTRAL = register(
    Format(
        name="mistral",
        call=(TOOL_CALLS, None),
        syntax=MistralCall,
        render=render,
        marks=(ARGS, CALL_ID),
        reasoning=("[THINK]", "[/THINK]"),
        # v11+ calls; each call repeats `[TOOL_CALLS]` and its body ends itself.
        grammar=Shape(head=f"{{name}}{ARGS}", separator=""),
    )
)
