"""How long a context the upstream engine serves: its `/v1/models` says.

Data flow (once, at startup)::

    GET {upstream}/v1/models --> {"data": [{"id": name, "max_model_len": n}, ...]}
                              --> n for the served model (the only one, if names differ)

vLLM and SGLang both list `max_model_len` there. An upstream that does not answer, or
names no length, gives None: the server then bounds prompts only by
`--max-prompt-tokens` and says so.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

__all__ = ["model_length", "upstream_context"]

log = logging.getLogger("toolwire.backends")


def model_length(listing: Any, model: str) -> int | None:
    """`max_model_len` of `model` in a `/v1/models` answer (of its one model, when the
    listing names it otherwise)."""
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == model or e.get("root") == model]
    chosen = named or (entries if len(entries) == 1 else [])
    for entry in chosen:
        length = entry.get("max_model_len")
        if type(length) is int and length > 0:
            return length
    return None


def upstream_context(upstream: str, model: str, *, timeout: float = 10.0) -> int | None:
    """The upstream's context for `model`, or None when it does not say."""
    url = upstream.rstrip("/") + "/v1/models"
    try:
        response = httpx.get(url, timeout=min(timeout, 10.0))
        response.raise_for_status()
        return model_length(response.json(), model)
    except (httpx.HTTPError, ValueError) as exc:
        log.warning("%s: %s", url, exc)
        return None
