"""`toolwire serve`: build the engine, log what the operator must know, run uvicorn."""

from __future__ import annotations

import logging

import uvicorn
from fastapi import FastAPI

from toolwire.backends.base import Engine
from toolwire.server.app import create_app, startup_warnings
from toolwire.server.config import ServerConfig
from toolwire.server.core.grammars import GrammarSettings
from toolwire.server.core.pipeline import Limits, warm_up
from toolwire.server.engines import build_engine

__all__ = ["build_app", "grammar_from", "limits_from", "prepare", "serve"]

log = logging.getLogger("toolwire.server")


def limits_from(config: ServerConfig) -> Limits:
    """The per-request limits a configuration sets."""
    return Limits(
        default_max_tokens=config.max_tokens,
        timeout=config.timeout or None,
        stream_tool_arguments=config.stream_tool_arguments,
        max_body_bytes=config.max_body_bytes,
        max_tools=config.max_tools,
        max_nesting=config.max_nesting,
    )


def grammar_from(config: ServerConfig) -> GrammarSettings:
    """The bounds of structural tag compiles a configuration sets."""
    return GrammarSettings(
        timeout=config.grammar_timeout or None,
        workers=config.grammar_workers,
        cache_entries=config.grammar_cache,
        cache_bytes=config.grammar_cache_mb * 1024 * 1024,
    )


def prepare(engine: Engine, limits: Limits, grammar: GrammarSettings | None = None) -> FastAPI:
    """Startup on a built engine: log the warnings, warm up, and build the app."""
    for warning in startup_warnings(engine):
        log.warning(warning)
    warm_up(engine)
    return create_app(engine, limits, grammar=grammar)


def build_app(config: ServerConfig) -> FastAPI:
    """Everything `serve` does before listening: engine, warnings, warm-up, app."""
    engine = build_engine(config)
    log.info(
        "serving %r on the %s engine, format %r, at http://%s:%d",
        engine.model,
        config.engine,
        engine.format,
        config.host,
        config.port,
    )
    return prepare(engine, limits_from(config), grammar_from(config))


def serve(config: ServerConfig) -> None:
    """Run the server until interrupted."""
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = build_app(config)
    uvicorn.run(app, host=config.host, port=config.port, log_level=config.log_level.lower())
