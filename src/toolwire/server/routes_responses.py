"""The OpenAI Responses routes: status codes, SSE framing and the response store.

Routes::

    POST /v1/responses        validate + history (previous_response_id) -> turn.prepare
                              -> ChoiceRun -> ResponseWriter -> JSON or SSE; stored
                              when `store`
    GET  /v1/responses/{id}   a stored response

Errors use OpenAI's shape (`server/errors.py`): 400 naming the field, 404 for an
unknown model or response id, 413 for a body over the bound, 502/504 when the engine
fails or stalls before its first token. After the stream started, a failure closes
the open item and ends the stream with `response.failed` (the output so far kept in
it). A client that goes away is counted as 499. No parsing happens here.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from toolwire.backends.base import Engine
from toolwire.server.errors import ApiError, error_body
from toolwire.server.metrics import Metrics
from toolwire.server.pipeline import ChoiceRun, Limits, Step, failure
from toolwire.server.request import ChatRequest, check_body
from toolwire.server.responses import ResponseWriter, new_id, output_items
from toolwire.server.responses_request import ResponsesRequest, parse_responses
from toolwire.server.responses_store import ResponseStore
from toolwire.server.transport import ClientGone, read_json, sse
from toolwire.server.turn import collect, prepare, respond_stream

__all__ = ["ResponsesFramer", "add_responses_routes"]

_ROUTE = "/v1/responses"
#: The status counted for a request whose client went away (nginx's convention).
_CLIENT_GONE = 499


class ResponsesFramer:
    """The Responses API on the wire: named SSE events; stored once it completes."""

    def __init__(
        self,
        writer: ResponseWriter,
        run: ChoiceRun,
        request: ResponsesRequest,
        store: ResponseStore,
    ) -> None:
        self._writer = writer
        self._run = run
        self._request = request
        self._store = store

    def opening(self) -> list[bytes]:
        return [sse(event, event["type"]) for event in self._writer.start()]

    def step(self, step: Step) -> list[bytes]:
        events = self._writer.feed(step.events)
        if step.finish_reason is not None:
            run = self._run
            events += self._writer.finish(
                step.finish_reason, run.prompt_tokens, run.completion_tokens
            )
            keep(self._store, self._request, self._writer)
        return [sse(event, event["type"]) for event in events]

    def error(self, error: ApiError) -> list[bytes]:
        code = "timeout" if error.code == "timeout" else "server_error"
        run = self._run
        events = self._writer.fail(error.message, code, run.prompt_tokens, run.completion_tokens)
        return [sse(event, event["type"]) for event in events]

    def closing(self) -> list[bytes]:
        return []  # the Responses stream ends with its last event, no [DONE]


def keep(store: ResponseStore, request: ResponsesRequest, writer: ResponseWriter) -> None:
    """Store a finished response (and its turn's items) when the request asked to."""
    if request.store and writer.response["status"] in ("completed", "incomplete"):
        items = [*request.items, *output_items(writer.output)]
        store.put(writer.response, items, request.previous_response_id)


def add_responses_routes(
    app: FastAPI, engine: Engine, limits: Limits, metrics: Metrics, store: ResponseStore
) -> None:
    """Serve the Responses API on `app`."""

    def adapt(body: Any) -> tuple[ResponsesRequest, ChatRequest]:
        check_body(body, limits.max_nesting)
        request = parse_responses(body, max_tools=limits.max_tools)
        history = []
        if request.previous_response_id is not None:
            history = store.history(request.previous_response_id)
        return request, request.chat(history)

    async def create(http: Request) -> Response:
        body = await read_json(http, limits.max_body_bytes)
        request, run = await prepare(engine, limits, metrics, lambda: adapt(body))
        writer = ResponseWriter(request, new_id("resp"), engine.model, int(time.time()))
        if request.stream:
            framer = ResponsesFramer(writer, run, request, store)
            return await respond_stream(http, run, framer, metrics)
        writer.feed(await collect(http, run))
        assert run.finish_reason is not None
        writer.finish(run.finish_reason, run.prompt_tokens, run.completion_tokens)
        keep(store, request, writer)
        return JSONResponse(writer.response)

    @app.post(_ROUTE)
    async def responses(http: Request) -> Response:
        try:
            response = await create(http)
        except ClientGone:
            response = Response(status_code=_CLIENT_GONE)
        except Exception as exc:  # ApiError, EngineError, or a bug: OpenAI's shape
            error = failure(exc)
            if error.param == "response_format":  # the pipeline's name for text.format
                error.param = "text.format"
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
