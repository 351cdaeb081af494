"""The Anthropic Messages routes: status codes, errors in Anthropic's shape, SSE framing.

Routes::

    POST /v1/messages                validate -> Turn -> MessageWriter -> JSON or SSE
    POST /v1/messages/count_tokens   validate -> the rendered prompt's length

`x-api-key`, `authorization` and `anthropic-version` headers are accepted (this server
does not authenticate). Errors are `{"type": "error", "error": {"type", "message"}}`
with Anthropic's statuses and types: 400 `invalid_request_error` (the message starts
with the field's path), 404 `not_found_error` (unknown model), 500/502 `api_error`
(the engine failed before any output), 504 `timeout_error`. After the stream started,
a failure stops the open block and ends the stream with an `error` event.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from toolwire.backends.base import Engine
from toolwire.server.errors import ApiError
from toolwire.server.messages import MessageWriter, new_message_id
from toolwire.server.messages_request import parse_messages
from toolwire.server.metrics import Metrics
from toolwire.server.pipeline import Limits, Step, plan
from toolwire.server.sse import sse
from toolwire.server.turn import Turn, failure, start, stream

__all__ = ["add_messages_routes", "anthropic_error"]

_ROUTE = "/v1/messages"
_COUNT = "/v1/messages/count_tokens"
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error(error: ApiError) -> dict[str, Any]:
    """The body Anthropic's clients parse into their typed errors (with `error.status`)."""
    message = error.message
    if error.param and not message.startswith(error.param):
        message = f"{error.param}: {message}"
    if error.type == "engine_error":
        message = f"engine error: {message}"
    status = error.status
    kind = _TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


async def _body(http: Request) -> Any:
    try:
        return json.loads(await http.body())
    except ValueError:
        raise ApiError(400, "the request body is not valid JSON", param="body") from None


class MessagesFramer:
    """The Messages API on the wire: named SSE events, an `error` event on failure."""

    def __init__(self, writer: MessageWriter, turn: Turn) -> None:
        self._writer = writer
        self._turn = turn

    def opening(self) -> list[bytes]:
        return [sse(payload, name) for name, payload in self._writer.start()]

    def step(self, step: Step) -> list[bytes]:
        events = self._writer.feed(step.events)
        if step.finish_reason is not None:
            turn = self._turn
            events += self._writer.finish(
                step.finish_reason, turn.stop_string, turn.completion_tokens
            )
        return [sse(payload, name) for name, payload in events]

    def error(self, error: ApiError) -> list[bytes]:
        return [sse(payload, name) for name, payload in self._writer.fail(anthropic_error(error))]


def add_messages_routes(app: FastAPI, engine: Engine, limits: Limits, metrics: Metrics) -> None:
    """Serve the Messages API on `app`."""

    async def create(http: Request) -> Response:
        request = parse_messages(await _body(http))
        turn = await start(engine, request.chat, limits, metrics)
        writer = MessageWriter(new_message_id(), engine.model, turn.prompt_tokens)
        await turn.prime()  # a failure before any output is an HTTP status
        if request.stream:
            return StreamingResponse(
                stream(turn, MessagesFramer(writer, turn), metrics),
                media_type="text/event-stream",
                headers=_SSE_HEADERS,
            )
        writer.feed(await turn.events())
        writer.finish(turn.finish_reason, turn.stop_string, turn.completion_tokens)
        return JSONResponse(writer.message)

    async def count(http: Request) -> Response:
        request = parse_messages(await _body(http), count_only=True)
        planned = await asyncio.to_thread(plan, engine, request.chat, limits)
        return JSONResponse({"input_tokens": len(planned.generation.prompt_ids)})

    async def answer(route: str, handler: Any, http: Request) -> Response:
        try:
            response: Response = await handler(http)
        except Exception as exc:  # ApiError, EngineError, or a bug: Anthropic's shape
            error = failure(exc)
            response = JSONResponse(anthropic_error(error), status_code=error.status)
        metrics.requests.labels(route, str(response.status_code)).inc()
        return response

    @app.post(_ROUTE)
    async def messages(http: Request) -> Response:
        return await answer(_ROUTE, create, http)

    @app.post(_COUNT)
    async def count_tokens(http: Request) -> Response:
        return await answer(_COUNT, count, http)
