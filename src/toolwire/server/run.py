"""`toolwire serve`: build the engine, log what the operator must know, run uvicorn."""

from __future__ import annotations

import logging

import uvicorn

from toolwire.server.app import create_app, startup_warnings
from toolwire.server.config import ServerConfig
from toolwire.server.engines import build_engine
from toolwire.server.pipeline import Limits, warm_up

__all__ = ["serve"]

log = logging.getLogger("toolwire.server")


def serve(config: ServerConfig) -> None:
    """Run the server until interrupted."""
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    engine = build_engine(config)
    log.info(
        "serving %r on the %s engine, format %r, at http://%s:%d",
        engine.model,
        config.engine,
        engine.format,
        config.host,
        config.port,
    )
    for warning in startup_warnings(engine):
        log.warning(warning)
    warm_up(engine)
    limits = Limits(
        default_max_tokens=config.max_tokens,
        timeout=config.timeout or None,
        stream_tool_arguments=config.stream_tool_arguments,
    )
    app = create_app(engine, limits)
    uvicorn.run(app, host=config.host, port=config.port, log_level=config.log_level.lower())
