"""OpenAI Chat Completions on the shared turn: its adapter, framer and error shape.

Route::

    POST /v1/chat/completions   parse_request -> turn -> ChatFramer -> JSON or SSE

The neutral request is Chat Completions' own, so the adapter returns it twice and the
field table is empty. Errors use OpenAI's shape (`core/errors.py`). A stream is the
role chunk, content chunks, the finish (and usage, when asked), then `data: [DONE]`;
a failure after it started is one `data: {"error": ...}` event before `[DONE]`. With
`n` > 1 the turn runs `Choices` (`core/choices.py`): each choice's chunks carry its
index, and a whole response lists every choice.
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
from toolwire.server.chat.writer import Answer, ChunkWriter, completion
from toolwire.server.core.choices import Choices
from toolwire.server.core.errors import ApiError, openai_error
from toolwire.server.core.pipeline import ChoiceRun, Limits, Run, Step
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.transport import sse
from toolwire.server.core.turn import Turn

__all__ = ["ChatApi", "ChatFramer", "add_routes"]

_DONE = b"data: [DONE]\n\n"


class ChatFramer:
    """Chat Completions on the wire: role chunks, content chunks, finishes, usage, [DONE].

    One writer per choice (`n`); with `include_usage` the usage chunk follows the last
    choice's finish."""

    def __init__(self, request: ChatRequest, run: Run) -> None:
        self._id = f"chatcmpl-{uuid.uuid4().hex}"
        self._created = int(time.time())
        self._model = request.model
        logprobs = request.top_logprobs is not None
        self._writers = [
            ChunkWriter(self._id, self._model, self._created, index=i, logprobs=logprobs)
            for i in range(request.n)
        ]
        self._open = request.n
        self._run = run
        self._include_usage = request.include_usage
        self._logprobs = logprobs

    def opening(self) -> list[bytes]:
        return [sse(writer.role()) for writer in self._writers]

    def step(self, step: Step) -> list[bytes]:
        writer = self._writers[step.choice]
        out = [sse(chunk) for chunk in writer.chunks(step.events, step.logprobs)]
        if step.finish_reason is not None:
            out.append(sse(writer.finish(step.finish_reason)))
            self._open -= 1
            if self._include_usage and not self._open:
                run = self._run
                usage = writer.usage(run.prompt_tokens, run.completion_tokens)
                out.append(sse(usage))
        return out

    def error(self, error: ApiError) -> list[bytes]:
        return [sse(error.body())]

    def closing(self) -> list[bytes]:
        return [_DONE]

    async def settle(self) -> None:
        return None  # nothing is kept

    def whole(self, events: list[Event]) -> dict[str, Any]:
        run = self._run
        runs: list[ChoiceRun] = run.runs if isinstance(run, Choices) else []
        if isinstance(run, Choices):
            answers = [self._answer(e, r) for e, r in zip(run.events, runs, strict=True)]
        else:
            answers = [self._answer(events, run)]
        return completion(
            self._id,
            self._model,
            self._created,
            answers,
            run.prompt_tokens,
            run.completion_tokens,
        )

    def _answer(self, events: list[Event], run: Run) -> Answer:
        assert run.finish_reason is not None
        return Answer(events, run.finish_reason, run.logprobs if self._logprobs else None)


class ChatApi:
    """Chat Completions, as the turn runs it."""

    route = "/v1/chat/completions"
    fields: Mapping[str, str] = {}  # the neutral request speaks Chat Completions

    def adapt(self, body: Any, limits: Limits) -> tuple[ChatRequest, ChatRequest]:
        request = parse_request(body, max_tools=limits.max_tools)
        return request, request

    def framer(self, request: ChatRequest, run: Run) -> ChatFramer:
        return ChatFramer(request, run)

    def error_body(self, error: ApiError) -> dict[str, Any]:
        return openai_error(error)


def add_routes(app: FastAPI, turn: Turn) -> None:
    """Serve Chat Completions on `app`."""
    api = ChatApi()

    @app.post(api.route)
    async def chat_completions(http: Request) -> Response:
        return await turn.respond(api, http)
