"""API keys: who is calling, checked once per request, and the tenant it makes them.

Data flow (`Turn.answer`, which every route passes through)::

    headers: Authorization: Bearer KEY | x-api-key: KEY
        --Keys.tenant_of()--> the caller's tenant (a stable name derived from the key),
                              or ApiError 401 (no key, or none of the configured ones)
        --as_tenant()--> the tenant of the running request (`tenant()`), read by what
                         owns data per caller (the Responses store)

With no key configured every request is the anonymous tenant (`ANONYMOUS`) and
nothing is checked. With keys:

* a presented key is compared with every configured key, in constant time per key and
  without stopping at a match (`hmac.compare_digest` over SHA-256 digests, so neither
  the key's length nor its position in the list shows in the timing);
* the tenant is `key-` and 16 hex digits of the key's SHA-256: stable across restarts
  and replicas, one-way, and what the store files data under; a key itself is never
  kept past startup in plain text, logged, or stored;
* both headers are read: OpenAI's clients send `Authorization: Bearer`, Anthropic's
  `x-api-key`; a request is admitted if either carries a configured key.

Which routes are open is the app's choice (`/health*` always, `/metrics` unless
protected); the 401 takes each API's error shape (`Api.error_body`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path

from toolwire.server.core.errors import ApiError

__all__ = ["ANONYMOUS", "Keys", "as_tenant", "read_key_file", "tenant"]

#: The tenant of every request when no key is configured.
ANONYMOUS = "anonymous"

_TENANT: ContextVar[str] = ContextVar("toolwire_tenant", default=ANONYMOUS)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def read_key_file(path: str | Path) -> list[str]:
    """The keys of a key file: one per line; blank lines and `#` comments skipped."""
    keys: list[str] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            keys.append(text)
    return keys


class Keys:
    """The configured keys (as digests); empty: authentication is off."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        digests: list[bytes] = []
        for key in keys:
            if not key or key != key.strip():
                raise ValueError("an API key must be non-empty, without surrounding spaces")
            digest = _digest(key)
            if digest not in digests:
                digests.append(digest)
        self._digests = tuple(digests)

    @classmethod
    def from_digests(cls, digests: Iterable[str]) -> Keys:
        """Keys known by their SHA-256 hex digests only (`digests()`): how worker
        processes receive them, never in plain text."""
        keys = cls()
        keys._digests = tuple(bytes.fromhex(d) for d in digests)
        return keys

    def digests(self) -> list[str]:
        return [digest.hex() for digest in self._digests]

    def __len__(self) -> int:
        return len(self._digests)

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def _known(self, key: str) -> bool:
        presented = _digest(key)
        found = False
        for digest in self._digests:  # every key, whatever matched: constant time
            found |= hmac.compare_digest(presented, digest)
        return found

    def tenant_of(self, headers: Mapping[str, str]) -> str:
        """The caller's tenant; `ApiError(401)` when keys are configured and the request
        carries none of them."""
        if not self._digests:
            return ANONYMOUS
        presented = [key for key in _presented(headers) if key]
        for key in presented:
            if self._known(key):
                return "key-" + _digest(key).hex()[:16]
        if presented:
            message = "the API key is not valid for this server"
        else:
            message = (
                "no API key: send it as 'Authorization: Bearer KEY' or in the 'x-api-key' header"
            )
        raise ApiError(401, message, code="invalid_api_key")


def _presented(headers: Mapping[str, str]) -> Iterator[str]:
    authorization = headers.get("authorization")
    if authorization is not None:
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() == "bearer":
            yield credentials.strip()
    key = headers.get("x-api-key")
    if key is not None:
        yield key.strip()


def tenant() -> str:
    """The tenant of the request being answered (`ANONYMOUS` outside one)."""
    return _TENANT.get()


@contextlib.contextmanager
def as_tenant(name: str) -> Iterator[None]:
    """Answer the enclosed work as `name` (work started inside keeps it: threads started
    with `asyncio.to_thread` and tasks copy it)."""
    token = _TENANT.set(name)
    try:
        yield
    finally:
        _TENANT.reset(token)
