"""Stored responses, for `previous_response_id` and `GET /v1/responses/{id}`.

A bounded, in-memory, per-process store: it holds at most `max_responses` responses and
about `max_bytes` of them (their JSON size), and evicts the oldest first. Nothing
survives a restart, and replicas behind a load balancer do not share it: clients that
need either send the whole conversation as `input` (with `store: false`).

Each entry keeps the response object and the turn's own items (its input items and its
output as input items) with a link to its previous response, so a conversation of N
turns costs O(N) memory, not O(N^2). A chain whose older turn was evicted cannot be
continued, and says so.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from toolwire.server.core.errors import ApiError

__all__ = ["ResponseStore", "Stored"]


@dataclass(frozen=True)
class Stored:
    response: dict[str, Any]
    #: This turn's input items, then its output as input items (normalized shapes).
    items: list[dict[str, Any]]
    previous: str | None
    size: int


class ResponseStore:
    """Responses by id, oldest evicted first."""

    def __init__(self, max_responses: int = 1000, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_responses = max_responses
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, Stored] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(
        self, response: dict[str, Any], items: list[dict[str, Any]], previous: str | None
    ) -> None:
        size = len(json.dumps(response)) + len(json.dumps(items))
        if size > self.max_bytes:
            return  # larger than the whole store: not kept
        self._entries[response["id"]] = Stored(response, items, previous, size)
        self._bytes += size
        while len(self._entries) > self.max_responses or self._bytes > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self._bytes -= old.size

    def get(self, response_id: str) -> dict[str, Any] | None:
        entry = self._entries.get(response_id)
        return None if entry is None else entry.response

    def history(self, response_id: str) -> list[dict[str, Any]]:
        """Every item of the conversation up to and including `response_id`."""
        chain: list[Stored] = []
        current: str | None = response_id
        while current is not None:
            entry = self._entries.get(current)
            if entry is None:
                what = "was not found" if current == response_id else "has an evicted turn"
                raise ApiError(
                    400,
                    f"previous response {response_id!r} {what}: this server keeps the last "
                    f"{self.max_responses} stored responses in memory only",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            chain.append(entry)
            current = entry.previous
        return [item for entry in reversed(chain) for item in entry.items]
