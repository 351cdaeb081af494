"""One model turn, the same for every API: an HTTP body in, the API's answer out.

An API is what differs (`Api`): how its body becomes a request (`adapt`), how a run is
written on its wire (`framer`), what its errors look like (`error_body`) and what it
calls the neutral request's fields (`fields`). Everything else is this one path::

    HTTP body --read_json()--> JSON (413 past the size bound, 400 if not JSON)
      --check_body()--> within the nesting bound, Unicode text only
      --Api.adapt()--> (the API's request, the neutral ChatRequest)   } off the
      --hosted tools: refused (400) or dropped (header, metric)       } event
      --plan()--> Plan: prompt ids (isolation on), the structural tag } loop
      --GrammarService.prepare()--> the tag compiled (cached, one compile per tag,
                                    bounded wait) or served under its fallback
      --ChoiceRun--> engine ids --Parser--> events --stop strings--> steps
      --Api.framer(request, run)--> stream: SSE through transport.stream()
                                    whole:  Framer.whole(events), one JSON body

Every route but `/health*` (and `/metrics`, unless protected) goes through `answer`,
which first checks the caller's key (`core/auth.py`: a 401 in the API's error shape,
or the caller's tenant, which the work then runs as: the Responses store files and
finds responses under it) and opens the request's trace (`core/tracing.py`: the
request span, continued from the client's `traceparent`; the turn adds `grammar`
(compile), `queue`, and, through `TracedFramer`, `first_token`, `parse` and `write`).

Where a failure lands is the same for every API: before the engine's first delta it
is a plain status (400 naming the field, 401, 404, 413, 502, 504) in the API's error
shape (`answer`, the one error wrapper); after, it is the run's last step, which the
framer ends the stream with (Chat: an `error` chunk and `[DONE]`; Responses:
`response.failed`; Messages: an `error` event). A client that goes away is 499. Every
answer is counted in `toolwire_requests_total{route, status}`.

What a request declared and the server does not act on is said, never silent: hosted
tools not offered are named in the `toolwire-hosted-tools-dropped` header and counted
by type (with `Limits.hosted_tools == "refuse"` they are a 400 naming the tool), and
top-level fields no API table names are named in `toolwire-fields-ignored`, logged
and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from toolwire.backends.base import Engine
from toolwire.events import Event
from toolwire.server.core.auth import Keys, as_tenant
from toolwire.server.core.choices import Choices, choice_plans
from toolwire.server.core.errors import ApiError, FieldError, failure, renamed
from toolwire.server.core.fields import check_body
from toolwire.server.core.grammars import GrammarService
from toolwire.server.core.metrics import Metrics
from toolwire.server.core.pipeline import ChoiceRun, Limits, Plan, Run, plan
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.traced import TracedFramer
from toolwire.server.core.tracing import RequestTrace, Tracing
from toolwire.server.core.transport import (
    ClientGone,
    Framer,
    read_json,
    stream,
    unless_disconnected,
)

__all__ = ["HOSTED_HEADER", "IGNORED_HEADER", "Api", "ErrorShape", "Turn"]

log = logging.getLogger("toolwire.server")

R = TypeVar("R")

#: The status counted for a request whose client went away (nginx's convention).
CLIENT_GONE = 499

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
HOSTED_HEADER = "toolwire-hosted-tools-dropped"
IGNORED_HEADER = "toolwire-fields-ignored"


def _header(names: Iterable[str]) -> str:
    """Names as one header value: printable ASCII only (header values are Latin-1),
    each once, at most 2000 characters."""
    shown = [n for n in dict.fromkeys(names) if n.isascii() and n.isprintable()]
    return ", ".join(shown)[:2000]


class ErrorShape(Protocol):
    """How a route's errors look (every `Api` is one)."""

    #: The neutral request's field names as this API's body spells them
    #: (`{"response_format": "text.format"}`), for errors the pipeline raises.
    fields: Mapping[str, str]

    def error_body(self, error: ApiError) -> dict[str, Any]:
        """`error` in this API's shape."""
        ...


class Api(ErrorShape, Protocol[R]):
    """What one API adds to the turn; `R` is its validated request."""

    #: The route of a turn (`POST`), as the metrics count it.
    route: str

    def adapt(self, body: Any, limits: Limits) -> tuple[R, ChatRequest]:
        """Validate a decoded body (blocking; run off the event loop): the API's own
        request, and the neutral request to run. Raises `ApiError` naming the field."""
        ...

    def framer(self, request: R, run: Run) -> Framer:
        """The writer of this request's answer, streamed or whole."""
        ...


