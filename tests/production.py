"""What the production tests share: a real redis-server, a keyed app in front of a
scripted upstream, one request per API, and `toolwire serve` with several flags.

`redis_server(tmp)` starts Debian's `redis-server` on a free loopback port, persistence
off, in `tmp`, and yields its URL; without the binary the tests that need it skip,
unless `TOOLWIRE_REQUIRE_REDIS=1` (`.ci/run` sets it) makes that a failure. `Keyed` is
toolwire's app with keys, a store and tracing as `create_app` takes them, in front of
a `ScriptedUpstream` (vLLM's protocol, Qwen3's tokenizer). `send(api, url, ...)` sends
the same small request through Chat Completions, Responses or Messages, whole or
streamed, and returns the status, the JSON body (or the SSE events) and the headers.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serving import (
    GET_WEATHER,
    MODEL,
    ScriptedRig,
    ScriptedUpstream,
    running,
    scripted_engine,
)
from toolwire.server.app import create_app

#: The three APIs, by the route of their turn.
APIS = ["chat", "responses", "messages"]
ROUTES = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """A fresh redis-server on 127.0.0.1 (no persistence), for the duration."""
    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server is not installed (apt-get install -y redis-server)"
        if os.environ.get("TOOLWIRE_REQUIRE_REDIS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    import redis

    port = free_port()
    directory.mkdir(parents=True, exist_ok=True)
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)]
    command += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
    with open(directory / "redis.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((directory / "redis.log").read_text()) from None
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


class RecordingUpstream(ScriptedUpstream):
    """A scripted upstream that also keeps each request's headers."""

    def __init__(self) -> None:
        super().__init__("vllm")
        self.headers: list[dict[str, str]] = []

    async def _handle(self, request: Any) -> Any:
        self.headers.append(dict(request.headers))
        return await super()._handle(request)


@dataclass
class Keyed:
    """toolwire's app (keys, store, tracing as given) in front of a scripted vLLM."""

    url: str
    rig: ScriptedRig
    app: Any
    upstream: RecordingUpstream = field(repr=False)


@contextlib.contextmanager
def keyed(**options: Any) -> Iterator[Keyed]:
    """`create_app(engine, **options)` served on loopback before a scripted vLLM."""
    upstream = RecordingUpstream()
    with running(upstream.app()) as upstream_url:
        app = create_app(scripted_engine("vllm", upstream_url), **options)
        with running(app) as url:
            yield Keyed(url, ScriptedRig(upstream, upstream_url, url), app, upstream)


def body(api: str, stream: bool = False, **extra: Any) -> dict[str, Any]:
    """One small request in `api`'s shape."""
    ask = "Say something."
    if api == "chat":
        out: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": ask}]}
    elif api == "responses":
        out = {"model": MODEL, "input": ask}
    else:
        out = {"model": MODEL, "max_tokens": 32, "messages": [{"role": "user", "content": ask}]}
    return {**out, "stream": stream, **extra}


def with_tools(api: str, choice: str, strict: bool | None = None) -> dict[str, Any]:
    """`get_weather` declared (with `strict` when given) and `tool_choice` (`auto`,
    `required` or `none`) in `api`'s shape."""
    function = dict(GET_WEATHER["function"])
    if strict is not None:
        function["strict"] = strict
    if api == "chat":
        return {"tools": [{"type": "function", "function": function}], "tool_choice": choice}
    if api == "responses":
        return {"tools": [{"type": "function", **function}], "tool_choice": choice}
    tool = {"name": function["name"], "description": function["description"]}
    tool["input_schema"] = function["parameters"]
    if strict is not None:
        tool["strict"] = strict
    kind = {"auto": "auto", "required": "any", "none": "none"}[choice]
    return {"tools": [tool], "tool_choice": {"type": kind}}


def headers_for(api: str, key: str | None, *, header: str = "auto") -> dict[str, str]:
    """The key as `api`'s own client sends it (`header`: auto, bearer or x-api-key)."""
    if key is None:
        return {}
    if header == "auto":
        header = "x-api-key" if api == "messages" else "bearer"
    if header == "bearer":
        return {"Authorization": f"Bearer {key}"}
    return {"x-api-key": key}


@dataclass
class Answer:
    status: int
    json: Any
    events: list[dict[str, Any]]
    headers: dict[str, str]


def sse_events(text: str) -> list[dict[str, Any]]:
    """The JSON payloads of an SSE body (`[DONE]` left out)."""
    out = []
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


def send(
    url: str,
    api: str,
    key: str | None = None,
    *,
    stream: bool = False,
    header: str = "auto",
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Answer:
    """POST one request to `api`'s route (`extra`: more body fields; `headers`: more
    headers); the answer, parsed."""
    response = httpx.post(
        url + ROUTES[api],
        json=body(api, stream, **extra),
        headers={**headers_for(api, key, header=header), **(headers or {})},
        timeout=60,
    )
    kind = response.headers.get("content-type", "")
    events = sse_events(response.text) if "event-stream" in kind else []
    data = response.json() if "json" in kind else None
    return Answer(response.status_code, data, events, dict(response.headers))
