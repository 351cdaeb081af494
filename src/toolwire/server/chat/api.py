"""OpenAI Chat Completions on the shared turn: its adapter, framer and error shape.

Route::

    POST /v1/chat/completions   parse_request -> turn -> ChatFramer -> JSON or SSE

The neutral request is Chat Completions' own, so the adapter returns it twice and the
field table is empty. Errors use OpenAI's shape (`core/errors.py`). A stream is the
role chunk, content chunks, the finish (and usage, when asked), then `data: [DONE]`;
a failure after it started is one `data: {"error": ...}` event before `[DONE]`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from toolwire.events import Event
from toolwire.server.chat.request import parse_request
from toolwire.server.chat.writer import ChunkWriter, completion
from toolwire.server.core.errors import ApiError, openai_error
from toolwire.server.core.pipeline import ChoiceRun, Limits, Step
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.transport import sse
from toolwire.server.core.turn import Turn

__all__ = ["ChatApi", "ChatFramer", "add_routes"]

_DONE = b"data: [DONE]\n\n"


class ChatFramer:
    """Chat Completions on the wire: role chunk, content chunks, finish, usage, [DONE]."""

    def __init__(self, request: ChatRequest, run: ChoiceRun) -> None:
        self._id = f"chatcmpl-{uuid.uuid4().hex}"
        self._created = int(time.time())
        self._model = request.model
        self._writer = ChunkWriter(self._id, self._model, self._created)
        self._run = run
        self._include_usage = request.include_usage

    def opening(self) -> list[bytes]:
        return [sse(self._writer.role())]

    def step(self, step: Step) -> list[bytes]:
        out = [sse(chunk) for chunk in self._writer.chunks(step.events)]
        if step.finish_reason is not None:
            out.append(sse(self._writer.finish(step.finish_reason)))
            if self._include_usage:
                run = self._run
                out.append(sse(self._writer.usage(run.prompt_tokens, run.completion_tokens)))
        return out

    def error(self, error: ApiError) -> list[bytes]:
        return [sse(error.body())]

    def closing(self) -> list[bytes]:
        return [_DONE]

    def whole(self, events: list[Event]) -> dict[str, Any]:
        run = self._run
        assert run.finish_reason is not None
        return completion(
            self._id,
            self._model,
            self._created,
            events,
            run.finish_reason,
            run.prompt_tokens,
            run.completion_tokens,
        )


class ChatApi:
    """Chat Completions, as the turn runs it."""

    route = "/v1/chat/completions"
    fields: Mapping[str, str] = {}  # the neutral request speaks Chat Completions

    def adapt(self, body: Any, limits: Limits) -> tuple[ChatRequest, ChatRequest]:
        request = parse_request(body, max_tools=limits.max_tools)
        return request, request

    def framer(self, request: ChatRequest, run: ChoiceRun) -> ChatFramer:
        return ChatFramer(request, run)

    def error_body(self, error: ApiError) -> dict[str, Any]:
        return openai_error(error)


def add_routes(app: FastAPI, turn: Turn) -> None:
    """Serve Chat Completions on `app`."""
    api = ChatApi()

    @app.post(api.route)
    async def chat_completions(http: Request) -> Response:
        return await turn.respond(api, http)
