"""Stored responses, for `previous_response_id`, `GET` and `DELETE /v1/responses/{id}`.

One small interface (`ResponseStore`), three backends::

    memory          MemoryStore   this process only, lost on restart (tests)
    PATH (default)  SqliteStore   one file (WAL): survives restarts, shared by the
                                  workers of one host (`sqlite_store.py`)
    redis://...     RedisStore    shared by replicas across hosts (`redis_store.py`)

`stores.open_store(spec, settings)` picks one from the `--store` text.

Every entry belongs to a tenant (the caller's key, `core/auth.py`; `anonymous` when
authentication is off) and is looked up under it: another tenant's id is "not found",
exactly like an id that never existed, for `get`, `history` and `delete`.

What an entry holds (`Record`): the response object and the turn's own items (its
input items, then its output as input items) as JSON bytes, the id of the previous
response, and its creation time. A conversation of N turns costs O(N) bytes: each turn
keeps its own items and a link. A chain with a turn that expired or was evicted cannot
be continued, and says so.

Bounds, per tenant, so that one tenant cannot evict another's:

* bytes: `max_bytes` of records, counted as the bytes the backend stores (the JSON
  bytes, plus `OVERHEAD` per entry for its bookkeeping); the oldest entries of that
  tenant are evicted first; a record larger than the bound is not stored;
* age: `ttl` seconds (None: kept until evicted); an expired entry is never returned.

Calls block (file and network I/O): callers run them off the event loop. The JSON
(de)serialization is here, once per entry, so every backend counts the same bytes.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from toolwire.server.core.errors import ApiError

__all__ = [
    "OVERHEAD",
    "MemoryStore",
    "Record",
    "ResponseStore",
    "StoreSettings",
    "chain_error",
    "decode",
    "encode",
    "items_of",
    "walk",
]

#: Bytes counted per entry beyond its JSON: ids, link, times and the backend's own
#: bookkeeping (measured for the memory store, a little above it for the others).
OVERHEAD = 512


@dataclass(frozen=True)
class StoreSettings:
    """The bounds of a store (`--store-ttl`, `--store-max-mb`)."""

    #: Seconds an entry is kept (None: until the byte bound evicts it).
    ttl: float | None = 30 * 24 * 3600.0
    #: Bytes of entries kept per tenant.
    max_bytes: int = 256 * 1024 * 1024


@dataclass(frozen=True)
class Record:
    """One stored response, serialized."""

    id: str
    response: bytes
    #: This turn's input items, then its output as input items (normalized shapes).
    items: bytes
    previous: str | None
    created: float

    @property
    def size(self) -> int:
        """The bytes this entry counts against its tenant's bound."""
        return len(self.response) + len(self.items) + OVERHEAD


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def encode(
    response: Mapping[str, Any],
    items: list[dict[str, Any]],
    previous: str | None,
    created: float | None = None,
) -> Record:
    """A finished response and its turn's items as a record."""
    return Record(
        str(response["id"]),
        _dumps(response),
        _dumps(items),
        previous,
        time.time() if created is None else created,
    )


def decode(data: bytes) -> Any:
    return json.loads(data)


def chain_error(response_id: str, missing: str) -> ApiError:
    """The 404 for a `previous_response_id` whose chain cannot be read back (OpenAI's
    status and code for an unknown previous response)."""
    what = "was not found" if missing == response_id else "has an expired or evicted turn"
    return ApiError(
        404,
        f"previous response {response_id!r} {what}",
        param="previous_response_id",
        code="previous_response_not_found",
    )


