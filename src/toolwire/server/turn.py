"""One model turn for any API: the neutral request planned, run, and its failures placed.

Every API's adapter turns its request body into a `ChatRequest`: messages and tools in
the shapes `render_prompt` and `Parser` read (isolation on for every message, whatever
API it came from), plus the sampling options. From there one path serves every API::

    ChatRequest --start()--> plan() (prompt, structural tag) + ChoiceRun (engine, Parser)
    Turn.prime()  awaits output until the first events (or the end of the output)
    Turn.steps()  the primed steps, then the rest, as the engine produces them

Where a failure lands:

* before any output (refused upstream, timeout while waiting): `prime()` raises
  `EngineError` / `ApiError`, and the route answers with that status (502, 504) in its
  API's error shape, since nothing was sent yet;
* after output started: `steps()` yields what the parser held (released by
  `ChoiceRun` before it re-raises), then raises; the route ends its stream with its
  API's error event.

The engine stream is closed when `steps()` ends, however it ends (`aclose()` when the
route never iterates it).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator

from toolwire.backends.base import Engine, EngineError
from toolwire.events import Event
from toolwire.server.errors import ApiError
from toolwire.server.metrics import Metrics
from toolwire.server.pipeline import ChoiceRun, Limits, Step, plan
from toolwire.server.request import ChatRequest

__all__ = ["Turn", "start"]

log = logging.getLogger("toolwire.server")


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


def start(engine: Engine, request: ChatRequest, limits: Limits, metrics: Metrics) -> Turn:
    """Plan and start one turn; raises `ApiError` for a request that cannot run."""
    planned = plan(engine, request, limits)
    if planned.grammar_fallback:
        metrics.grammar_fallbacks.labels(planned.grammar_fallback).inc()
        log.warning("grammar fallback: %s", "; ".join(planned.grammar_reasons))
    return Turn(ChoiceRun(engine, planned, limits, metrics))
