"""The OpenAI Responses API on the shared turn: its adapter, framer and the store.

Routes::

    POST   /v1/responses        echo.check + parse_responses + history
                                (previous_response_id, from the store) -> turn ->
                                ResponsesFramer -> JSON or SSE; stored when `store`
    GET    /v1/responses/{id}   a stored response
    DELETE /v1/responses/{id}   forget one

The store is the app's (`create_app(store=...)`, `store.py`); every call to it runs
off the event loop, as the caller's tenant (`core/auth.py`), so another key's response
is a 404 on GET and DELETE, and a 404 `previous_response_not_found` as a
`previous_response_id`, like an id that never existed. The adapter reads a
conversation's history from it; the framer writes the finished response to it in
`settle()`, before the client is sent the last event (so the client can continue it at
once, on any worker or replica that shares the store). A store that fails to write is
logged and counted (`toolwire_store_errors_total`): the answer is still delivered.

The echoed request fields are bounded and serialized once (`echo.py`). Errors use
OpenAI's shape (`core/errors.py`), the pipeline's `response_format` named
`text.format` and its `messages` `input`. After the stream started, a failure closes
the open item and ends the stream with `response.failed` (the output so far kept in
it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import Counter

from toolwire.events import Event
from toolwire.server.core.auth import tenant
from toolwire.server.core.errors import ApiError, openai_error
from toolwire.server.core.pipeline import Limits, Run, Step
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.turn import Turn
from toolwire.server.responses import echo
from toolwire.server.responses.request import ResponsesRequest, parse_responses
from toolwire.server.responses.store import ResponseStore, encode
from toolwire.server.responses.writer import ResponseWriter, new_id, output_items

__all__ = ["Admitted", "ResponsesApi", "ResponsesFramer", "add_routes"]

log = logging.getLogger("toolwire.server")


@dataclass(frozen=True)
class Admitted:
    """A Responses request as the turn runs it: validated, its caller, its echo."""

    request: ResponsesRequest
    #: The caller's tenant: whose store the response goes to.
    tenant: str
    #: The echoed request fields, serialized once.
    echo: echo.Echo


class ResponsesFramer:
    """The Responses API on the wire: named SSE events; stored once it completes."""

    def __init__(
        self, admitted: Admitted, run: Run, store: ResponseStore, failures: Counter
    ) -> None:
        request = admitted.request
        self._writer = ResponseWriter(request, new_id("resp"), request.model, int(time.time()))
        self._run = run
        self._request = request
        self._tenant = admitted.tenant
        self._echo = admitted.echo
        self._store = store
        self._failures = failures
        self._pending: tuple[dict[str, Any], list[dict[str, Any]]] | None = None

    def _sse(self, events: list[dict[str, Any]]) -> list[bytes]:
        return [self._echo.sse(event) for event in events]

    def opening(self) -> list[bytes]:
        return self._sse(self._writer.start())

    def step(self, step: Step) -> list[bytes]:
        events = self._writer.feed(step.events)
        if step.finish_reason is not None:
            events += self._finish(step.finish_reason)
        return self._sse(events)

    def error(self, error: ApiError) -> list[bytes]:
        code = "timeout" if error.code == "timeout" else "server_error"
        run = self._run
        events = self._writer.fail(error.message, code, run.prompt_tokens, run.completion_tokens)
        return self._sse(events)

    def closing(self) -> list[bytes]:
        return []  # the Responses stream ends with its last event, no [DONE]

    def whole(self, events: list[Event]) -> dict[str, Any]:
        assert self._run.finish_reason is not None
        self._writer.feed(events)
        self._finish(self._run.finish_reason)
        return self._writer.response

    def _finish(self, finish_reason: str) -> list[dict[str, Any]]:
        """The last events; the finished response kept for `settle`, when the request
        asked for it to be stored."""
        run, writer, request = self._run, self._writer, self._request
        events = writer.finish(finish_reason, run.prompt_tokens, run.completion_tokens)
        if request.store:
            self._pending = (writer.response, [*request.items, *output_items(writer.output)])
        return events

    async def settle(self) -> None:
        """Store the finished response (off the event loop) before the client hears of it."""
        pending, self._pending = self._pending, None
        if pending is not None:
            await asyncio.to_thread(self._keep, *pending)

    def _keep(self, response: dict[str, Any], items: list[dict[str, Any]]) -> None:
        record = encode(response, items, self._request.previous_response_id)
        try:
            kept = self._store.put(self._tenant, record)
        except Exception as exc:  # the store's own errors (a file, a connection)
            self._failures.inc()
            log.warning("response %s not stored: %s: %s", record.id, type(exc).__name__, exc)
            return
        if not kept:
            log.warning(
                "response %s not stored: %d bytes, over the store's bound per key",
                record.id,
                record.size,
            )


class ResponsesApi:
    """The Responses API, as the turn runs it, over `store`."""

    route = "/v1/responses"
    fields: Mapping[str, str] = {"response_format": "text.format", "messages": "input"}

    def __init__(self, store: ResponseStore, failures: Counter) -> None:
        self.store = store
        self._failures = failures

    def adapt(self, body: Any, limits: Limits) -> tuple[Admitted, ChatRequest]:
        echo.check(body, limits.max_echo_bytes)
        request = parse_responses(body, max_tools=limits.max_tools)
        owner = tenant()  # run off the event loop, in the request's copied context
        history = []
        if request.previous_response_id is not None:
            history = self.store.history(owner, request.previous_response_id)
        echoed = echo.Echo.of(ResponseWriter(request, "", request.model, 0).response)
        return Admitted(request, owner, echoed), request.chat(history)

    def framer(self, admitted: Admitted, run: Run) -> ResponsesFramer:
        return ResponsesFramer(admitted, run, self.store, self._failures)

    def error_body(self, error: ApiError) -> dict[str, Any]:
        return openai_error(error)


def _not_found(response_id: str) -> ApiError:
    return ApiError(404, f"no stored response with id {response_id!r}", param="response_id")


def add_routes(app: FastAPI, turn: Turn, store: ResponseStore) -> None:
    """Serve the Responses API on `app`, keeping responses in `store`."""
    failures = Counter(
        "toolwire_store_errors",
        "Finished responses the store failed to keep",
        registry=turn.metrics.registry,
    )
    api = ResponsesApi(store, failures)
    one = api.route + "/{id}"

    @app.post(api.route)
    async def responses(http: Request) -> Response:
        return await turn.respond(api, http)

    @app.get(api.route + "/{response_id}")
    async def retrieve(response_id: str, http: Request) -> Response:
        async def work() -> Response:
            found = await asyncio.to_thread(store.get, tenant(), response_id)
            if found is None:
                raise _not_found(response_id)
            return JSONResponse(found)

        return await turn.answer(api, one, http, work)

    @app.delete(api.route + "/{response_id}")
    async def delete(response_id: str, http: Request) -> Response:
        async def work() -> Response:
            if not await asyncio.to_thread(store.delete, tenant(), response_id):
                raise _not_found(response_id)
            return JSONResponse({"id": response_id, "object": "response", "deleted": True})

        return await turn.answer(api, one, http, work)
