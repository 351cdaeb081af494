"""Which response store `--store` names, and where the default one lives.

--store memory               MemoryStore (store.py): this process only
--store redis://HOST:PORT/DB RedisStore (redis_store.py; also rediss://, unix://)
--store PATH                 SqliteStore (sqlite_store.py) on that file
(no --store)                 SqliteStore on $XDG_CACHE_HOME/toolwire/responses.sqlite3
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from toolwire.server.responses.store import MemoryStore, ResponseStore, StoreSettings

__all__ = ["default_path", "open_store"]


def default_path(environ: Mapping[str, str]) -> Path:
    """The default SQLite file: `$XDG_CACHE_HOME/toolwire/responses.sqlite3` (XDG's
    default `~/.cache`)."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolwire" / "responses.sqlite3"


def open_store(
    spec: str | None, settings: StoreSettings, environ: Mapping[str, str] | None = None
) -> ResponseStore:
    """The store `--store` names: None (the default SQLite file), a file path,
    `memory`, or a `redis://` / `rediss://` / `unix://` URL."""
    if spec == "memory":
        return MemoryStore(settings)
    if spec is not None and spec.startswith(("redis://", "rediss://", "unix://")):
        from toolwire.server.responses.redis_store import RedisStore

        return RedisStore(spec, settings)
    from toolwire.server.responses.sqlite_store import SqliteStore

    path = default_path(os.environ if environ is None else environ) if spec is None else Path(spec)
    return SqliteStore(path, settings)
