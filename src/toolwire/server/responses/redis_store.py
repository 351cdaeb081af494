"""Stored responses in Redis: shared by every replica that points at the same server.

Keys, per tenant T (the `{T}` hash tag keeps one tenant's keys in one slot)::

    toolwire:{T}:r:ID     hash  response, items (JSON bytes), previous ("" for none)
                                expires with the TTL (PEXPIRE)
    toolwire:{T}:order    zset  ID -> creation time (ms, Redis's clock): oldest first
    toolwire:{T}:sizes    hash  ID -> the bytes it counts
    toolwire:{T}:bytes    int   the sum of `sizes`: what the tenant's bound is held to

Every change is one Lua script, so the books never disagree with the entries whatever
replicas do at once:

* put: forget the tenant's entries whose TTL ran out (Redis dropped them; the books
  still count them), write the entry, count it, then evict the tenant's oldest while
  its bytes exceed the bound;
* delete: the entry and its line in the books;
* history: walk the `previous` links server-side, one round trip for a whole chain.

Times come from Redis (`TIME`), so replicas with skewed clocks agree on age. A Redis
with an eviction policy of its own (`maxmemory-policy allkeys-*`) may drop entries
before their time; such a turn reads as gone, and its bytes are forgotten at the
tenant's next put.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from toolwire.errors import UsageError
from toolwire.server.responses.store import Record, StoreSettings, chain_error, decode, items_of

__all__ = ["RedisStore"]

_FORGET = """
local function forget(member)
    local size = redis.call('HGET', KEYS[3], member)
    if size then
        redis.call('DECRBY', KEYS[4], size)
        redis.call('HDEL', KEYS[3], member)
    end
    redis.call('ZREM', KEYS[2], member)
    return redis.call('DEL', ARGV[1] .. member)
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"""

#: KEYS: entry, order, sizes, bytes. ARGV: entry prefix, id, response, items,
#: previous, size, ttl ms (0: none), bound. Returns the tenant's bytes after.
_PUT = (
    _FORGET
    + """
local id, size, ttl, bound = ARGV[2], tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
if ttl > 0 then
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - ttl))) do
        forget(member)
    end
end
forget(id)
redis.call('HSET', KEYS[1], 'response', ARGV[3], 'items', ARGV[4], 'previous', ARGV[5])
redis.call('ZADD', KEYS[2], now, id)
redis.call('HSET', KEYS[3], id, size)
local used = redis.call('INCRBY', KEYS[4], size)
while used > bound do
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
    if not oldest or oldest == id then break end
    forget(oldest)
    used = tonumber(redis.call('GET', KEYS[4]) or '0')
end
if ttl > 0 then
    for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
return used
"""
)

#: KEYS: entry, order, sizes, bytes. ARGV: entry prefix, id. Returns 1 if it existed.
_DELETE = (
    _FORGET
    + """
return forget(ARGV[2])
"""
)

#: ARGV: entry prefix, id. Returns {1, '', turns newest first} or {0, missing id, ...}.
_HISTORY = """
local prefix, current = ARGV[1], ARGV[2]
local turns = {}
while current ~= '' do
    local found = redis.call('HMGET', prefix .. current, 'items', 'previous')
    if not found[1] then return {0, current, turns} end
    table.insert(turns, found[1])
    current = found[2]
    if #turns > 100000 then return {0, current, turns} end
end
return {1, '', turns}
"""


def _shown(url: str) -> str:
    """The URL without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


class RedisStore:
    """`ResponseStore` over a Redis server (see the module docstring)."""

    def __init__(
        self,
        url: str,
        settings: StoreSettings | None = None,
        *,
        prefix: str = "toolwire",
        timeout: float = 5.0,
    ) -> None:
        try:
            import redis
        except ImportError as exc:
            raise UsageError(
                "--store redis:// needs the redis client: pip install 'toolwire[redis]'"
            ) from exc
        self.settings = settings or StoreSettings()
        self.name = _shown(url)
        self._prefix = prefix
        self._client: Any = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, health_check_interval=30
        )
        self._put = self._client.register_script(_PUT)
        self._delete = self._client.register_script(_DELETE)
        self._history = self._client.register_script(_HISTORY)

    def _keys(self, tenant: str, response_id: str) -> tuple[list[str], str]:
        base = f"{self._prefix}:{{{tenant}}}:"
        entry = base + "r:"
        keys = [entry + response_id, base + "order", base + "sizes", base + "bytes"]
        return keys, entry

    def put(self, tenant: str, record: Record) -> bool:
        size = record.size
        if size > self.settings.max_bytes:
            return False
        keys, entry = self._keys(tenant, record.id)
        ttl = 0 if self.settings.ttl is None else max(1, int(self.settings.ttl * 1000))
        args: list[Any] = [entry, record.id, record.response, record.items, record.previous or ""]
        self._put(keys=keys, args=[*args, size, ttl, self.settings.max_bytes])
        return True

    def get(self, tenant: str, response_id: str) -> dict[str, Any] | None:
        keys, _ = self._keys(tenant, response_id)
        data = self._client.hget(keys[0], "response")
        return None if data is None else decode(data)

    def history(self, tenant: str, response_id: str) -> list[dict[str, Any]]:
        _, entry = self._keys(tenant, response_id)
        complete, missing, turns = self._history(keys=[], args=[entry, response_id])
        if not complete:
            raise chain_error(response_id, missing.decode())
        return items_of(reversed(turns))

    def delete(self, tenant: str, response_id: str) -> bool:
        keys, entry = self._keys(tenant, response_id)
        return bool(self._delete(keys=keys, args=[entry, response_id]))

    def used(self, tenant: str) -> int:
        keys, _ = self._keys(tenant, "")
        return int(self._client.get(keys[3]) or 0)

    def ping(self) -> None:
        self._client.ping()

    def close(self) -> None:
        self._client.close()