class Turn:
    """Runs a turn for any API, on one engine (one per app)."""

    def __init__(
        self,
        engine: Engine,
        limits: Limits,
        metrics: Metrics,
        grammars: GrammarService,
        keys: Keys | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.engine = engine
        self.limits = limits
        self.metrics = metrics
        self.grammars = grammars
        self.keys = keys or Keys()
        self.tracing = tracing or Tracing.off()
        #: `time.monotonic()` when an engine last returned a request's first delta: the
        #: evidence `/health/ready` takes before probing the engine itself.
        self.last_answer: float | None = None

    async def respond(self, api: Api[Any], http: Request) -> Response:
        """The handler of an API's turn route."""
        return await self._answer(api, api.route, http, lambda trace: self._turn(api, http, trace))

    async def answer(
        self,
        api: ErrorShape,
        route: str,
        http: Request,
        work: Callable[[], Awaitable[Response]],
    ) -> Response:
        """`work`'s response, run as the caller's tenant once its key is checked; any
        failure in `api`'s error shape; traced and counted for `route`."""
        return await self._answer(api, route, http, lambda _trace: work())

    async def _answer(
        self,
        api: ErrorShape,
        route: str,
        http: Request,
        work: Callable[[RequestTrace], Awaitable[Response]],
    ) -> Response:
        trace = self.tracing.request(route, http.method, http.headers)
        try:
            with trace.active():
                caller = self.keys.tenant_of(http.headers)
                with as_tenant(caller):
                    response = await work(trace)
        except ClientGone:
            response = Response(status_code=CLIENT_GONE)
        except Exception as exc:  # ApiError, EngineError, or a bug (a 500, logged)
            error = renamed(failure(exc), api.fields)
            headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
            response = JSONResponse(
                api.error_body(error), status_code=error.status, headers=headers
            )
        self.metrics.requests.labels(route, str(response.status_code)).inc()
        if not isinstance(response, StreamingResponse):
            trace.end(response.status_code)  # a stream ends its trace when it ends
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
            if self.limits.hosted_tools == "refuse" and chat.hosted_tools:
                hosted = chat.hosted_tools[0]
                raise FieldError(
                    hosted.path,
                    f"is a hosted tool ({hosted.type!r}) that this server cannot run "
                    "(it refuses them: --hosted-tools refuse)",
                )
            return request, plan(self.engine, chat, self.limits)

        return await asyncio.to_thread(work)

    def _said(self, route: str, chat: ChatRequest) -> dict[str, str]:
        """The headers naming what the request declared and is not acted on; counted."""
        headers: dict[str, str] = {}
        if chat.hosted_tools:
            kinds = [tool.type for tool in chat.hosted_tools]
            for kind in kinds:
                self.metrics.hosted_tools.labels(kind).inc()
            headers[HOSTED_HEADER] = _header(kinds)
        if chat.unknown_fields:
            self.metrics.unknown_fields.labels(route).inc(len(chat.unknown_fields))
            log.warning("%s: fields not acted on: %r", route, list(chat.unknown_fields))
            headers[IGNORED_HEADER] = _header(chat.unknown_fields)
        return headers

    async def _turn(self, api: Api[Any], http: Request, trace: RequestTrace) -> Response:
        request, planned = await self.plan(await self.read(http), api.adapt)
        said = self._said(api.route, planned.request)
        compiling = (
            trace.phase("grammar", stage="compile")
            if planned.generation.structural_tag is not None
            else contextlib.nullcontext()
        )
        with compiling:
            planned = await self.grammars.prepare(planned)
        if planned.grammar_fallback:
            self.metrics.grammar_fallbacks.labels(planned.grammar_fallback).inc()
            log.warning("grammar fallback: %s", "; ".join(planned.grammar_reasons))
            trace.set(grammar_fallback=planned.grammar_fallback)
        n = planned.request.n
        run: Run
        if n == 1:
            run = ChoiceRun(self.engine, planned, self.limits, self.metrics)
        else:
            run = Choices(self.engine, choice_plans(planned, n), self.limits, self.metrics)
        framer = api.framer(request, run)
        traced = TracedFramer(framer, trace, run) if trace.on else None
        if traced is not None:
            framer = traced
            trace.set(model=self.engine.model, stream=planned.request.stream)

        async def start() -> None:
            with trace.phase("queue"):
                await run.start()
            self.last_answer = time.monotonic()
            if traced is not None:
                traced.started()

        if planned.request.stream:
            # nothing is sent before the engine accepted the request: a refusal or a
            # stall is still a plain status
            await unless_disconnected(http, start())
            body = stream(run, framer, self.metrics)
            return StreamingResponse(
                body if traced is None else traced.body(body),
                media_type="text/event-stream",
                headers={**_SSE_HEADERS, **said},
                background=BackgroundTask(run.aclose),
            )

        async def whole() -> list[Event]:
            await start()
            return await run.collect()

        answer = framer.whole(await unless_disconnected(http, whole()))
        await framer.settle()
        response = JSONResponse(answer, headers=said)
        if traced is not None:
            traced.finish(response.status_code)
        return response
