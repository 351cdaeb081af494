"""One model turn for any API, on the pipeline and stream boundary Chat Completions uses.

Every API's adapter turns its request body into a `ChatRequest`: messages and tools in
the shapes `render_prompt` and `Parser` read (isolation on for every message, whatever
API it came from), plus the sampling options. From there one path serves every API::

    body --adapt() (the API's validation)--> (the API's request, ChatRequest)
         --prepare(): both off the event loop, with plan()--> ChoiceRun (one Parser)
    streaming:     respond_stream(): run.start(), then transport.stream() through the
                   API's Framer (its writer of events as that API's SSE events)
    non-streaming: collect(): run.start() + run.collect(), cancelled if the client goes

Where a failure lands is `ChoiceRun`'s and `transport.stream`'s rule, the same for
every API: before the engine's first delta it is a plain status (502, 504) in the
API's error shape; after, it is the last step, which the framer ends the stream with
(Responses: `response.failed`; Messages: an `error` event).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

from fastapi import Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from toolwire.backends.base import Engine
from toolwire.events import Event
from toolwire.server.metrics import Metrics
from toolwire.server.pipeline import ChoiceRun, Limits, plan
from toolwire.server.request import ChatRequest
from toolwire.server.transport import Framer, stream, unless_disconnected

__all__ = ["collect", "prepare", "respond_stream"]

log = logging.getLogger("toolwire.server")

T = TypeVar("T")

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def prepare(
    engine: Engine, limits: Limits, metrics: Metrics, adapt: Callable[[], tuple[T, ChatRequest]]
) -> tuple[T, ChoiceRun]:
    """Validate (`adapt`) and plan one request off the event loop; the run, not started.

    Raises `ApiError` for a request that cannot run (400 naming the field, 404 model).
    """

    def work() -> tuple[T, ChoiceRun]:
        api_request, chat = adapt()
        planned = plan(engine, chat, limits)
        if planned.grammar_fallback:
            metrics.grammar_fallbacks.labels(planned.grammar_fallback).inc()
            log.warning("grammar fallback: %s", "; ".join(planned.grammar_reasons))
        return api_request, ChoiceRun(engine, planned, limits, metrics)

    return await asyncio.to_thread(work)


async def respond_stream(
    http: Request, run: ChoiceRun, framer: Framer, metrics: Metrics
) -> StreamingResponse:
    """Start the run (a refusal or stall is still a plain status), then stream it."""
    await unless_disconnected(http, run.start())
    return StreamingResponse(
        stream(run, framer, metrics),
        media_type="text/event-stream",
        headers=_SSE_HEADERS,
        background=BackgroundTask(run.aclose),
    )


async def collect(http: Request, run: ChoiceRun) -> list[Event]:
    """The whole run's events; raises its error, or `ClientGone` when the client left."""

    async def whole() -> list[Event]:
        await run.start()
        return await run.collect()

    return await unless_disconnected(http, whole())
