"""The HTTP surface: routes, status codes and SSE framing. No parsing happens here.

Routes::

    POST /v1/chat/completions   validate -> plan -> ChoiceRun -> JSON or SSE
    GET  /v1/models             the one served model
    GET  /health                liveness, and what the operator was warned about
    GET  /metrics               Prometheus text

Nothing is sent before the engine accepted the request (its first delta), so a refused
or stalled request is a plain 502/504. A stream always ends with `data: [DONE]`; any
failure after it started (engine, timeout, bad upstream data, a bug) is sent as one
`data: {"error": ...}` event before it. The stream boundary is `pipeline.ChoiceRun`
and `transport.stream`; `ChatFramer` only formats.

The Responses API (`routes_responses`) and the Messages API (`routes_messages`) are
added from their own modules; all three run the same pipeline and stream boundary.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from toolwire import formats
from toolwire.backends.base import Engine
from toolwire.events import Event
from toolwire.server.chunks import ChunkWriter, completion
from toolwire.server.errors import ApiError
from toolwire.server.grammars import GrammarService, GrammarSettings
from toolwire.server.metrics import CONTENT_TYPE, Metrics
from toolwire.server.pipeline import ChoiceRun, Limits, Plan, Step, failure, plan
from toolwire.server.request import parse_request
from toolwire.server.responses_store import ResponseStore
from toolwire.server.routes_messages import add_messages_routes
from toolwire.server.routes_responses import add_responses_routes
from toolwire.server.transport import ClientGone, read_json, sse, stream, unless_disconnected

__all__ = ["ChatFramer", "create_app", "startup_warnings"]

log = logging.getLogger("toolwire.server")

_DONE = b"data: [DONE]\n\n"
_CHAT = "/v1/chat/completions"
#: The status counted for a request whose client went away (nginx's convention).
_CLIENT_GONE = 499


class ChatFramer:
    """Chat Completions on the wire: role chunk, content chunks, finish, usage, [DONE]."""

    def __init__(self, writer: ChunkWriter, run: ChoiceRun, include_usage: bool) -> None:
        self._writer = writer
        self._run = run
        self._include_usage = include_usage

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


def startup_warnings(engine: Engine) -> list[str]:
    """What the operator must know about this engine: gating, constraints."""
    warnings = list(engine.warnings)
    if not formats.is_gated(engine.format, engine.tokenizer):
        warnings.insert(
            0,
            f"format {engine.format!r}: its delimiters are not single tokens of this "
            "model's vocabulary, so they are matched as text (ungated): a model that "
            "copies tool-call markup from its input produces a real call",
        )
    return warnings


def create_app(
    engine: Engine,
    limits: Limits | None = None,
    metrics: Metrics | None = None,
    grammar: GrammarSettings | None = None,
) -> FastAPI:
    """The FastAPI application serving `engine`."""
    limits = limits or Limits()
    metrics = metrics or Metrics()
    app = FastAPI(title="toolwire", version="0.1.0")
    app.state.metrics = metrics
    app.state.engine = engine
    grammars = GrammarService.for_engine(engine, metrics.registry, grammar)
    app.state.grammars = grammars
    gated = formats.is_gated(engine.format, engine.tokenizer)
    warnings = startup_warnings(engine)

    def _plan(body: Any) -> Plan:
        request = parse_request(body, max_tools=limits.max_tools, max_nesting=limits.max_nesting)
        return plan(engine, request, limits)

    async def chat(http: Request) -> Response:
        body = await read_json(http, limits.max_body_bytes)
        # validation, rendering and grammar checks take milliseconds to seconds: off the
        # event loop
        planned = await grammars.prepare(await asyncio.to_thread(_plan, body))
        request = planned.request
        if planned.grammar_fallback:
            metrics.grammar_fallbacks.labels(planned.grammar_fallback).inc()
            log.warning("grammar fallback: %s", "; ".join(planned.grammar_reasons))
        run = ChoiceRun(engine, planned, limits, metrics)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if request.stream:
            # nothing is sent before the engine accepted the request: a refusal or a
            # stall is still a plain 502/504
            await unless_disconnected(http, run.start())
            writer = ChunkWriter(completion_id, engine.model, created)
            return StreamingResponse(
                stream(run, ChatFramer(writer, run, request.include_usage), metrics),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                background=BackgroundTask(run.aclose),
            )

        async def whole() -> list[Event]:
            await run.start()
            return await run.collect()

        events = await unless_disconnected(http, whole())
        assert run.finish_reason is not None
        return JSONResponse(
            completion(
                completion_id,
                engine.model,
                created,
                events,
                run.finish_reason,
                run.prompt_tokens,
                run.completion_tokens,
            )
        )

    @app.post(_CHAT)
    async def chat_completions(http: Request) -> Response:
        try:
            response = await chat(http)
        except ApiError as exc:
            response = JSONResponse(exc.body(), status_code=exc.status)
        except ClientGone:
            response = Response(status_code=_CLIENT_GONE)
        except Exception as exc:  # EngineError, or a bug: answer in OpenAI's shape
            error = failure(exc)
            response = JSONResponse(error.body(), status_code=error.status)
        metrics.requests.labels(_CHAT, str(response.status_code)).inc()
        return response

    add_responses_routes(app, engine, limits, metrics, ResponseStore())
    add_messages_routes(app, engine, limits, metrics)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        metrics.requests.labels("/v1/models", "200").inc()
        model = {"id": engine.model, "object": "model", "created": 0, "owned_by": "toolwire"}
        return {"object": "list", "data": [model]}

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "model": engine.model,
            "format": engine.format,
            "gated": gated,
            "constrained": engine.constrains,
            "warnings": warnings,
        }

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return app
