"""The HTTP application: one shared turn, and one line per API that runs on it.

Routes::

    POST /v1/chat/completions        chat/        (Chat Completions)
    POST /v1/responses, GET .../{id}  responses/   (Responses, with its store)
    POST /v1/messages, .../count_tokens  messages/ (Anthropic Messages)
    GET  /v1/models                  the one served model
    GET  /health                     liveness, and what the operator was warned about
    GET  /metrics                    Prometheus text

Every API's turn route goes through `core.turn.Turn` (validation, rendering, the
grammar service, the engine, the parser, the API's framer, errors and counting); an
API package only adds its adapter, writer, framer and error shape. No parsing
happens here.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response

from toolwire import __version__, formats
from toolwire.backends.base import Engine
from toolwire.server import chat, messages, responses
from toolwire.server.core.grammars import GrammarService, GrammarSettings
from toolwire.server.core.metrics import CONTENT_TYPE, Metrics
from toolwire.server.core.pipeline import Limits
from toolwire.server.core.turn import Turn
from toolwire.server.responses.store import ResponseStore

__all__ = ["create_app", "startup_warnings"]


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
    store: ResponseStore | None = None,
) -> FastAPI:
    """The FastAPI application serving `engine`; `store` keeps the Responses API's
    stored responses (default: a bounded in-memory store)."""
    limits = limits or Limits()
    metrics = metrics or Metrics()
    app = FastAPI(title="toolwire", version=__version__)
    app.state.metrics = metrics
    app.state.engine = engine
    grammars = GrammarService.for_engine(engine, metrics.registry, grammar)
    app.state.grammars = grammars
    gated = formats.is_gated(engine.format, engine.tokenizer)
    warnings = startup_warnings(engine)
    turn = Turn(engine, limits, metrics, grammars)

    chat.add_routes(app, turn)
    responses.add_routes(app, turn, ResponseStore() if store is None else store)
    messages.add_routes(app, turn)

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
