"""`--workers N`: N server processes on one port, one set of metrics, one store.

Data flow::

    toolwire serve --workers N (the supervisor; it serves nothing itself)
        PROMETHEUS_MULTIPROC_DIR  set (a fresh temporary directory unless the operator
                                  set one; its old *.db files are removed: counts of a
                                  previous run must not add up with this one's)
        TOOLWIRE_SERVE_CONFIG     the configuration, as JSON, without the keys
        TOOLWIRE_SERVE_KEYS       the keys' SHA-256 digests (never the keys)
        -> N processes (spawned: fresh interpreters), each running `target(ready)`:
    each worker: worker_config() -> its own engine and app (the embedded model is
        loaded once per worker), the shared store (the SQLite file or Redis), metrics
        written to the directory; then `listening()`: its own socket on the port
        (SO_REUSEPORT), and uvicorn serves on it

Why one socket per worker: on one shared socket, the worker whose loop wakes first
accepts every connection waiting (asyncio takes up to 100 per wakeup), so how a burst
divides depends on which loop is idle; with SO_REUSEPORT the kernel hashes each new
connection to one worker's socket. A
worker binds only once its app is built, so no connection waits for a worker that is
still loading its model.

The supervisor stops every worker on SIGINT/SIGTERM; a worker that dies before it
was ready fails the start (with its exit status); one that dies later is replaced, and its
live-summed gauges leave the sums. Any worker's `/metrics` renders the sum over all
(`core/metrics.py`). `--store memory` cannot be shared and is refused with `--workers`
(`config.py`).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from toolwire.errors import UsageError
from toolwire.server.config import ServerConfig
from toolwire.server.core.auth import Keys

__all__ = ["CONFIG", "KEYS", "listening", "run_workers", "worker_config", "worker_exits"]

log = logging.getLogger("toolwire.server")

#: The variables a worker reads its configuration and keys from.
CONFIG = "TOOLWIRE_SERVE_CONFIG"
KEYS = "TOOLWIRE_SERVE_KEYS"
_METRICS = "PROMETHEUS_MULTIPROC_DIR"

#: A worker's main function: it sets the event once it is ready to serve.
Target = Callable[[Any], None]


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


def listening(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening socket on `host:port` that other workers share (SO_REUSEPORT)."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise UsageError("--workers needs SO_REUSEPORT (Linux, macOS, BSD)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


class _Worker:
    def __init__(self, context: Any, target: Target, number: int) -> None:
        self.ready = context.Event()
        self.process = context.Process(
            target=target, args=(self.ready,), name=f"toolwire-worker-{number}", daemon=False
        )
        self.number = number
        self.process.start()


def run_workers(config: ServerConfig, keys: Keys, target: Target) -> None:
    """Serve with `config.workers` processes running `target` until interrupted."""
    listening(config.host, config.port).close()  # a port taken fails now, before any load
    directory, made = _metrics_dir()
    os.environ[_METRICS] = str(directory)
    values = asdict(config)
    values.pop("api_key")
    values.pop("api_key_file")
    os.environ[CONFIG] = json.dumps(values)
    os.environ[KEYS] = ",".join(keys.digests())
    log.info("starting %d workers; metrics summed in %s", config.workers, directory)
    context = multiprocessing.get_context("spawn")
    stopping: list[int] = []

    def stop(signum: int, _frame: Any) -> None:
        stopping.append(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    workers = [_Worker(context, target, n) for n in range(config.workers)]
    failed = 0
    try:
        while not stopping:
            time.sleep(0.2)
            for i, worker in enumerate(workers):
                if worker.process.is_alive():
                    continue
                code = worker.process.exitcode
                if not worker.ready.is_set():
                    log.error("worker %d failed to start (exit %s)", worker.number, code)
                    failed = code if code and code > 0 else 1
                    stopping.append(0)
                    break
                log.warning("worker %d (pid %s) exited (%s): replaced", i, worker.process.pid, code)
                _mark_dead(worker.process.pid)
                workers[i] = _Worker(context, target, worker.number)
    finally:
        for worker in workers:
            if worker.process.is_alive():
                worker.process.terminate()  # uvicorn's graceful shutdown on SIGTERM
        for worker in workers:
            worker.process.join(timeout=30)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if made:
            shutil.rmtree(directory, ignore_errors=True)
    if failed:
        raise SystemExit(failed)


def worker_config() -> tuple[ServerConfig, Keys]:
    """A worker's configuration and keys, as the supervisor handed them down."""
    values = json.loads(os.environ[CONFIG])
    config = ServerConfig(**values, api_key=())
    digests = [d for d in os.environ.get(KEYS, "").split(",") if d]
    return config, Keys.from_digests(digests)


def _mark_dead(pid: int | None) -> None:
    if pid is not None and os.environ.get(_METRICS):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def worker_exits() -> None:
    """A worker shuts down: its live gauges leave the sums."""
    _mark_dead(os.getpid())
