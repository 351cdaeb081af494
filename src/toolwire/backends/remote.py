"""What the HTTP engines share: a client, SSE framing, and error mapping.

Data flow::

    POST body (+ the request's trace context, `propagation`) --httpx stream-->
        `data: {...}` lines --json--> payload dicts
    HTTP error status / broken connection / `{"error": ...}` payload --> EngineError
    a payload of the wrong shape (ids not a list of integers...)  --> EngineError

Closing the iterator closes the HTTP response, which vLLM and SGLang both take as the
client going away: they abort the sequence.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from toolwire.backends.base import EngineError
from toolwire.backends.propagation import upstream_headers

__all__ = ["RemoteClient", "token_ids"]


def token_ids(value: Any, what: str) -> list[int]:
    """`value` if it is a list of integers (the shape both engines send), else an
    `EngineError` naming `what`; the range is checked against the vocabulary later."""
    if not isinstance(value, list) or not all(type(i) is int for i in value):
        shown = json.dumps(value)[:80] if _jsonable(value) else type(value).__name__
        raise EngineError(f"{what} is not a list of integer token ids: {shown}")
    return value


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


class RemoteClient:
    """One connection pool to an upstream engine."""

    def __init__(self, upstream: str, *, timeout: float = 60.0) -> None:
        self.upstream = upstream.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.upstream,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )

    async def events(self, path: str, body: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """POST `body` and yield each SSE `data:` payload until `[DONE]` or the end."""
        try:
            headers = upstream_headers()  # the request's trace context, when traced
            async with self._client.stream("POST", path, json=body, headers=headers) as response:
                if response.status_code != 200:
                    detail = (await response.aread()).decode("utf-8", "replace")[:500]
                    raise EngineError(
                        f"{self.upstream}{path} answered {response.status_code}: {detail}",
                        status=502 if response.status_code >= 500 else 400,
                    )
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    try:
                        payload = json.loads(data)
                    except ValueError as exc:
                        raise EngineError(
                            f"{self.upstream}{path}: bad event {data[:200]!r}"
                        ) from exc
                    if isinstance(payload, dict) and payload.get("error"):
                        raise EngineError(f"{self.upstream}{path}: {payload['error']}")
                    if isinstance(payload, dict):
                        yield payload
        except httpx.TimeoutException as exc:
            raise EngineError(f"{self.upstream}{path}: timed out ({exc})", status=504) from exc
        except httpx.HTTPError as exc:
            raise EngineError(f"{self.upstream}{path}: {type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        await self._client.aclose()
