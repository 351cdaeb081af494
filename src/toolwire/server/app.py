"""The HTTP application: one shared turn, and one line per API that runs on it.

Routes::

    POST /v1/chat/completions        chat/        (Chat Completions)
    POST /v1/responses, GET/DELETE .../{id}  responses/ (Responses, with its store)
    POST /v1/messages, .../count_tokens  messages/ (Anthropic Messages)
    GET  /v1/models                  the served model (and its further names), with
                                     its context as `max_model_len`
    GET  /health                     what the operator was warned about (always 200)
    GET  /health/live, /health/ready the process runs; a request would be answered
    GET|HEAD /api/hello              reachability (Claude Code probes its base URL so)
    GET  /metrics                    Prometheus text (summed over workers)

Every API's turn route goes through `core.turn.Turn` (the key check, validation,
rendering, the grammar service, the engine, the parser, the API's framer, errors,
traces and counting); an API package only adds its adapter, writer, framer and error
shape. `/v1/models` and, with `protect_metrics`, `/metrics` go through the key check
too; `/health*` never do. No parsing happens here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from toolwire import __version__, formats
from toolwire.backends.base import Engine
from toolwire.server import chat, messages, responses
from toolwire.server.core.auth import Keys
from toolwire.server.core.errors import ApiError, openai_error
from toolwire.server.core.grammars import GrammarService, GrammarSettings
from toolwire.server.core.metrics import CONTENT_TYPE, Metrics
from toolwire.server.core.pipeline import Limits
from toolwire.server.core.tracing import Tracing
from toolwire.server.core.turn import Turn
from toolwire.server.health import Readiness, live
from toolwire.server.responses.store import MemoryStore, ResponseStore

__all__ = ["create_app", "startup_warnings"]


def _pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


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


class OpenAiErrors:
    """The error shape of the routes beside the APIs (`/v1/models`, `/metrics`)."""

    fields: Mapping[str, str] = {}

    def error_body(self, error: ApiError) -> dict[str, Any]:
        return openai_error(error)


def create_app(
    engine: Engine,
    limits: Limits | None = None,
    metrics: Metrics | None = None,
    grammar: GrammarSettings | None = None,
    store: ResponseStore | None = None,
    *,
    keys: Keys | None = None,
    protect_metrics: bool = False,
    tracing: Tracing | None = None,
    ready_timeout: float = 5.0,
) -> FastAPI:
    """The FastAPI application serving `engine`; `store` keeps the Responses API's
    stored responses (default: in this process's memory); `keys`: the API keys callers
    must send (default none: no authentication); `tracing`: where spans go (default
    nowhere)."""
    limits = limits or Limits()
    metrics = metrics or Metrics()
    store = MemoryStore() if store is None else store
    app = FastAPI(title="toolwire", version=__version__)
    app.state.metrics = metrics
    app.state.engine = engine
    app.state.store = store
    grammars = GrammarService.for_engine(engine, metrics.registry, grammar)
    app.state.grammars = grammars
    gated = formats.is_gated(engine.format, engine.tokenizer)
    warnings = startup_warnings(engine)
    turn = Turn(engine, limits, metrics, grammars, keys, tracing)
    app.state.turn = turn
    readiness = Readiness(turn, store, ready_timeout)
    errors = OpenAiErrors()

    chat.add_routes(app, turn)
    responses.add_routes(app, turn, store)
    messages.add_routes(app, turn)

    @app.get("/v1/models")
    async def models(http: Request) -> Response:
        async def work() -> Response:
            names = [engine.model, *(a for a in limits.model_aliases if not _pattern(a))]
            listed = []
            for name in dict.fromkeys(names):
                model: dict[str, Any] = {
                    "id": name,
                    "object": "model",
                    "created": 0,
                    "owned_by": "toolwire",
                    "root": engine.model,
                }
                if engine.context_length is not None:
                    model["max_model_len"] = engine.context_length
                listed.append(model)
            return JSONResponse({"object": "list", "data": listed})

        return await turn.answer(errors, "/v1/models", http, work)

    @app.api_route("/api/hello", methods=["GET", "HEAD"])
    async def hello() -> dict[str, Any]:
        # Claude Code's reachability probe of its base URL (HEAD), before its first turn
        metrics.requests.labels("/api/hello", "200").inc()
        return {"status": "ok"}

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

    @app.get("/health/live")
    async def health_live() -> dict[str, Any]:
        return live()

    @app.get("/health/ready")
    async def health_ready() -> Response:
        status, body = await readiness.check()
        return JSONResponse(body, status_code=status)

    @app.get("/metrics")
    async def prometheus(http: Request) -> Response:
        async def work() -> Response:
            return Response(metrics.render(), media_type=CONTENT_TYPE)

        if protect_metrics:
            return await turn.answer(errors, "/metrics", http, work)
        return await work()

    return app
