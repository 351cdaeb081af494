"""History calls a template cannot write as calls: rendered as the text the model wrote.

Data flow (the pipeline, before rendering, for every API)::

    neutral messages --continuable()--> the same messages, where an assistant call
                                        whose arguments are not a JSON object is taken
                                        out of `tool_calls` and appended to the
                                        message's text as `{"name": ..., "arguments": ...`

Such a call is one the model did not finish: cut by the token limit while its
arguments streamed (`--stream-tool-arguments`), it is answered and stored as far as it
went (Responses: a `function_call` item with `status: "incomplete"`; Chat Completions:
a call named in `invalid_tool_calls`). Stored, or sent back by a client, it must not
make the next turn a 400 the client did not cause: the templates write a call's
arguments as an object (`tojson`, or iterating its keys), which a cut one is not, and
it never ran. So the model is shown what it wrote of it, as the assistant's text
(isolated like any content: delimiter text in it stays ordinary tokens), after the
message's own text, where the call stood.

The request adapters let only such text through (`fields.arguments`: an object cut
before its end); anything else malformed is already their 400, naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolwire.nesting import json_too_deep

__all__ = ["continuable", "written"]


def _whole(call: Any) -> bool:
    """Whether a call's arguments are an object (or absent): a call a template writes."""
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return True  # not a call this module can mend: the prompt layer names it
    arguments = function.get("arguments")
    if not isinstance(arguments, str) or not arguments:
        return True
    if json_too_deep(arguments):
        return False
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False


def written(call: Mapping[str, Any]) -> str:
    """What the model wrote of a call it did not finish, as text."""
    function = call["function"]
    name = json.dumps(str(function.get("name", "")), ensure_ascii=False)
    return f'{{"name": {name}, "arguments": {function["arguments"]}'


def _append(content: Any, text: str) -> Any:
    if isinstance(content, list):  # text parts
        return [*content, {"type": "text", "text": text}]
    return f"{content}\n{text}" if isinstance(content, str) and content else text


def continuable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each unfinished assistant call rendered as its text (see the
    module docstring); the caller's messages are not changed."""
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") != "assistant" or not isinstance(calls, list):
            out.append(message)
            continue
        cut = [c for c in calls if not _whole(c)]
        if not cut:
            out.append(message)
            continue
        mended = {**message, "tool_calls": [c for c in calls if _whole(c)]}
        if not mended["tool_calls"]:
            del mended["tool_calls"]
        for call in cut:
            mended["content"] = _append(mended.get("content"), written(call))
        out.append(mended)
    return out
