"""One model turn, the same for every API: an HTTP body in, the API's answer out.

An API is what differs (`Api`): how its body becomes a request (`adapt`), how a run is
written on its wire (`framer`), what its errors look like (`error_body`) and what it
calls the neutral request's fields (`fields`). Everything else is this one path::

    HTTP body --read_json()--> JSON (413 past the size bound, 400 if not JSON)
      --check_body()--> within the nesting bound, Unicode text only
      --Api.adapt()--> (the API's request, the neutral ChatRequest)   } off the
      --plan()--> Plan: prompt ids (isolation on), the structural tag } event loop
      --GrammarService.prepare()--> the tag compiled (cached, one compile per tag,
                                    bounded wait) or served under its fallback
      --ChoiceRun--> engine ids --Parser--> events --stop strings--> steps
      --Api.framer(request, run)--> stream: SSE through transport.stream()
                                    whole:  Framer.whole(events), one JSON body

Where a failure lands is the same for every API: before the engine's first delta it
is a plain status (400 naming the field, 404, 413, 502, 504) in the API's error shape
(`answer`, the one error wrapper); after, it is the run's last step, which the framer
ends the stream with (Chat: an `error` chunk and `[DONE]`; Responses:
`response.failed`; Messages: an `error` event). A client that goes away is 499. Every
answer is counted in `toolwire_requests_total{route, status}`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from toolwire.backends.base import Engine
from toolwire.events import Event
from toolwire.server.core.errors import ApiError, failure, renamed
from toolwire.server.core.fields import check_body
from toolwire.server.core.grammars import GrammarService
from toolwire.server.core.metrics import Metrics
from toolwire.server.core.pipeline import ChoiceRun, Limits, Plan, plan
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.transport import (
    ClientGone,
    Framer,
    read_json,
    stream,
    unless_disconnected,
)

__all__ = ["Api", "Turn"]

log = logging.getLogger("toolwire.server")

R = TypeVar("R")

#: The status counted for a request whose client went away (nginx's convention).
CLIENT_GONE = 499

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class Api(Protocol[R]):
    """What one API adds to the turn; `R` is its validated request."""

    #: The route of a turn (`POST`), as the metrics count it.
    route: str
    #: The neutral request's field names as this API's body spells them
    #: (`{"response_format": "text.format"}`), for errors the pipeline raises.
    fields: Mapping[str, str]

    def adapt(self, body: Any, limits: Limits) -> tuple[R, ChatRequest]:
        """Validate a decoded body (blocking; run off the event loop): the API's own
        request, and the neutral request to run. Raises `ApiError` naming the field."""
        ...

    def framer(self, request: R, run: ChoiceRun) -> Framer:
        """The writer of this request's answer, streamed or whole."""
        ...

    def error_body(self, error: ApiError) -> dict[str, Any]:
        """`error` in this API's shape."""
        ...


class Turn:
    """Runs a turn for any API, on one engine (one per app)."""

    def __init__(
        self, engine: Engine, limits: Limits, metrics: Metrics, grammars: GrammarService
    ) -> None:
        self.engine = engine
        self.limits = limits
        self.metrics = metrics
        self.grammars = grammars

    async def respond(self, api: Api[Any], http: Request) -> Response:
        """The handler of an API's turn route."""
        return await self.answer(api, api.route, lambda: self._turn(api, http))

    async def answer(
        self, api: Api[Any], route: str, work: Callable[[], Awaitable[Response]]
    ) -> Response:
        """`work`'s response; any failure in `api`'s error shape; counted for `route`."""
        try:
            response = await work()
        except ClientGone:
            response = Response(status_code=CLIENT_GONE)
        except Exception as exc:  # ApiError, EngineError, or a bug (a 500, logged)
            error = renamed(failure(exc), api.fields)
            response = JSONResponse(api.error_body(error), status_code=error.status)
        self.metrics.requests.labels(route, str(response.status_code)).inc()
        return response

    async def read(self, http: Request) -> Any:
        """The request's JSON body (413 past the size bound, 400 if it is not JSON)."""
        return await read_json(http, self.limits.max_body_bytes)

    async def plan(
        self, body: Any, adapt: Callable[[Any, Limits], tuple[R, ChatRequest]]
    ) -> tuple[R, Plan]:
        """Bound, validate (`adapt`) and plan a body, off the event loop: checks,
        rendering and grammar building take milliseconds to seconds."""

        def work() -> tuple[R, Plan]:
            check_body(body, self.limits.max_nesting)
            request, chat = adapt(body, self.limits)
            return request, plan(self.engine, chat, self.limits)

        return await asyncio.to_thread(work)

    async def _turn(self, api: Api[Any], http: Request) -> Response:
        request, planned = await self.plan(await self.read(http), api.adapt)
        planned = await self.grammars.prepare(planned)
        if planned.grammar_fallback:
            self.metrics.grammar_fallbacks.labels(planned.grammar_fallback).inc()
            log.warning("grammar fallback: %s", "; ".join(planned.grammar_reasons))
        run = ChoiceRun(self.engine, planned, self.limits, self.metrics)
        framer = api.framer(request, run)
        if planned.request.stream:
            # nothing is sent before the engine accepted the request: a refusal or a
            # stall is still a plain status
            await unless_disconnected(http, run.start())
            return StreamingResponse(
                stream(run, framer, self.metrics),
                media_type="text/event-stream",
                headers=_SSE_HEADERS,
                background=BackgroundTask(run.aclose),
            )

        async def whole() -> list[Event]:
            await run.start()
            return await run.collect()

        return JSONResponse(framer.whole(await unless_disconnected(http, whole())))
