"""The Anthropic Messages API on the shared turn: its adapter, framer and error shape.

Routes::

    POST /v1/messages                parse_messages -> turn -> MessagesFramer -> JSON or SSE
    POST /v1/messages/count_tokens   parse_messages -> plan -> the rendered prompt's length

`x-api-key` and `authorization` carry the caller's key when the server has keys
(`core/auth.py`); `anthropic-version` is accepted. Errors are `{"type": "error",
"error": {"type", "message"}}` with Anthropic's statuses and types: 400
`invalid_request_error` (the message starts with the field's dotted path), 401
`authentication_error`, 404 `not_found_error` (unknown model), 500/502 `api_error`
(the engine failed before its first token), 504 `timeout_error`, 413
`request_too_large`. The pipeline's `response_format` is `output_config.format`.
After the stream started, a failure stops the open block and ends the stream with an
`error` event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from toolwire.events import Event
from toolwire.server.core.errors import ApiError, FieldError
from toolwire.server.core.pipeline import Limits, Run, Step
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.transport import sse
from toolwire.server.core.turn import Turn
from toolwire.server.messages.request import parse_messages, thinking_omitted
from toolwire.server.messages.writer import MessageWriter, new_message_id

__all__ = ["MessagesApi", "MessagesFramer", "MessagesRequest", "add_routes", "anthropic_error"]

_COUNT = "/v1/messages/count_tokens"
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
    if isinstance(error, FieldError):
        path = ".".join(str(part) for part in error.path) or "body"
        message = f"{path}: {error.problem}"
    elif error.param and not message.startswith(error.param):
        message = f"{error.param}: {message}"
    if error.type == "engine_error":
        message = f"engine error: {message}"
    status = error.status
    kind = _TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


@dataclass(frozen=True)
class MessagesRequest:
    """A validated Messages request: the neutral request, and how to write its answer."""

    chat: ChatRequest
    #: `thinking.display: omitted`.
    omit_thinking: bool = False


class MessagesFramer:
    """The Messages API on the wire: named SSE events, an `error` event on failure."""

    def __init__(self, request: MessagesRequest, run: Run) -> None:
        self._writer = MessageWriter(
            new_message_id(),
            request.chat.model,
            run.prompt_tokens,
            omit_thinking=request.omit_thinking,
        )
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

    async def settle(self) -> None:
        return None  # nothing is kept

    def whole(self, events: list[Event]) -> dict[str, Any]:
        run = self._run
        assert run.finish_reason is not None
        self._writer.feed(events)
        self._writer.finish(run.finish_reason, run.stop_string, run.completion_tokens)
        return self._writer.message


class MessagesApi:
    """The Messages API, as the turn runs it."""

    route = "/v1/messages"
    fields: Mapping[str, str] = {"response_format": "output_config.format"}

    def adapt(self, body: Any, limits: Limits) -> tuple[MessagesRequest, ChatRequest]:
        chat = parse_messages(body, max_tools=limits.max_tools)
        return MessagesRequest(chat, thinking_omitted(body)), chat

    def framer(self, request: MessagesRequest, run: Run) -> MessagesFramer:
        return MessagesFramer(request, run)

    def error_body(self, error: ApiError) -> dict[str, Any]:
        return anthropic_error(error)


def _counted(body: Any, limits: Limits) -> tuple[None, ChatRequest]:
    return None, parse_messages(body, count_only=True, max_tools=limits.max_tools)


def add_routes(app: FastAPI, turn: Turn) -> None:
    """Serve the Messages API on `app`."""
    api = MessagesApi()

    @app.post(api.route)
    async def messages(http: Request) -> Response:
        return await turn.respond(api, http)

    @app.post(_COUNT)
    async def count_tokens(http: Request) -> Response:
        async def work() -> Response:
            _, planned = await turn.plan(await turn.read(http), _counted)
            return JSONResponse({"input_tokens": len(planned.generation.prompt_ids)})

        return await turn.answer(api, _COUNT, http, work)