class ResponseStore(Protocol):
    """Responses by tenant and id (blocking calls)."""

    #: What the store is, for /health/ready and the log (no password).
    name: str
    settings: StoreSettings

    def put(self, tenant: str, record: Record) -> bool:
        """Keep `record` (False: larger than the tenant's bound, not kept); evicts the
        tenant's oldest entries past the bound."""
        ...

    def get(self, tenant: str, response_id: str) -> dict[str, Any] | None:
        """The stored response object, or None (unknown, another tenant's, expired)."""
        ...

    def history(self, tenant: str, response_id: str) -> list[dict[str, Any]]:
        """Every item of the conversation up to and including `response_id`; raises
        `chain_error` when it or an earlier turn is gone."""
        ...

    def delete(self, tenant: str, response_id: str) -> bool:
        """Forget one response (False: there was none to forget)."""
        ...

    def used(self, tenant: str) -> int:
        """The bytes the tenant's entries count."""
        ...

    def ping(self) -> None:
        """Raise when the store cannot be reached (readiness)."""
        ...

    def close(self) -> None: ...


def walk(response_id: str, fetch: Callable[[str], tuple[bytes, str | None] | None]) -> list[bytes]:
    """A chain's items (serialized), oldest turn first, read one turn at a time with
    `fetch` (id -> its items and previous id, or None when gone)."""
    turns: list[bytes] = []
    current: str | None = response_id
    while current is not None:
        found = fetch(current)
        if found is None:
            raise chain_error(response_id, current)
        items, current = found
        turns.append(items)
    turns.reverse()
    return turns


def items_of(turns: Iterable[bytes]) -> list[dict[str, Any]]:
    """The items of a chain's turns (`walk`), as one list."""
    return [item for items in turns for item in decode(items)]


class MemoryStore:
    """Records in this process's memory, per tenant, oldest evicted first (tests, and
    single processes that need nothing to survive them)."""

    name = "memory"

    def __init__(
        self, settings: StoreSettings | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings or StoreSettings()
        self._clock = clock
        self._tenants: dict[str, OrderedDict[str, Record]] = {}
        self._bytes: dict[str, int] = {}
        self._lock = threading.Lock()

    def _live(self, tenant: str) -> OrderedDict[str, Record]:
        """The tenant's entries, the expired ones dropped first (caller holds the lock)."""
        entries = self._tenants.setdefault(tenant, OrderedDict())
        ttl = self.settings.ttl
        if ttl is not None:
            cutoff = self._clock() - ttl
            while entries:
                oldest = next(iter(entries.values()))
                if oldest.created >= cutoff:
                    break
                self._drop(tenant, oldest.id)
        return entries

    def _drop(self, tenant: str, response_id: str) -> bool:
        record = self._tenants.get(tenant, OrderedDict()).pop(response_id, None)
        if record is None:
            return False
        self._bytes[tenant] -= record.size
        return True

    def put(self, tenant: str, record: Record) -> bool:
        if record.size > self.settings.max_bytes:
            return False
        with self._lock:
            entries = self._live(tenant)
            self._drop(tenant, record.id)
            entries[record.id] = record
            self._bytes[tenant] = self._bytes.get(tenant, 0) + record.size
            while self._bytes[tenant] > self.settings.max_bytes:
                self._drop(tenant, next(iter(entries)))
        return True

    def get(self, tenant: str, response_id: str) -> dict[str, Any] | None:
        with self._lock:
            record = self._live(tenant).get(response_id)
        return None if record is None else decode(record.response)

    def history(self, tenant: str, response_id: str) -> list[dict[str, Any]]:
        def fetch(current: str) -> tuple[bytes, str | None] | None:
            record = entries.get(current)
            return None if record is None else (record.items, record.previous)

        with self._lock:
            entries = self._live(tenant)
            turns = walk(response_id, fetch)
        return items_of(turns)

    def delete(self, tenant: str, response_id: str) -> bool:
        with self._lock:
            self._live(tenant)
            return self._drop(tenant, response_id)

    def used(self, tenant: str) -> int:
        with self._lock:
            self._live(tenant)
            return self._bytes.get(tenant, 0)

    def ping(self) -> None:
        return None

    def close(self) -> None:
        return None
