"""The OpenAI Responses routes: status codes, SSE framing and the response store.

Routes::

    POST /v1/responses        validate -> history (previous_response_id) -> Turn
                              -> ResponseWriter -> JSON or SSE; stored when `store`
    GET  /v1/responses/{id}   a stored response

Errors use OpenAI's shape (`server/errors.py`): 400 naming the field, 404 for an
unknown model or response id, 502/504 when the engine fails or times out before any
output. After the stream started, a failure closes the open item and ends the stream
with `response.failed` (the output so far kept in it). No parsing happens here.
"""

from __future__ import annotations

import json
import time

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from toolwire.backends.base import Engine
from toolwire.server.errors import ApiError, error_body
from toolwire.server.metrics import Metrics
from toolwire.server.pipeline import Limits, Step
from toolwire.server.responses import ResponseWriter, new_id, output_items
from toolwire.server.responses_request import ResponsesRequest, parse_responses
from toolwire.server.responses_store import ResponseStore
from toolwire.server.sse import sse
from toolwire.server.turn import Turn, failure, start, stream

__all__ = ["add_responses_routes"]

_ROUTE = "/v1/responses"
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class ResponsesFramer:
    """The Responses API on the wire: named SSE events; stored once it completes."""

    def __init__(
        self,
        writer: ResponseWriter,
        turn: Turn,
        request: ResponsesRequest,
        store: ResponseStore,
    ) -> None:
        self._writer = writer
        self._turn = turn
        self._request = request
        self._store = store

    def opening(self) -> list[bytes]:
        return [sse(event, event["type"]) for event in self._writer.start()]

    def step(self, step: Step) -> list[bytes]:
        events = self._writer.feed(step.events)
        if step.finish_reason is not None:
            turn = self._turn
            events += self._writer.finish(
                step.finish_reason, turn.prompt_tokens, turn.completion_tokens
            )
            keep(self._store, self._request, self._writer)
        return [sse(event, event["type"]) for event in events]

    def error(self, error: ApiError) -> list[bytes]:
        code = "timeout" if error.code == "timeout" else "server_error"
        turn = self._turn
        events = self._writer.fail(error.message, code, turn.prompt_tokens, turn.completion_tokens)
        return [sse(event, event["type"]) for event in events]


def keep(store: ResponseStore, request: ResponsesRequest, writer: ResponseWriter) -> None:
    """Store a finished response (and its turn's items) when the request asked to."""
    if request.store and writer.response["status"] in ("completed", "incomplete"):
        items = [*request.items, *output_items(writer.output)]
        store.put(writer.response, items, request.previous_response_id)


def add_responses_routes(
    app: FastAPI, engine: Engine, limits: Limits, metrics: Metrics, store: ResponseStore
) -> None:
    """Serve the Responses API on `app`."""

    async def create(http: Request) -> Response:
        try:
            body = json.loads(await http.body())
        except ValueError:
            raise ApiError(400, "the request body is not valid JSON", param="body") from None
        request = parse_responses(body)
        history = []
        if request.previous_response_id is not None:
            history = store.history(request.previous_response_id)
        turn = await start(engine, request.chat(history), limits, metrics)
        writer = ResponseWriter(request, new_id("resp"), engine.model, int(time.time()))
        await turn.prime()  # a failure before any output is an HTTP status
        if request.stream:
            framer = ResponsesFramer(writer, turn, request, store)
            return StreamingResponse(
                stream(turn, framer, metrics), media_type="text/event-stream", headers=_SSE_HEADERS
            )
        writer.feed(await turn.events())
        writer.finish(turn.finish_reason, turn.prompt_tokens, turn.completion_tokens)
        keep(store, request, writer)
        return JSONResponse(writer.response)

    @app.post(_ROUTE)
    async def responses(http: Request) -> Response:
        try:
            response = await create(http)
        except Exception as exc:  # ApiError, EngineError, or a bug: OpenAI's shape
            error = failure(exc)
            response = JSONResponse(error.body(), status_code=error.status)
        metrics.requests.labels(_ROUTE, str(response.status_code)).inc()
        return response

    @app.get(_ROUTE + "/{response_id}")
    async def retrieve(response_id: str) -> Response:
        found = store.get(response_id)
        if found is None:
            message = f"no stored response with id {response_id!r}"
            response = JSONResponse(error_body(message, param="response_id"), status_code=404)
        else:
            response = JSONResponse(found)
        metrics.requests.labels(_ROUTE + "/{id}", str(response.status_code)).inc()
        return response
