"""HTTP plumbing every API route shares: bounded bodies, disconnects, ended streams.

Data flow of one request::

    ASGI body --read_json()--> a JSON value (413 past the size bound, 400 if not JSON)
    ChoiceRun.start() ... (the engine accepted the request)
    streaming:      ChoiceRun.steps() --Framer--> bytes --stream()--> the response body
    non-streaming:  unless_disconnected(ChoiceRun.collect()) --Framer.whole()--> one JSON body

Invariants:

* `stream()` always ends with the framer's closing bytes (`data: [DONE]` for Chat
  Completions): a failure of the run arrives as its last step and is framed as the
  API's error event; a failure of the framer itself (a bug) is counted, logged and
  framed the same way.
* A non-streaming request whose client goes away is cancelled: the run's engine
  stream is closed, so the generation stops.
* `Framer.settle()` is awaited once the last step is framed and before its bytes are
  sent (the Responses API stores the finished response there, off the event loop, so
  a client told it completed can continue it at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Iterable
from typing import Any, Protocol, TypeVar

from fastapi import Request

from toolwire.events import Event
from toolwire.nesting import MAX_DEPTH, json_too_deep
from toolwire.server.core.errors import ApiError, failure
from toolwire.server.core.metrics import Metrics
from toolwire.server.core.pipeline import Run, Step

__all__ = ["ClientGone", "Framer", "read_json", "sse", "stream", "unless_disconnected"]

T = TypeVar("T")


#: One encoder for every event: `json.dumps` with options builds a new one per call.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def sse(payload: dict[str, Any], event: str | None = None) -> bytes:
    """One server-sent event carrying `payload` as JSON (with an `event:` name if given)."""
    data = _encode(payload).encode()
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + data + b"\n\n"


async def read_json(http: Request, max_bytes: int) -> Any:
    """The request body as JSON, refusing bodies over `max_bytes` (413) before reading
    them whole; nesting too deep for the decoder is a 400."""
    declared = http.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    chunks: list[bytes] = []
    size = 0
    async for chunk in http.stream():
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(max_bytes)
        chunks.append(chunk)
    return await asyncio.to_thread(_decode, b"".join(chunks))  # megabytes: off the loop


#: The deepest body the decoder is given: well below the interpreter's recursion limit
#: (1000; what a finalizer run at that depth needs stays free), far above what the
#: library accepts (`MAX_DEPTH`), so that a body between the two reaches the field
#: checks and is refused naming the field.
DECODE_DEPTH = 6 * MAX_DEPTH


def _decode(data: bytes) -> Any:
    # The depth is checked before decoding, without recursion: json's C decoder would
    # recurse once per level up to the interpreter's limit, and a collection run at that
    # depth fails every finalizer it calls. Latin-1 keeps every byte where it is, and
    # no byte of a multi-byte UTF-8 character is a bracket, quote or backslash.
    brackets = data.count(b"{") + data.count(b"[")
    if brackets > DECODE_DEPTH and json_too_deep(data.decode("latin-1"), DECODE_DEPTH):
        raise ApiError(
            400, f"the request body is nested deeper than {DECODE_DEPTH} levels", param="body"
        )
    try:
        return json.loads(data)
    except RecursionError:  # the scan above refuses such bodies; kept as a last guard
        raise ApiError(400, "the request body is nested too deeply", param="body") from None
    except ValueError:
        raise ApiError(400, "the request body is not valid JSON", param="body") from None


def _too_large(max_bytes: int) -> ApiError:
    return ApiError(
        413,
        f"the request body is larger than {max_bytes} bytes",
        param="body",
        code="request_too_large",
    )


class ClientGone(Exception):
    """The client closed the connection before the response was ready."""


async def _disconnected(http: Request) -> None:
    while (await http.receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(http: Request, work: Awaitable[T]) -> T:
    """`work`'s result; cancels it and raises `ClientGone` if the client goes away."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(http))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        watch.cancel()
    if task.cancelled() or not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise ClientGone
    return task.result()


class Framer(Protocol):
    """How one API writes one run: as SSE while it streams, or whole as one JSON body.

    One framer per request, over the API's event writer, so a streamed answer and a
    whole one are built by the same code.
    """

    def opening(self) -> Iterable[bytes]:
        """Sent once the engine accepted the request (Chat Completions: the role)."""
        ...

    def step(self, step: Step) -> Iterable[bytes]:
        """The step's events, and the finish when it carries one."""
        ...

    def error(self, error: ApiError) -> Iterable[bytes]:
        """The run ended with `error` after the stream started."""
        ...

    def closing(self) -> Iterable[bytes]:
        """The last bytes of every stream, whatever happened (`data: [DONE]`)."""
        ...

    async def settle(self) -> None:
        """What must be done before the client hears the answer is complete: awaited
        after the finishing step (or `whole`) is framed, before it is sent."""
        ...

    def whole(self, events: list[Event]) -> dict[str, Any]:
        """The non-streamed answer: all events of the finished run, as one JSON body."""
        ...


async def stream(run: Run, framer: Framer, metrics: Metrics) -> AsyncIterator[bytes]:
    """The response body of a started run: always ends with `framer.closing()`.

    One piece (one write to the socket) per step, whatever number of events and
    chunks it holds: the step is everything the engine had delivered, so nothing that
    arrived waits. The last step goes out with the closing bytes.
    """
    last: list[bytes] = []
    try:
        yield b"".join(framer.opening())
        async for step in run.steps():
            if step.error is not None:
                last = [*framer.step(Step(step.events)), *framer.error(step.error)]
                break
            if step.finish_reason is not None:  # a choice's last step: with the closing
                if last:  # (n > 1: an earlier choice's last step goes out now)
                    yield b"".join(last)
                last = list(framer.step(step))
                await framer.settle()  # (what the last step says is stored before it goes)
            else:
                data = b"".join(framer.step(step))
                if data:
                    yield data
    except Exception as exc:  # the framer failed (a bug): still end the stream properly
        metrics.stream_errors.inc()
        await run.aclose()
        last = list(framer.error(failure(exc)))
    yield b"".join([*last, *framer.closing()])
