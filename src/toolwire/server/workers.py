"""`--workers N`: N server processes on one port, one set of metrics, one store.

Data flow::

    toolwire serve --workers N (the supervisor; it serves nothing itself)
        PROMETHEUS_MULTIPROC_DIR  set (a fresh temporary directory unless the operator
                                  set one; its old *.db files are removed: counts of a
                                  previous run must not add up with this one's)
        TOOLWIRE_SERVE_CONFIG     the configuration, as JSON, without the keys
        TOOLWIRE_SERVE_KEYS       the keys' SHA-256 digests (never the keys)
        -> uvicorn.run("toolwire.server.run:worker_app", factory=True, workers=N)
    each worker (a fresh interpreter, spawned): worker_config() -> build_app()
        its own engine (the embedded model is loaded once per worker), the shared
        store (the SQLite file or Redis), metrics written to the directory

Why processes: a worker's event loop and parser run on one core; N workers use N. The
kernel spreads connections over the workers' accept calls on the shared socket. Any
worker's `/metrics` renders the sum over all (`core/metrics.py`); a worker that exits
cleanly marks itself dead, so live-summed gauges drop its values. `--store memory`
cannot be shared and is refused with `--workers` (`config.py`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import uvicorn

from toolwire.server.config import ServerConfig
from toolwire.server.core.auth import Keys

__all__ = ["CONFIG", "KEYS", "run_workers", "worker_config", "worker_exits"]

log = logging.getLogger("toolwire.server")

#: The variables a worker reads its configuration and keys from.
CONFIG = "TOOLWIRE_SERVE_CONFIG"
KEYS = "TOOLWIRE_SERVE_KEYS"
_METRICS = "PROMETHEUS_MULTIPROC_DIR"


def _metrics_dir() -> tuple[Path, bool]:
    """The multiprocess metrics directory, emptied of old values; True if made here."""
    given = os.environ.get(_METRICS)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for old in path.glob("*.db"):
            old.unlink()
        return path, False
    return Path(tempfile.mkdtemp(prefix="toolwire-metrics-")), True


def run_workers(config: ServerConfig, keys: Keys, options: dict[str, Any]) -> None:
    """Serve with `config.workers` processes until interrupted."""
    directory, made = _metrics_dir()
    os.environ[_METRICS] = str(directory)
    values = asdict(config)
    values.pop("api_key")
    values.pop("api_key_file")
    os.environ[CONFIG] = json.dumps(values)
    os.environ[KEYS] = ",".join(keys.digests())
    log.info("starting %d workers; metrics summed in %s", config.workers, directory)
    try:
        uvicorn.run(
            "toolwire.server.run:worker_app",
            factory=True,
            workers=config.workers,
            **options,
        )
    finally:
        if made:
            shutil.rmtree(directory, ignore_errors=True)


def worker_config() -> tuple[ServerConfig, Keys]:
    """A worker's configuration and keys, as the supervisor handed them down."""
    values = json.loads(os.environ[CONFIG])
    config = ServerConfig(**values, api_key=())
    digests = [d for d in os.environ.get(KEYS, "").split(",") if d]
    return config, Keys.from_digests(digests)


def worker_exits() -> None:
    """A worker shuts down: its live gauges leave the sums."""
    if os.environ.get(_METRICS):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
