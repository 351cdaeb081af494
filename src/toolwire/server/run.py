"""`toolwire serve`: build the engine, log what the operator must know, run uvicorn.

One process (`--workers 1`): the app is built here and served. Several (`--workers N`,
`workers.py`): this process supervises N processes sharing the port, each building
its own engine and app in `worker_main()` from the configuration handed down; metrics
are summed over them, the store (SQLite file or Redis) is shared.

uvicorn runs on uvloop with httptools' parser (the `server` extra installs both): per
streamed token, asyncio's own loop and h11 cost the proxy several times more. Where
either is missing (uvloop has no Windows build) the pure-Python one runs, with a
warning.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

import uvicorn
from fastapi import FastAPI

from toolwire.backends.base import Engine
from toolwire.errors import ToolwireError
from toolwire.server.app import create_app, startup_warnings
from toolwire.server.config import ServerConfig, served_names
from toolwire.server.core.auth import Keys, read_key_file
from toolwire.server.core.grammars import GrammarSettings
from toolwire.server.core.pipeline import Limits, warm_up
from toolwire.server.core.tracing import Tracing
from toolwire.server.engines import build_engine
from toolwire.server.guidance import describe, policy_from
from toolwire.server.responses.store import ResponseStore, StoreSettings
from toolwire.server.responses.stores import open_store

__all__ = [
    "build_app",
    "grammar_from",
    "keys_from",
    "limits_from",
    "loop_and_http",
    "prepare",
    "serve",
    "store_from",
    "worker_main",
]

log = logging.getLogger("toolwire.server")

_MB = 1024 * 1024


def limits_from(config: ServerConfig) -> Limits:
    """The per-request limits (and guidance policy) a configuration sets."""
    switches = {name: getattr(config, name) for name in describe(Limits().guidance)}
    return Limits(
        default_max_tokens=config.max_tokens,
        timeout=config.timeout or None,
        # the upstream's wait for its next event, in tokens (comments and empty events
        # do not count); the embedded engine is in the process
        token_timeout=(config.upstream_timeout or None) if config.engine != "llama" else None,
        stream_tool_arguments=config.stream_tool_arguments,
        max_body_bytes=config.max_body_bytes,
        max_tools=config.max_tools,
        max_nesting=config.max_nesting,
        max_echo_bytes=config.max_echo_bytes,
        guidance=policy_from(switches),
        hosted_tools=config.hosted_tools,
        model_aliases=served_names(config)[1],
    )


def grammar_from(config: ServerConfig) -> GrammarSettings:
    """The bounds of structural tag compiles a configuration sets."""
    return GrammarSettings(
        timeout=config.grammar_timeout or None,
        workers=config.grammar_workers,
        cache_entries=config.grammar_cache,
        cache_bytes=config.grammar_cache_mb * _MB,
    )


def store_from(config: ServerConfig) -> ResponseStore:
    """The response store `--store` names, with its TTL and byte bound."""
    settings = StoreSettings(ttl=config.store_ttl or None, max_bytes=config.store_max_mb * _MB)
    return open_store(config.store, settings)


def keys_from(config: ServerConfig) -> Keys:
    """The API keys of `--api-key` and `--api-key-file`."""
    keys = list(config.api_key)
    if config.api_key_file:
        keys += read_key_file(config.api_key_file)
    return Keys(keys)


def _tracing_from(config: ServerConfig) -> Tracing:
    if not config.otlp_endpoint:
        return Tracing.off()
    return Tracing.to_collector(config.otlp_endpoint, config.otlp_protocol)


def prepare(
    engine: Engine,
    limits: Limits,
    grammar: GrammarSettings | None = None,
    **options: Any,
) -> FastAPI:
    """Startup on a built engine: log the warnings, warm up, and build the app
    (`options`: `create_app`'s keyword arguments)."""
    for warning in startup_warnings(engine):
        log.warning(warning)
    warm_up(engine, limits)
    return create_app(engine, limits, grammar=grammar, **options)


def build_app(config: ServerConfig, keys: Keys | None = None) -> FastAPI:
    """Everything `serve` does before listening: engine, warnings, warm-up, app
    (`keys`: given to a worker, else read from the configuration)."""
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
    limits = limits_from(config)
    policy = ", ".join(f"{k}={v}" for k, v in describe(limits.guidance).items())
    log.info("guidance policy: %s", policy)
    store = store_from(config)
    days = config.store_ttl / 86400
    ttl = (
        (f"{days:g} days" if days >= 1 else f"{config.store_ttl:g} s")
        if config.store_ttl
        else "none"
    )
    log.info("responses stored in %s (ttl %s, %d MB per key)", store.name, ttl, config.store_max_mb)
    keys = keys_from(config) if keys is None else keys
    if keys.enabled:
        shown = "protected" if config.protect_metrics else "open"
        log.info("API keys: %d configured; /health open, /metrics %s", len(keys), shown)
    else:
        log.warning("no API key configured: every caller is one anonymous tenant")
    tracing = _tracing_from(config)
    if tracing.on:
        log.info("traces exported to %s (%s)", config.otlp_endpoint, config.otlp_protocol)
    return prepare(
        engine,
        limits,
        grammar_from(config),
        store=store,
        keys=keys,
        protect_metrics=config.protect_metrics,
        tracing=tracing,
        ready_timeout=config.ready_timeout,
    )


def _logging(config: ServerConfig) -> None:
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def _uvicorn_options(config: ServerConfig) -> dict[str, Any]:
    """What every way of serving passes to uvicorn."""
    loop, http = loop_and_http()
    return {
        "host": config.host,
        "port": config.port,
        "log_level": config.log_level.lower(),
        "loop": loop,
        "http": http,
    }


def worker_main(ready: Any) -> None:
    """One worker process under `--workers N`: its app, then its own socket on the port
    (`workers.listening`), then uvicorn on it; `ready` (an event) is set before serving.
    What stops `toolwire serve` with a message (a missing model, a port taken) stops the
    worker with that message and exit status 2."""
    from toolwire.server.workers import listening, worker_config, worker_exits

    config, keys = worker_config()
    _logging(config)
    try:
        app = build_app(config, keys)
        options = _uvicorn_options(config)
        sock = listening(options.pop("host"), options.pop("port"))
    except (ToolwireError, OSError, ValueError) as exc:  # what the CLI reports as usage
        log.error("worker cannot start: %s", exc)
        raise SystemExit(2) from None
    server = uvicorn.Server(uvicorn.Config(app, **options))
    ready.set()
    try:
        server.run(sockets=[sock])
    finally:
        worker_exits()


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
    _logging(config)
    if config.workers > 1:
        from toolwire.server.workers import run_workers

        run_workers(config, keys_from(config), worker_main)
        return
    app = build_app(config)
    uvicorn.run(app, **_uvicorn_options(config))
