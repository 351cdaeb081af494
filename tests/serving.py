"""Test helpers for the server: real HTTP on 127.0.0.1, and scripted upstream engines.

`running(app)` serves an ASGI app with uvicorn on a free loopback port in a thread.
`ScriptedUpstream` is a small server speaking vLLM's `/v1/completions` or SGLang's
`/generate` protocol: it records each request body and streams back the token ids a
test scripted, a few ids per event, as those engines do; or misbehaves as scripted
(stalls, cut connections, error statuses, raw malformed events).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@contextlib.contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (a free port) for the duration; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@dataclass
class Script:
    """What the upstream answers to the next request."""

    ids: list[int]
    finish: str = "stop"  # "stop" | "length"
    per_event: int = 3
    delay: float = 0.0  # seconds between events
    fail_after: int | None = None  # events sent before the connection is cut
    stall: float = 0.0  # seconds before the first event
    payloads: list[Any] | None = None  # raw events to send as they are, instead of `ids`


@dataclass
class ScriptedUpstream:
    """A scripted vLLM (`protocol="vllm"`) or SGLang (`protocol="sglang"`) server."""

    protocol: str
    scripts: list[Script] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    cancelled: int = 0
    refuse: int | None = None  # answer every request with this HTTP status

    def app(self) -> Starlette:
        path = "/v1/completions" if self.protocol == "vllm" else "/generate"
        return Starlette(routes=[Route(path, self._handle, methods=["POST"])])

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        if self.refuse is not None:
            return JSONResponse({"error": {"message": "refused"}}, status_code=self.refuse)
        script = self.scripts.pop(0) if self.scripts else Script([])
        return StreamingResponse(self._events(script), media_type="text/event-stream")

    def _payload(self, chunk: list[int], total: list[int], reason: str | None) -> dict[str, Any]:
        if self.protocol == "vllm":
            choice = {"index": 0, "text": "", "token_ids": chunk, "finish_reason": reason}
            return {"id": "cmpl-1", "object": "text_completion", "choices": [choice]}
        finish = {"type": reason} if reason else None
        meta = {"completion_tokens": len(total), "finish_reason": finish}
        return {"text": "", "output_ids": list(total), "meta_info": meta}

    async def _events(self, script: Script) -> Any:
        ids = script.ids
        starts = list(range(0, len(ids), script.per_event)) or [0]
        try:
            if script.stall:
                await asyncio.sleep(script.stall)
            if script.payloads is not None:
                for payload in script.payloads:
                    yield b"data: " + json.dumps(payload).encode() + b"\n\n"
                    if script.delay:
                        await asyncio.sleep(script.delay)
                yield b"data: [DONE]\n\n"
                return
            for n, start in enumerate(starts):
                if script.fail_after is not None and n >= script.fail_after:
                    raise ConnectionError("scripted failure")  # the connection is cut
                end = start + script.per_event
                last = end >= len(ids)
                reason = script.finish if last else None
                payload = self._payload(ids[start:end], ids[:end], reason)
                yield b"data: " + json.dumps(payload).encode() + b"\n\n"
                if script.delay:
                    await asyncio.sleep(script.delay)
            yield b"data: [DONE]\n\n"
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
