"""The OpenAI Responses API on the shared turn: its adapter, framer and the store.

Routes::

    POST /v1/responses        parse_responses + history (previous_response_id, from
                              the store) -> turn -> ResponsesFramer -> JSON or SSE;
                              stored when `store`
    GET  /v1/responses/{id}   a stored response

The store is the app's (`create_app(store=...)`); the adapter reads a conversation's
history from it, the framer writes a finished response to it. Errors use OpenAI's
shape (`core/errors.py`), the pipeline's `response_format` named `text.format` and its
`messages` `input`. After the stream started, a failure closes the open item and ends
the stream with `response.failed` (the output so far kept in it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from toolwire.events import Event
from toolwire.server.core.errors import ApiError, openai_error
from toolwire.server.core.pipeline import ChoiceRun, Limits, Step
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.transport import sse
from toolwire.server.core.turn import Turn
from toolwire.server.responses.request import ResponsesRequest, parse_responses
from toolwire.server.responses.store import ResponseStore
from toolwire.server.responses.writer import ResponseWriter, new_id, output_items

__all__ = ["ResponsesApi", "ResponsesFramer", "add_routes"]


class ResponsesFramer:
    """The Responses API on the wire: named SSE events; stored once it completes."""

    def __init__(self, request: ResponsesRequest, run: ChoiceRun, store: ResponseStore) -> None:
        self._writer = ResponseWriter(request, new_id("resp"), request.model, int(time.time()))
        self._run = run
        self._request = request
        self._store = store

    def opening(self) -> list[bytes]:
        return [sse(event, event["type"]) for event in self._writer.start()]

    def step(self, step: Step) -> list[bytes]:
        events = self._writer.feed(step.events)
        if step.finish_reason is not None:
            events += self._finish(step.finish_reason)
        return [sse(event, event["type"]) for event in events]

    def error(self, error: ApiError) -> list[bytes]:
        code = "timeout" if error.code == "timeout" else "server_error"
        run = self._run
        events = self._writer.fail(error.message, code, run.prompt_tokens, run.completion_tokens)
        return [sse(event, event["type"]) for event in events]

    def closing(self) -> list[bytes]:
        return []  # the Responses stream ends with its last event, no [DONE]

    def whole(self, events: list[Event]) -> dict[str, Any]:
        assert self._run.finish_reason is not None
        self._writer.feed(events)
        self._finish(self._run.finish_reason)
        return self._writer.response

    def _finish(self, finish_reason: str) -> list[dict[str, Any]]:
        """The last events; the finished response stored, when the request asked."""
        run, writer, request = self._run, self._writer, self._request
        events = writer.finish(finish_reason, run.prompt_tokens, run.completion_tokens)
        if request.store:
            items = [*request.items, *output_items(writer.output)]
            self._store.put(writer.response, items, request.previous_response_id)
        return events


class ResponsesApi:
    """The Responses API, as the turn runs it, over `store`."""

    route = "/v1/responses"
    fields: Mapping[str, str] = {"response_format": "text.format", "messages": "input"}

    def __init__(self, store: ResponseStore) -> None:
        self.store = store

    def adapt(self, body: Any, limits: Limits) -> tuple[ResponsesRequest, ChatRequest]:
        request = parse_responses(body, max_tools=limits.max_tools)
        history = []
        if request.previous_response_id is not None:
            history = self.store.history(request.previous_response_id)
        return request, request.chat(history)

    def framer(self, request: ResponsesRequest, run: ChoiceRun) -> ResponsesFramer:
        return ResponsesFramer(request, run, self.store)

    def error_body(self, error: ApiError) -> dict[str, Any]:
        return openai_error(error)


def add_routes(app: FastAPI, turn: Turn, store: ResponseStore) -> None:
    """Serve the Responses API on `app`, keeping responses in `store`."""
    api = ResponsesApi(store)

    @app.post(api.route)
    async def responses(http: Request) -> Response:
        return await turn.respond(api, http)

    @app.get(api.route + "/{response_id}")
    async def retrieve(response_id: str) -> Response:
        async def work() -> Response:
            found = store.get(response_id)
            if found is None:
                message = f"no stored response with id {response_id!r}"
                raise ApiError(404, message, param="response_id")
            return JSONResponse(found)

        return await turn.answer(api, api.route + "/{id}", work)
