"""A turn's answer, observed for its trace: the `first_token`, `parse` and `write` spans.

`TracedFramer` wraps the API's framer when the request is traced (never otherwise, so
an untraced answer runs exactly the framer's code) and notes, in wall-clock
nanoseconds::

    first ids      when the engine's first delta arrived (`started()`, after `queue`)
    first output   the first step whose events were framed (bytes handed to the client)
    end of output  the step with the finish reason, or the error that ended the run
    first / last   bytes framed, and the time spent framing (`toolwire.write.seconds`)

`finish(status)` records the three spans from those marks (with the run's parser time
and tokens) and ends the request span.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from toolwire.events import Event
from toolwire.server.core.errors import ApiError
from toolwire.server.core.pipeline import Run, Step
from toolwire.server.core.tracing import RequestTrace
from toolwire.server.core.transport import Framer

__all__ = ["TracedFramer"]


class TracedFramer:
    """`Framer` around the API's framer, timing it for the trace."""

    def __init__(self, inner: Framer, trace: RequestTrace, run: Run) -> None:
        self._inner = inner
        self._trace = trace
        self._run = run
        self._first_ids: int | None = None
        self._first_output: int | None = None
        self._end_of_output: int | None = None
        self._first_bytes: int | None = None
        self._last_bytes: int | None = None
        self._busy = 0.0

    def started(self) -> None:
        """The engine's first delta arrived."""
        self._first_ids = time.time_ns()

    def _timed(self, work: Callable[..., Iterable[bytes]], *args: Any) -> list[bytes]:
        begun = time.perf_counter()
        out = list(work(*args))
        self._busy += time.perf_counter() - begun
        now = time.time_ns()
        if self._first_bytes is None:
            self._first_bytes = now
        self._last_bytes = now
        return out

    def opening(self) -> list[bytes]:
        return self._timed(self._inner.opening)

    def step(self, step: Step) -> list[bytes]:
        out = self._timed(self._inner.step, step)
        if step.events and self._first_output is None:
            self._first_output = self._last_bytes
        if step.finish_reason is not None:
            self._end_of_output = self._last_bytes
        return out

    def error(self, error: ApiError) -> list[bytes]:
        out = self._timed(self._inner.error, error)
        self._end_of_output = self._end_of_output or self._last_bytes
        self._trace.set(error=error.message[:200])
        return out

    def closing(self) -> list[bytes]:
        return self._timed(self._inner.closing)

    async def settle(self) -> None:
        await self._inner.settle()

    def whole(self, events: list[Event]) -> dict[str, Any]:
        self._end_of_output = time.time_ns()
        begun = time.perf_counter()
        body = self._inner.whole(events)
        self._busy += time.perf_counter() - begun
        self._first_bytes = self._last_bytes = self._first_output = time.time_ns()
        return body

    async def body(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """A streamed body that ends the trace when it ends (finished, failed or cut)."""
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            self.finish(200)

    def finish(self, status: int) -> None:
        """Record `first_token`, `parse` and `write`; end the request span."""
        run, trace = self._run, self._trace
        now = time.time_ns()
        first = self._first_ids
        if first is not None:
            trace.record("first_token", first, self._first_output or now)
            trace.record(
                "parse",
                first,
                self._end_of_output or now,
                **{"parse.seconds": round(run.parse_seconds, 6)},
            )
        if self._first_bytes is not None:
            trace.record(
                "write",
                self._first_bytes,
                self._last_bytes or now,
                **{"write.seconds": round(self._busy, 6)},
            )
        trace.set(
            **{
                "gen_ai.usage.input_tokens": run.prompt_tokens,
                "gen_ai.usage.output_tokens": run.completion_tokens,
                "finish_reason": run.finish_reason,
            }
        )
        trace.end(status)
