"""The Anthropic Messages routes: status codes, errors in Anthropic's shape, SSE framing.

Routes::

    POST /v1/messages                validate -> turn.prepare -> ChoiceRun -> MessageWriter
                                     -> JSON or SSE
    POST /v1/messages/count_tokens   validate -> the rendered prompt's length

`x-api-key`, `authorization` and `anthropic-version` headers are accepted (this server
does not authenticate). Errors are `{"type": "error", "error": {"type", "message"}}`
with Anthropic's statuses and types: 400 `invalid_request_error` (the message starts
with the field's path), 404 `not_found_error` (unknown model), 500/502 `api_error`
(the engine failed before its first token), 504 `timeout_error`, 413
`request_too_large`. After the stream started, a failure stops the open block and
ends the stream with an `error` event. A client that goes away is counted as 499.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from toolwire.backends.base import Engine
from toolwire.server.errors import ApiError
from toolwire.server.messages import MessageWriter, new_message_id
from toolwire.server.messages_request import MessagesRequest, parse_messages
from toolwire.server.metrics import Metrics
from toolwire.server.pipeline import ChoiceRun, Limits, Step, failure, plan
from toolwire.server.request import ChatRequest, check_body
from toolwire.server.transport import ClientGone, read_json, sse
from toolwire.server.turn import collect, prepare, respond_stream

__all__ = ["MessagesFramer", "add_messages_routes", "anthropic_error"]

_ROUTE = "/v1/messages"
_COUNT = "/v1/messages/count_tokens"
#: The status counted for a request whose client went away (nginx's convention).
_CLIENT_GONE = 499
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


class MessagesFramer:
    """The Messages API on the wire: named SSE events, an `error` event on failure."""

    def __init__(self, writer: MessageWriter, run: ChoiceRun) -> None:
        self._writer = writer
        self._run = run

    def opening(self) -> list[bytes]:
        return [sse(payload, name) for name, payload in self._writer.start()]

    def step(self, step: Step) -> list[bytes]:
        events = self._writer.feed(step.events)
        if step.finish_reason is not None:
            run = self._run
            events += self._writer.finish(
                step.finish_reason, run.stop_string, run.completion_tokens
            )
        return [sse(payload, name) for name, payload in events]

    def error(self, error: ApiError) -> list[bytes]:
        return [sse(payload, name) for name, payload in self._writer.fail(anthropic_error(error))]

    def closing(self) -> list[bytes]:
        return []  # the Messages stream ends with message_stop or error, no [DONE]


def add_messages_routes(app: FastAPI, engine: Engine, limits: Limits, metrics: Metrics) -> None:
    """Serve the Messages API on `app`."""

    def adapt(body: Any, count_only: bool = False) -> tuple[MessagesRequest, ChatRequest]:
        check_body(body, limits.max_nesting)
        request = parse_messages(body, count_only=count_only, max_tools=limits.max_tools)
        return request, request.chat

    async def create(http: Request) -> Response:
        body = await read_json(http, limits.max_body_bytes)
        request, run = await prepare(engine, limits, metrics, lambda: adapt(body))
        writer = MessageWriter(new_message_id(), engine.model, run.prompt_tokens)
        if request.stream:
            return await respond_stream(http, run, MessagesFramer(writer, run), metrics)
        writer.feed(await collect(http, run))
        assert run.finish_reason is not None
        writer.finish(run.finish_reason, run.stop_string, run.completion_tokens)
        return JSONResponse(writer.message)

    async def count(http: Request) -> Response:
        body = await read_json(http, limits.max_body_bytes)

        def work() -> int:
            _, chat = adapt(body, count_only=True)
            return len(plan(engine, chat, limits).generation.prompt_ids)

        return JSONResponse({"input_tokens": await asyncio.to_thread(work)})

    async def answer(
        route: str, handler: Callable[[Request], Awaitable[Response]], http: Request
    ) -> Response:
        try:
            response = await handler(http)
        except ClientGone:
            response = Response(status_code=_CLIENT_GONE)
        except Exception as exc:  # ApiError, EngineError, or a bug: Anthropic's shape
            error = failure(exc)
            if error.param == "response_format":  # the pipeline's name for the field
                error.param = "output_config.format"
            response = JSONResponse(anthropic_error(error), status_code=error.status)
        metrics.requests.labels(route, str(response.status_code)).inc()
        return response

    @app.post(_ROUTE)
    async def messages(http: Request) -> Response:
        return await answer(_ROUTE, create, http)

    @app.post(_COUNT)
    async def count_tokens(http: Request) -> Response:
        return await answer(_COUNT, count, http)
