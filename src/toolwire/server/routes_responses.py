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
import logging
import time
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from toolwire.backends.base import Engine, EngineError
from toolwire.server.errors import ApiError, error_body
from toolwire.server.metrics import Metrics
from toolwire.server.pipeline import Limits
from toolwire.server.responses import ResponseWriter, new_id, output_items
from toolwire.server.responses_request import ResponsesRequest, parse_responses
from toolwire.server.responses_store import ResponseStore
from toolwire.server.sse import sse
from toolwire.server.turn import Turn, start

__all__ = ["add_responses_routes"]

log = logging.getLogger("toolwire.server")

_ROUTE = "/v1/responses"
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _error(exc: ApiError | EngineError) -> JSONResponse:
    if isinstance(exc, ApiError):
        return JSONResponse(exc.body(), status_code=exc.status)
    return JSONResponse(error_body(str(exc), type="engine_error"), status_code=exc.status)


def _code(exc: ApiError | EngineError) -> str:
    return "timeout" if isinstance(exc, ApiError) and exc.code == "timeout" else "server_error"


def add_responses_routes(
    app: FastAPI, engine: Engine, limits: Limits, metrics: Metrics, store: ResponseStore
) -> None:
    """Serve the Responses API on `app`."""

    def keep(request: ResponsesRequest, writer: ResponseWriter) -> None:
        if request.store and writer.response["status"] in ("completed", "incomplete"):
            items = [*request.items, *output_items(writer.output)]
            store.put(writer.response, items, request.previous_response_id)

    async def stream(
        turn: Turn, request: ResponsesRequest, writer: ResponseWriter
    ) -> AsyncIterator[bytes]:
        for event in writer.start():
            yield sse(event, event["type"])
        try:
            async for step in turn.steps():
                for event in writer.feed(step.events):
                    yield sse(event, event["type"])
            final = writer.finish(turn.finish_reason, turn.prompt_tokens, turn.completion_tokens)
        except (EngineError, ApiError) as exc:
            message = exc.message if isinstance(exc, ApiError) else str(exc)
            final = writer.fail(message, _code(exc), turn.prompt_tokens, turn.completion_tokens)
        except Exception as exc:  # a bug: end the stream in the API's terms, keep the traceback
            log.exception("response stream failed")
            message = f"internal error: {type(exc).__name__}"
            final = writer.fail(message, "server_error", turn.prompt_tokens, turn.completion_tokens)
        for event in final:
            yield sse(event, event["type"])
        keep(request, writer)

    async def create(http: Request) -> Response:
        try:
            body = json.loads(await http.body())
        except ValueError:
            raise ApiError(400, "the request body is not valid JSON", param="body") from None
        request = parse_responses(body)
        history = []
        if request.previous_response_id is not None:
            history = store.history(request.previous_response_id)
        turn = start(engine, request.chat(history), limits, metrics)
        writer = ResponseWriter(request, new_id("resp"), engine.model, int(time.time()))
        await turn.prime()  # a failure before any output is an HTTP status
        if request.stream:
            return StreamingResponse(
                stream(turn, request, writer), media_type="text/event-stream", headers=_SSE_HEADERS
            )
        writer.feed(await turn.events())
        writer.finish(turn.finish_reason, turn.prompt_tokens, turn.completion_tokens)
        keep(request, writer)
        return JSONResponse(writer.response)

    @app.post(_ROUTE)
    async def responses(http: Request) -> Response:
        try:
            response = await create(http)
        except (ApiError, EngineError) as exc:
            response = _error(exc)
        except Exception as exc:  # a bug: answer in OpenAI's shape, keep the traceback
            log.exception("request failed")
            body = error_body(f"internal error: {type(exc).__name__}", type="server_error")
            response = JSONResponse(body, status_code=500)
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
