"""The HTTP surface: routes, status codes and SSE framing. No parsing happens here.

Routes::

    POST /v1/chat/completions   validate -> plan -> ChoiceRun -> JSON or SSE
    GET  /v1/models             the one served model
    GET  /health                liveness, and what the operator was warned about
    GET  /metrics               Prometheus text

A stream always ends with `data: [DONE]`; an engine failure or timeout after the
stream started is sent as one `data: {"error": ...}` event before it.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from toolwire.backends.base import Engine, EngineError
from toolwire.parser import Parser
from toolwire.server.chunks import ChunkWriter, completion
from toolwire.server.errors import ApiError, error_body
from toolwire.server.metrics import CONTENT_TYPE, Metrics
from toolwire.server.pipeline import ChoiceRun, Limits, plan
from toolwire.server.request import ChatRequest, parse_request

__all__ = ["create_app", "startup_warnings"]

log = logging.getLogger("toolwire.server")

_DONE = b"data: [DONE]\n\n"
_CHAT = "/v1/chat/completions"


def _sse(payload: dict[str, Any]) -> bytes:
    return (
        b"data: "
        + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        + b"\n\n"
    )


def _error_response(exc: ApiError | EngineError) -> JSONResponse:
    if isinstance(exc, ApiError):
        return JSONResponse(exc.body(), status_code=exc.status)
    return JSONResponse(error_body(str(exc), type="engine_error"), status_code=exc.status)


def _stream_error(exc: ApiError | EngineError) -> dict[str, Any]:
    if isinstance(exc, ApiError):
        return exc.body()
    return error_body(str(exc), type="engine_error")


async def _events(
    run: ChoiceRun, writer: ChunkWriter, request: ChatRequest
) -> AsyncIterator[bytes]:
    yield _sse(writer.role())
    try:
        async for step in run.steps():
            for chunk in writer.chunks(step.events):
                yield _sse(chunk)
            if step.finish_reason is not None:
                yield _sse(writer.finish(step.finish_reason))
        if request.include_usage:
            yield _sse(writer.usage(run.prompt_tokens, run.completion_tokens))
    except (EngineError, ApiError) as exc:
        yield _sse(_stream_error(exc))
    yield _DONE


def startup_warnings(engine: Engine) -> list[str]:
    """What the operator must know about this engine: gating, constraints."""
    warnings = list(engine.warnings)
    if not Parser(engine.format, engine.tokenizer).gated:
        warnings.insert(
            0,
            f"format {engine.format!r}: its delimiters are not single tokens of this "
            "model's vocabulary, so they are matched as text (ungated): a model that "
            "copies tool-call markup from its input produces a real call",
        )
    return warnings


def create_app(
    engine: Engine, limits: Limits | None = None, metrics: Metrics | None = None
) -> FastAPI:
    """The FastAPI application serving `engine`."""
    limits = limits or Limits()
    metrics = metrics or Metrics()
    app = FastAPI(title="toolwire", version="0.1.0")
    app.state.metrics = metrics
    app.state.engine = engine
    gated = Parser(engine.format, engine.tokenizer).gated
    warnings = startup_warnings(engine)

    async def chat(http: Request) -> Response:
        try:
            body = json.loads(await http.body())
        except ValueError:
            raise ApiError(400, "the request body is not valid JSON", param="body") from None
        request = parse_request(body)
        planned = plan(engine, request, limits)
        if planned.grammar_fallback:
            metrics.grammar_fallbacks.labels(planned.grammar_fallback).inc()
            log.warning("grammar fallback: %s", "; ".join(planned.grammar_reasons))
        run = ChoiceRun(engine, planned, limits, metrics)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if request.stream:
            writer = ChunkWriter(completion_id, engine.model, created)
            return StreamingResponse(
                _events(run, writer, request),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        events = []
        async for step in run.steps():
            events += step.events
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
        except (ApiError, EngineError) as exc:
            response = _error_response(exc)
        except Exception as exc:  # a bug: answer in OpenAI's shape, keep the traceback
            log.exception("request failed")
            body = error_body(f"internal error: {type(exc).__name__}", type="server_error")
            response = JSONResponse(body, status_code=500)
        metrics.requests.labels(_CHAT, str(response.status_code)).inc()
        return response

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
