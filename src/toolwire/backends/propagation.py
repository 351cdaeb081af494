"""Headers an HTTP engine forwards upstream with the current request (trace context).

Data flow::

    the server, per request: forwarding({"traceparent": ...})   (a context variable)
    an HTTP engine, when it sends: upstream_headers() -> those headers on its request

A context variable rather than an argument: the engine's stream runs in the request's
task (or a task copied from it), so the value set around `Engine.stream()` is the one
the engine reads, whatever engine it is, and engines that send nothing ignore it.
Only W3C trace context is forwarded (vLLM starts its request span from `traceparent`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType

__all__ = ["forwarding", "upstream_headers"]

_NONE: Mapping[str, str] = MappingProxyType({})
_HEADERS: ContextVar[Mapping[str, str]] = ContextVar("toolwire_upstream_headers", default=_NONE)


def upstream_headers() -> Mapping[str, str]:
    """The headers to send upstream with the current request (often none)."""
    return _HEADERS.get()


@contextlib.contextmanager
def forwarding(headers: Mapping[str, str]) -> Iterator[None]:
    """Forward `headers` upstream for the enclosed work."""
    token = _HEADERS.set(dict(headers))
    try:
        yield
    finally:
        _HEADERS.reset(token)
