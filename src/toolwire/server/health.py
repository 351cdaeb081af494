"""Health that means something: `/health/live` (the process runs) and `/health/ready`.

Ready means a request sent now would be answered::

    template  a one-message chat renders to prompt ids with the served tokenizer and
              chat template (the pipeline's own `plan`, off the event loop)
    engine    the engine returns a first output id for that prompt (max_tokens 1)
              within `timeout` seconds; a real request's first id within the last
              `timeout` seconds is the same evidence, so a busy engine is not probed
              (concurrent probes share one)
    store     the response store answers (`ResponseStore.ping`)

`/health/ready` answers 200 with every check `ok`, else 503 with each check's error;
both bodies carry the guidance policy (`guidance.describe`) and the store's name.
Load balancers route on `/health/ready`; orchestrators restart on `/health/live`.
`/health` keeps its old meaning (model, format, gated, constrained, warnings; 200
whenever the process answers).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from toolwire.backends.base import Generation
from toolwire.server.core.pipeline import plan
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.turn import Turn
from toolwire.server.guidance import describe
from toolwire.server.responses.store import ResponseStore

__all__ = ["Readiness", "live"]


def live() -> dict[str, Any]:
    """`/health/live`: the process answers (with its id: which worker did)."""
    return {"status": "live", "pid": os.getpid()}


class Readiness:
    """The checks of `/health/ready` for one app."""

    def __init__(self, turn: Turn, store: ResponseStore, timeout: float = 5.0) -> None:
        self._turn = turn
        self._store = store
        self.timeout = timeout
        self._probe: asyncio.Task[None] | None = None

    def _prompt(self) -> list[int]:
        engine = self._turn.engine
        request = ChatRequest(model=engine.model, messages=[{"role": "user", "content": "ping"}])
        return list(plan(engine, request, self._turn.limits).generation.prompt_ids)

    async def _engine(self, prompt: list[int]) -> None:
        last = self._turn.last_answer
        if last is not None and time.monotonic() - last < self.timeout:
            return
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._first_id(prompt))
        try:
            await asyncio.wait_for(asyncio.shield(self._probe), self.timeout)
        except TimeoutError:
            raise TimeoutError(f"no output id within {self.timeout:g} s") from None

    async def _first_id(self, prompt: list[int]) -> None:
        generation = Generation(prompt_ids=prompt, max_tokens=1, temperature=0.0)
        stream = self._turn.engine.stream(generation)
        try:
            await anext(stream)
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def check(self) -> tuple[int, dict[str, Any]]:
        """The status and body of `/health/ready`."""
        checks: dict[str, str] = {}
        prompt: list[int] | None = None
        try:
            prompt = await asyncio.to_thread(self._prompt)
            checks["template"] = "ok"
        except Exception as exc:
            checks["template"] = _why(exc)
        if prompt is None:
            checks["engine"] = "not probed: no prompt"
        else:
            try:
                await self._engine(prompt)
                checks["engine"] = "ok"
            except Exception as exc:
                checks["engine"] = _why(exc)
        try:
            await asyncio.wait_for(asyncio.to_thread(self._store.ping), self.timeout)
            checks["store"] = "ok"
        except Exception as exc:
            checks["store"] = _why(exc)
        ready = all(value == "ok" for value in checks.values())
        engine = self._turn.engine
        body = {
            "status": "ready" if ready else "not ready",
            "checks": checks,
            "model": engine.model,
            "format": engine.format,
            "guidance": describe(self._turn.limits.guidance),
            "store": self._store.name,
            "pid": os.getpid(),
        }
        return (200 if ready else 503), body


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:300]
