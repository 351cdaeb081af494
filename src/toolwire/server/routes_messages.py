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

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from toolwire.backends.base import Engine, EngineError
from toolwire.server.errors import ApiError
from toolwire.server.messages import MessageWriter, new_message_id
from toolwire.server.messages_request import parse_messages
from toolwire.server.metrics import Metrics
from toolwire.server.pipeline import Limits, plan
from toolwire.server.sse import sse
from toolwire.server.turn import Turn, start

__all__ = ["add_messages_routes", "anthropic_error"]

log = logging.getLogger("toolwire.server")

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


def anthropic_error(exc: ApiError | EngineError | Exception) -> tuple[int, dict[str, Any]]:
    """The status and body Anthropic's clients parse into their typed errors."""
    if isinstance(exc, ApiError):
        status, message = exc.status, exc.message
        if exc.param and not message.startswith(exc.param):
            message = f"{exc.param}: {message}"
    elif isinstance(exc, EngineError):
        status, message = exc.status, f"engine error: {exc}"
    else:
        status, message = 500, f"internal error: {type(exc).__name__}"
    kind = _TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return status, {"type": "error", "error": {"type": kind, "message": message}}


async def _body(http: Request) -> Any:
    try:
        return json.loads(await http.body())
    except ValueError:
        raise ApiError(400, "the request body is not valid JSON", param="body") from None


def add_messages_routes(app: FastAPI, engine: Engine, limits: Limits, metrics: Metrics) -> None:
    """Serve the Messages API on `app`."""

    async def stream(turn: Turn, writer: MessageWriter) -> AsyncIterator[bytes]:
        for name, payload in writer.start():
            yield sse(payload, name)
        try:
            async for step in turn.steps():
                for name, payload in writer.feed(step.events):
                    yield sse(payload, name)
            final = writer.finish(turn.finish_reason, turn.stop_string, turn.completion_tokens)
        except Exception as exc:  # engine failure, timeout, or a bug: end in Anthropic's terms
            if not isinstance(exc, ApiError | EngineError):
                log.exception("message stream failed")
            final = writer.fail(anthropic_error(exc)[1])
        for name, payload in final:
            yield sse(payload, name)

    async def create(http: Request) -> Response:
        request = parse_messages(await _body(http))
        turn = start(engine, request.chat, limits, metrics)
        writer = MessageWriter(new_message_id(), engine.model, turn.prompt_tokens)
        await turn.prime()  # a failure before any output is an HTTP status
        if request.stream:
            return StreamingResponse(
                stream(turn, writer), media_type="text/event-stream", headers=_SSE_HEADERS
            )
        writer.feed(await turn.events())
        writer.finish(turn.finish_reason, turn.stop_string, turn.completion_tokens)
        return JSONResponse(writer.message)

    async def count(http: Request) -> Response:
        request = parse_messages(await _body(http), count_only=True)
        planned = plan(engine, request.chat, limits)
        return JSONResponse({"input_tokens": len(planned.generation.prompt_ids)})

    async def answer(route: str, handler: Any, http: Request) -> Response:
        try:
            response: Response = await handler(http)
        except Exception as exc:
            if not isinstance(exc, ApiError | EngineError):
                log.exception("request failed")
            status, body = anthropic_error(exc)
            response = JSONResponse(body, status_code=status)
        metrics.requests.labels(route, str(response.status_code)).inc()
        return response

    @app.post(_ROUTE)
    async def messages(http: Request) -> Response:
        return await answer(_ROUTE, create, http)

    @app.post(_COUNT)
    async def count_tokens(http: Request) -> Response:
        return await answer(_COUNT, count, http)
