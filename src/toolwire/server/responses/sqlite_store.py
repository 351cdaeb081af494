"""Stored responses in one SQLite file: survives restarts, shared by one host's workers.

Schema (created on first open; `user_version` 1)::

    responses(tenant, id, previous, created, size, response BLOB, items BLOB)
        primary key (tenant, id); index (tenant, created); index (created)
    tenants(tenant, bytes)      kept equal to SUM(size) per tenant by two triggers

Every process (each `--workers` worker, a restarted server) opens the same file in WAL
mode: readers never wait for a writer, and a writer takes the write lock with
`BEGIN IMMEDIATE` (waiting up to `busy_timeout`). A put is one transaction: the
expired entries of every tenant are deleted, the record inserted, then the tenant's
oldest entries deleted while its bytes exceed the bound. `synchronous=NORMAL`: a
committed response survives a crash of the process; a power loss may lose the last
ones (WAL's documented trade-off).

A chain is read with one recursive query (`history`), newest turn first; a gap (an
expired or evicted turn) is found where the oldest row read still names a previous.

One connection per thread (SQLite connections are not shared across threads); the
server calls the store from its worker threads.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolwire.server.responses.store import Record, StoreSettings, chain_error, decode, items_of

__all__ = ["SqliteStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    previous TEXT,
    created REAL NOT NULL,
    size INTEGER NOT NULL,
    response BLOB NOT NULL,
    items BLOB NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS responses_by_age ON responses (tenant, created);
CREATE INDEX IF NOT EXISTS responses_by_time ON responses (created);
CREATE TABLE IF NOT EXISTS tenants (
    tenant TEXT PRIMARY KEY,
    bytes INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS responses_added AFTER INSERT ON responses BEGIN
    INSERT INTO tenants (tenant, bytes) VALUES (NEW.tenant, NEW.size)
        ON CONFLICT (tenant) DO UPDATE SET bytes = bytes + NEW.size;
END;
CREATE TRIGGER IF NOT EXISTS responses_removed AFTER DELETE ON responses BEGIN
    UPDATE tenants SET bytes = bytes - OLD.size WHERE tenant = OLD.tenant;
END;
PRAGMA user_version = 1;
"""

#: Newest turn first; `depth` bounds a corrupt (cyclic) chain.
_CHAIN = """
WITH RECURSIVE chain (id, previous, items, depth) AS (
    SELECT id, previous, items, 0 FROM responses
        WHERE tenant = :tenant AND id = :id AND created >= :cutoff
    UNION ALL
    SELECT r.id, r.previous, r.items, chain.depth + 1
        FROM responses AS r JOIN chain ON r.tenant = :tenant AND r.id = chain.previous
        WHERE r.created >= :cutoff AND chain.depth < 100000
)
SELECT id, previous, items FROM chain ORDER BY depth
"""


class SqliteStore:
    """`ResponseStore` over one SQLite file (see the module docstring)."""

    def __init__(
        self, path: str | Path, settings: StoreSettings | None = None, *, busy_timeout: float = 10.0
    ) -> None:
        self.path = Path(path)
        self.settings = settings or StoreSettings()
        self.name = f"sqlite:{self.path}"
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = self._db()
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript("BEGIN IMMEDIATE;" + _SCHEMA + "COMMIT;")  # idempotent

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,  # transactions are explicit
                check_same_thread=False,  # closed from `close()`'s thread
            )
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
            with self._lock:
                self._connections.append(db)
        return db

    @staticmethod
    @contextlib.contextmanager
    def _writing(db: sqlite3.Connection) -> Iterator[None]:
        """One write transaction, holding the write lock from its start."""
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _cutoff(self) -> float:
        ttl = self.settings.ttl
        return float("-inf") if ttl is None else time.time() - ttl

    def put(self, tenant: str, record: Record) -> bool:
        size = record.size
        bound = self.settings.max_bytes
        if size > bound:
            return False
        db = self._db()
        with self._writing(db):
            if self.settings.ttl is not None:
                db.execute("DELETE FROM responses WHERE created < ?", (self._cutoff(),))
            db.execute("DELETE FROM responses WHERE tenant = ? AND id = ?", (tenant, record.id))
            db.execute(
                "INSERT INTO responses (tenant, id, previous, created, size, response, items) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    tenant,
                    record.id,
                    record.previous,
                    record.created,
                    size,
                    record.response,
                    record.items,
                ),
            )
            (used,) = db.execute("SELECT bytes FROM tenants WHERE tenant = ?", (tenant,)).fetchone()
            excess = used - bound
            if excess > 0:
                doomed: list[tuple[str, str]] = []
                rows = db.execute(
                    "SELECT id, size FROM responses WHERE tenant = ? AND id != ? "
                    "ORDER BY created, rowid",
                    (tenant, record.id),
                )
                for response_id, entry_size in rows:
                    if excess <= 0:
                        break
                    doomed.append((tenant, response_id))
                    excess -= entry_size
                db.executemany("DELETE FROM responses WHERE tenant = ? AND id = ?", doomed)
        return True

    def get(self, tenant: str, response_id: str) -> dict[str, Any] | None:
        row = (
            self._db()
            .execute(
                "SELECT response FROM responses WHERE tenant = ? AND id = ? AND created >= ?",
                (tenant, response_id, self._cutoff()),
            )
            .fetchone()
        )
        return None if row is None else decode(row[0])

    def history(self, tenant: str, response_id: str) -> list[dict[str, Any]]:
        rows = (
            self._db()
            .execute(_CHAIN, {"tenant": tenant, "id": response_id, "cutoff": self._cutoff()})
            .fetchall()
        )
        if not rows:
            raise chain_error(response_id, response_id)
        oldest_previous = rows[-1][1]
        if oldest_previous is not None:
            raise chain_error(response_id, oldest_previous)
        return items_of(items for _, _, items in reversed(rows))

    def delete(self, tenant: str, response_id: str) -> bool:
        db = self._db()
        with self._writing(db):
            cursor = db.execute(
                "DELETE FROM responses WHERE tenant = ? AND id = ? AND created >= ?",
                (tenant, response_id, self._cutoff()),
            )
        return cursor.rowcount > 0

    def used(self, tenant: str) -> int:
        row = self._db().execute("SELECT bytes FROM tenants WHERE tenant = ?", (tenant,)).fetchone()
        return 0 if row is None else int(row[0])

    def ping(self) -> None:
        self._db().execute("SELECT 1 FROM tenants LIMIT 1").fetchall()

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for db in connections:
            db.close()
        self._local = threading.local()
