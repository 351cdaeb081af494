"""Server-sent events framing, shared by the routes."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["sse"]


def sse(payload: dict[str, Any], event: str | None = None) -> bytes:
    """One event: `event: <name>` (when given) and `data: <json>`."""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + data + b"\n\n"
