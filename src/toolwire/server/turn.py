"""One model turn for any API: the neutral request planned, run, and framed on the wire.

Every API's adapter turns its request body into a `ChatRequest`: messages and tools in
the shapes `render_prompt` and `Parser` read (isolation on for every message, whatever
API it came from), plus the sampling options. From there one path serves every API::

    ChatRequest --start()--> plan() off the event loop (prompt, structural tag)
                             + ChoiceRun (engine, one Parser)
    Turn.prime()   awaits output until the first events (or the end of the output)
    streaming:     Turn.steps() --Framer (one per API)--> bytes --stream()--> the body
    non-streaming: Turn.events() --> the API's writer --> one JSON body

Where a failure lands:

* before any output (refused upstream, timeout while waiting): `prime()` raises
  `EngineError` / `ApiError`, and the route answers with that status (502, 504) in its
  API's error shape, since nothing was sent yet;
* after output started: `steps()` yields what the parser held (released by
  `ChoiceRun` before it re-raises), then raises; `stream()` hands the failure, as an
  `ApiError`, to the framer, which ends the stream in its API's terms. A failure of
  the framer itself (a bug) is logged and framed the same way.

The engine stream is closed when `steps()` ends, however it ends (`aclose()` when the
route never iterates it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import Protocol

from toolwire.backends.base import Engine, EngineError
from toolwire.events import Event
from toolwire.server.errors import ApiError
from toolwire.server.metrics import Metrics
from toolwire.server.pipeline import ChoiceRun, Limits, Step, plan
from toolwire.server.request import ChatRequest

__all__ = ["Framer", "Turn", "failure", "start", "stream"]

log = logging.getLogger("toolwire.server")


def failure(exc: BaseException) -> ApiError:
    """Any exception as the `ApiError` a client is told (a bug is a 500, logged)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, EngineError):
        return ApiError(exc.status, str(exc), type="engine_error")
    log.error("request failed", exc_info=exc)
    return ApiError(500, f"internal error: {type(exc).__name__}", type="server_error")


class Turn:
    """A running turn: the choice's steps, with the first output awaited up front."""

    def __init__(self, run: ChoiceRun) -> None:
        self.run = run
        self._source: AsyncGenerator[Step, None] = run.steps()  # type: ignore[assignment]
        self._primed: list[Step] = []
        self._error: EngineError | ApiError | None = None

    async def prime(self) -> None:
        """Wait for the first events; raises when the engine failed before any output."""
        while True:
            try:
                step = await anext(self._source)
            except StopAsyncIteration:
                return
            except (EngineError, ApiError) as exc:
                if any(s.events for s in self._primed):
                    self._error = exc
                    return
                await self.aclose()
                raise
            self._primed.append(step)
            if step.events or step.finish_reason is not None:
                return

    async def steps(self) -> AsyncIterator[Step]:
        """Every step of the turn; raises `EngineError` / `ApiError` where the run failed."""
        try:
            primed, self._primed = self._primed, []
            for step in primed:
                yield step
            if self._error is not None:
                raise self._error
            async for step in self._source:
                yield step
        finally:
            await self.aclose()

    async def events(self) -> list[Event]:
        """The whole turn's events (non-streaming)."""
        out: list[Event] = []
        async for step in self.steps():
            out += step.events
        return out

    async def aclose(self) -> None:
        await self._source.aclose()

    @property
    def finish_reason(self) -> str:
        """`stop`, `length` or `tool_calls`, once the turn ended."""
        return self.run.finish_reason or "stop"

    @property
    def stop_string(self) -> str | None:
        return self.run.stop_string

    @property
    def prompt_tokens(self) -> int:
        return self.run.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.run.completion_tokens


async def start(engine: Engine, request: ChatRequest, limits: Limits, metrics: Metrics) -> Turn:
    """Plan and start one turn; raises `ApiError` for a request that cannot run."""
    # rendering and grammar checks take milliseconds to seconds: off the event loop
    planned = await asyncio.to_thread(plan, engine, request, limits)
    if planned.grammar_fallback:
        metrics.grammar_fallbacks.labels(planned.grammar_fallback).inc()
        log.warning("grammar fallback: %s", "; ".join(planned.grammar_reasons))
    return Turn(ChoiceRun(engine, planned, limits, metrics))


class Framer(Protocol):
    """How one API writes a turn's steps on the wire."""

    def opening(self) -> Iterable[bytes]:
        """Sent first (Responses: `response.created`; Messages: `message_start`)."""
        ...

    def step(self, step: Step) -> Iterable[bytes]:
        """The step's events, and the end of the output when it carries a finish reason."""
        ...

    def error(self, error: ApiError) -> Iterable[bytes]:
        """The turn failed with `error` after the stream started."""
        ...


async def stream(turn: Turn, framer: Framer, metrics: Metrics) -> AsyncIterator[bytes]:
    """The response body of a primed turn: the framer's bytes, however the turn ends."""
    try:
        for data in framer.opening():
            yield data
        async for step in turn.steps():
            for data in framer.step(step):
                yield data
    except Exception as exc:  # the engine, a timeout, or a bug in the framer
        if not isinstance(exc, EngineError | ApiError):
            metrics.stream_errors.inc()
        await turn.aclose()
        for data in framer.error(failure(exc)):
            yield data
