"""The one place events become Anthropic Messages objects: SSE events and the message.

Data flow::

    parser events --Segmenter--> segments --MessageWriter.feed()--> (event name, payload)
    end of output --MessageWriter.finish()--> message_delta, message_stop; `.message`

Non-streaming runs the same writer over all events and returns its final `message`, so
a streamed message and a whole one are the same object by construction.

Mapping, per segment (see `segments`), with block indexes 0, 1, 2... in order:

- reasoning -> a `thinking` block (`thinking_delta`s; `signature` is "": this server
  signs nothing, and ignores signatures it is sent); with `omit_thinking`
  (`thinking.display: omitted`) the block comes without its text, as Anthropic's;
- text -> a `text` block (`text_delta`s);
- call -> a `tool_use` block (the parser's call id, the name, `input` {} at the start,
  `input_json_delta`s carrying the argument text; the final block's `input` is the
  parsed object). A held call's block starts when the parser releases the call, whole.

The stream is `message_start`, `ping`, then per block `content_block_start`,
`content_block_delta`*, `content_block_stop`, then `message_delta` (stop_reason,
stop_sequence, output usage) and `message_stop`. A failure mid-stream stops the open
block and ends with an `error` event in Anthropic's shape.

`stop_reason`: `max_tokens` when the output was cut, `tool_use` when calls were made,
`stop_sequence` (with the sequence) when one matched, else `end_turn`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from typing import Any

from toolwire.events import Event
from toolwire.server.core.segments import Closed, Grew, Opened, Segmenter

__all__ = ["MessageWriter", "new_message_id", "stop_reason"]

Sse = tuple[str, dict[str, Any]]


def new_message_id() -> str:
    return f"msg_{secrets.token_hex(12)}"


def stop_reason(finish_reason: str, stop_string: str | None) -> str:
    if finish_reason == "length":
        return "max_tokens"
    if finish_reason == "tool_calls":
        return "tool_use"
    return "stop_sequence" if stop_string is not None else "end_turn"


def _input(arguments: str) -> Any:
    """A call's arguments as an object; a call cut while streaming arguments gives {}."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class MessageWriter:
    """Builds one message, streamed or whole, from the events of one turn."""

    def __init__(
        self, message_id: str, model: str, prompt_tokens: int, *, omit_thinking: bool = False
    ) -> None:
        #: `thinking.display: omitted`: thinking blocks come without their text.
        self._omit_thinking = omit_thinking
        self._segmenter = Segmenter()
        self._block: dict[str, Any] | None = None
        self._text: list[str] = []
        self.content: list[dict[str, Any]] = []
        self._usage: dict[str, Any] = {
            "input_tokens": prompt_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 0,
        }
        self.message: dict[str, Any] = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": dict(self._usage),
        }

    def start(self) -> list[Sse]:
        """`message_start` (no content yet) and a `ping`."""
        return [
            ("message_start", {"type": "message_start", "message": dict(self.message)}),
            ("ping", {"type": "ping"}),
        ]

    def feed(self, events: Iterable[Event]) -> list[Sse]:
        out: list[Sse] = []
        for item in self._segmenter.feed(events):
            if isinstance(item, Opened):
                out.append(self._open(item))
            elif isinstance(item, Grew):
                if not (self._omit_thinking and self._block_type() == "thinking"):
                    out.append(self._grow(item.text))
            elif isinstance(item, Closed):
                out.append(self._close())
        return out

    def _block_type(self) -> str | None:
        return None if self._block is None else str(self._block["type"])

    def _open(self, opened: Opened) -> Sse:
        self._text = []
        if opened.kind == "call":
            assert opened.call is not None
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": opened.call.id,
                "name": opened.call.name,
                "input": {},
            }
        elif opened.kind == "text":
            block = {"type": "text", "text": ""}
        else:
            block = {"type": "thinking", "thinking": "", "signature": ""}
        self._block = block
        payload = {
            "type": "content_block_start",
            "index": len(self.content),
            "content_block": block,
        }
        return ("content_block_start", payload)

    def _grow(self, text: str) -> Sse:
        assert self._block is not None
        self._text.append(text)
        kind = self._block["type"]
        if kind == "tool_use":
            delta = {"type": "input_json_delta", "partial_json": text}
        elif kind == "text":
            delta = {"type": "text_delta", "text": text}
        else:
            delta = {"type": "thinking_delta", "thinking": text}
        payload = {"type": "content_block_delta", "index": len(self.content), "delta": delta}
        return ("content_block_delta", payload)

    def _close(self) -> Sse:
        block = self._block
        assert block is not None
        text = "".join(self._text)
        if block["type"] == "tool_use":
            done = {**block, "input": _input(text)}
        elif block["type"] == "text":
            done = {**block, "text": text}
        else:
            done = {**block, "thinking": text}
        payload = {"type": "content_block_stop", "index": len(self.content)}
        self.content.append(done)
        self._block = None
        return ("content_block_stop", payload)

    def _end(self) -> list[Sse]:
        return [self._close()] if self._segmenter.finish() else []

    def finish(self, finish_reason: str, stop_string: str | None, output_tokens: int) -> list[Sse]:
        """End of output: stop the open block; `message_delta` and `message_stop`."""
        out = self._end()
        reason = stop_reason(finish_reason, stop_string)
        sequence = stop_string if reason == "stop_sequence" else None
        self._usage["output_tokens"] = output_tokens
        self.message = {
            **self.message,
            "content": list(self.content),
            "stop_reason": reason,
            "stop_sequence": sequence,
            "usage": dict(self._usage),
        }
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": sequence},
            "usage": {"output_tokens": output_tokens},
        }
        out += [("message_delta", delta), ("message_stop", {"type": "message_stop"})]
        return out

    def fail(self, error: dict[str, Any]) -> list[Sse]:
        """A failure mid-stream: stop the open block, then an `error` event."""
        return [*self._end(), ("error", error)]
