"""What the HTTP engines share: a client, SSE framing, and error mapping.

Data flow::

    POST body (+ the request's trace context, `propagation`) --aiohttp (llhttp, a C parser)-->
        body bytes, as much as has arrived
        --SseSplitter--> the data of every event those bytes complete
        --json.loads--> a batch: their payload dicts, in order
    HTTP error status / broken connection / `{"error": ...}` payload --> EngineError
    a payload of the wrong shape (ids not a list of integers...)  --> EngineError

Batches: each item `events()` yields is every event the connection had delivered
complete when it was read: never empty, and never waiting for more. A paced stream
gives one event per batch; a loaded proxy finds several waiting and handles them as
one (the engines make one `Delta` of them: one parser step, one write to the client),
so the cost per token falls as the load rises, and no token that has arrived waits.
A bad event ends the stream after the good ones before it: the batch up to it is
yielded, then the error is raised.

Why aiohttp: its HTTP parsing and chunked decoding are compiled, and it hands over
whatever arrived in one piece; httpx reads through h11 and httpcore in Python, line
by line (`python -m bench.proxy` shows the difference in the proxy's CPU per token).

Closing the iterator closes the HTTP response, which vLLM and SGLang both take as the
client going away: they abort the sequence.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp

from toolwire.backends.base import EngineError
from toolwire.backends.propagation import upstream_headers
from toolwire.backends.sse import SseSplitter

__all__ = ["RemoteClient", "in_vocabulary", "token_ids"]


def token_ids(value: Any, what: str) -> list[int]:
    """`value` if it is a list of integers (the shape both engines send), else an
    `EngineError` naming `what`."""
    if type(value) is not list or not all(type(i) is int for i in value):
        shown = json.dumps(value)[:80] if _jsonable(value) else type(value).__name__
        raise EngineError(f"{what} is not a list of integer token ids: {shown}")
    return value


def in_vocabulary(ids: list[int], what: str, vocab_size: int) -> list[int]:
    """`ids` if each is an id of a vocabulary of `vocab_size`, else an `EngineError`:
    checked per event, so the ids of the events before a bad one are kept."""
    if ids and (min(ids) < 0 or max(ids) >= vocab_size):
        bad = min(ids) if min(ids) < 0 else max(ids)
        raise EngineError(
            f"{what} holds token id {bad}, outside the vocabulary (0..{vocab_size - 1})"
        )
    return ids


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


class RemoteClient:
    """One connection pool to an upstream engine.

    `timeout`: seconds to connect (at most 10) and to wait for each read. The pool is
    made on first use, in the event loop that serves the requests (and again if that
    loop changes, as it does between test servers).
    """

    def __init__(self, upstream: str, *, timeout: float = 60.0) -> None:
        self.upstream = upstream.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=min(timeout, 10.0), sock_read=timeout
        )
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _pool(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._loop = loop
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                timeout=self._timeout,
                auto_decompress=False,
            )
        return self._session

    async def events(
        self, path: str, body: Mapping[str, Any]
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """POST `body` and yield batches of SSE `data:` payloads until `[DONE]` or the
        end (see the module docstring)."""
        where = f"{self.upstream}{path}"
        try:
            headers = upstream_headers()  # the request's trace context, when traced
            async with self._pool().post(where, json=body, headers=headers) as response:
                if response.status != 200:
                    detail = (await response.read()).decode("utf-8", "replace")[:500]
                    raise EngineError(
                        f"{where} answered {response.status}: {detail}",
                        status=502 if response.status >= 500 else 400,
                    )
                splitter = SseSplitter()
                async for data in response.content.iter_any():
                    if found := splitter.feed(data):
                        batch, error = _payloads(found, where)
                        if batch:
                            yield batch
                        if error is not None:
                            raise error
                    if splitter.done:
                        return
                if rest := splitter.finish():
                    batch, error = _payloads(rest, where)
                    if batch:
                        yield batch
                    if error is not None:
                        raise error
        except TimeoutError as exc:
            raise EngineError(f"{where}: timed out ({type(exc).__name__})", status=504) from exc
        except aiohttp.ClientError as exc:
            raise EngineError(f"{where}: {type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _payloads(found: list[bytes], where: str) -> tuple[list[dict[str, Any]], EngineError | None]:
    """The events' payloads (objects only: anything else is skipped), up to the first
    bad one, and the error it is (None when all are good)."""
    try:
        values = [json.loads(data) for data in found]
    except ValueError:
        values = []
        for data in found:
            try:
                values.append(json.loads(data))
            except ValueError:
                shown = data[:200].decode("utf-8", "replace")
                bad = EngineError(f"{where}: bad event {shown!r}")
                return _objects(values, where)[0], bad
    return _objects(values, where)


def _objects(values: list[Any], where: str) -> tuple[list[dict[str, Any]], EngineError | None]:
    out: list[dict[str, Any]] = []
    for value in values:
        if type(value) is dict:
            if value.get("error"):
                return out, EngineError(f"{where}: {value['error']}")
            out.append(value)
    return out, None
