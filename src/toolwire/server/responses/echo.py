"""What a response echoes of its request: bounded, and serialized once.

A Responses object repeats the request's `instructions`, `tools`, `text`,
`tool_choice` and `metadata`, and a stream sends the object three times
(`response.created`, `response.in_progress`, and the last event). Two rules keep that
from costing more than the request itself:

* bounded (`check`, a 400 naming the field, before anything runs): `metadata` to
  OpenAI's limits (at most 16 pairs, keys up to 64 characters, values strings up to
  512), every other echoed field at most `max_bytes` as JSON;
* one copy (`Echo`): those fields are serialized once per request, off the event loop,
  and their JSON text is spliced into each snapshot's event, instead of being
  re-serialized into every one.

Data flow::

    body --check(body, max_bytes)--> ok | FieldError
    writer.response (the request's fields) --Echo.of()--> their JSON, once
    a snapshot event --Echo.sse(event)--> `event: ...` + `data: {...,"response":{
                                          <the changing fields>, <the echoed JSON>}}`
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolwire.server.core.errors import FieldError
from toolwire.server.core.transport import sse

__all__ = [
    "ECHOED",
    "METADATA_KEY_CHARS",
    "METADATA_PAIRS",
    "METADATA_VALUE_CHARS",
    "Echo",
    "check",
]

#: OpenAI's metadata limits.
METADATA_PAIRS = 16
METADATA_KEY_CHARS = 64
METADATA_VALUE_CHARS = 512

#: The request fields a response object repeats that a client can make large.
ECHOED = ("instructions", "tools", "text", "tool_choice", "metadata")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _metadata(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise FieldError(("metadata",), "must be an object of string values")
    if len(value) > METADATA_PAIRS:
        raise FieldError(
            ("metadata",), f"has {len(value)} keys; at most {METADATA_PAIRS} are allowed"
        )
    for key, item in value.items():
        if len(key) > METADATA_KEY_CHARS:
            raise FieldError(
                ("metadata",),
                f"has a key of {len(key)} characters; at most {METADATA_KEY_CHARS} are allowed",
            )
        if not isinstance(item, str):
            raise FieldError(("metadata", key), "must be a string")
        if len(item) > METADATA_VALUE_CHARS:
            raise FieldError(
                ("metadata", key),
                f"is {len(item)} characters long; at most {METADATA_VALUE_CHARS} are allowed",
            )


def check(body: Any, max_bytes: int) -> None:
    """Raise `FieldError` for an echoed field past its bound (see the module docstring)."""
    if not isinstance(body, Mapping):
        return  # the request's own validation says what is wrong
    _metadata(body.get("metadata"))
    for name in ECHOED:
        value = body.get(name)
        if name == "metadata" or value is None:
            continue
        size = len(_json(value).encode("utf-8"))
        if size > max_bytes:
            raise FieldError(
                (name,),
                f"is {size} bytes as JSON; this server echoes at most {max_bytes} "
                "(--max-echo-bytes)",
            )


class Echo:
    """The echoed fields of one response, serialized once."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self._keys = frozenset(fields)
        inner = _json(dict(fields))[1:-1]
        self._tail = ("," + inner if inner else "").encode("utf-8")

    @classmethod
    def of(cls, response: Mapping[str, Any]) -> Echo:
        return cls({key: response[key] for key in ECHOED if key in response})

    def sse(self, event: Mapping[str, Any]) -> bytes:
        """`event` as SSE; a `response` snapshot in it gets the echoed fields' JSON
        spliced in, not serialized again (they equal the request's, by construction)."""
        snapshot = event.get("response")
        if not isinstance(snapshot, Mapping):
            return sse(dict(event), str(event["type"]))
        changing = {key: value for key, value in snapshot.items() if key not in self._keys}
        head = {key: value for key, value in event.items() if key != "response"}
        response = _extended(_json(changing), self._tail)
        data = _extended(_json(head), b',"response":' + response)
        return f"event: {event['type']}\n".encode() + b"data: " + data + b"\n\n"


def _extended(obj: str, tail: bytes) -> bytes:
    """The JSON object `obj` with `tail` (`,"key":value...`) added as its last members."""
    body = obj.encode("utf-8")
    if body == b"{}":
        return b"{" + tail[1:] + b"}"
    return body[:-1] + tail + b"}"
