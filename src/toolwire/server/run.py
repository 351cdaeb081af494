"""`toolwire serve`: build the engine, log what the operator must know, run uvicorn.

uvicorn runs on uvloop with httptools' parser (the `server` extra installs both): per
streamed token, asyncio's own loop and h11 cost the proxy several times more. Where
either is missing (uvloop has no Windows build) the pure-Python one runs, with a
warning.
"""

from __future__ import annotations

import importlib.util
import logging

import uvicorn
from fastapi import FastAPI

from toolwire.backends.base import Engine
from toolwire.server.app import create_app, startup_warnings
from toolwire.server.config import ServerConfig, served_names
from toolwire.server.core.grammars import GrammarSettings
from toolwire.server.core.pipeline import Limits, warm_up
from toolwire.server.engines import build_engine

__all__ = ["build_app", "grammar_from", "limits_from", "loop_and_http", "prepare", "serve"]

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
        hosted_tools=config.hosted_tools,
        model_aliases=served_names(config)[1],
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
        "serving %r on the %s engine, format %r, context %s, at http://%s:%d",
        engine.model,
        config.engine,
        engine.format,
        engine.context_length or "unknown",
        config.host,
        config.port,
    )
    return prepare(engine, limits_from(config), grammar_from(config))


def loop_and_http() -> tuple[str, str]:
    """uvicorn's `loop` and `http` settings: uvloop and httptools when installed."""
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    for name, used in (("uvloop", loop), ("httptools", http)):
        if used != name:
            log.warning(
                "%s is not installed: serving on %s, which costs more per token", name, used
            )
    return loop, http


def serve(config: ServerConfig) -> None:
    """Run the server until interrupted."""
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = build_app(config)
    loop, http = loop_and_http()
    uvicorn.run(
        app,
        host=config.host,
        port=config.port,
        log_level=config.log_level.lower(),
        loop=loop,
        http=http,
    )
