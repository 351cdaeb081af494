"""`--workers N`: processes sharing the port, metrics summed exactly, one store.

`toolwire serve --workers 2` runs as a user starts it, on the bundled model (each
worker loads it), with `PROMETHEUS_MULTIPROC_DIR` set by the test so that each worker's
own counts can be read too. A burst of 20 streams over the three APIs: the token
counters `/metrics` shows are the sums of the usage every answer reported, and both
workers served some of them; the responses stored by one are read and continued
through whichever worker answers (the SQLite file they share). A worker killed is
replaced and its counts stay in the sums; a worker that cannot start (a missing model)
stops the server with its message, and a port already taken stops it before any worker
loads a model.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.production import ROUTES
from tests.serving import toolwire_serve
from toolwire.server.config import add_arguments, config_from

MODEL = "SmolLM2-135M-Instruct"
BURST = 20
KEY = "sk-workers-secret-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}


def _body(api: str) -> dict[str, Any]:
    ask = [{"role": "user", "content": "Name a colour."}]
    if api == "chat":
        return {
            "model": MODEL,
            "messages": ask,
            "max_tokens": 8,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    if api == "responses":
        return {"model": MODEL, "input": "Name a colour.", "max_output_tokens": 8, "stream": True}
    return {"model": MODEL, "messages": ask, "max_tokens": 8, "stream": True}


async def _stream(url: str, api: str) -> dict[str, Any]:
    """One streamed request on its own connection: its usage, and its response id."""
    prompt = completion = 0
    rid = None
    async with (
        httpx.AsyncClient(timeout=600, headers=AUTH) as client,
        client.stream("POST", url + ROUTES[api], json=_body(api)) as answer,
    ):
        assert answer.status_code == 200
        async for line in answer.aiter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            if api == "chat" and event.get("usage"):
                prompt = event["usage"]["prompt_tokens"]
                completion = event["usage"]["completion_tokens"]
            elif api == "responses" and event["type"] in (
                "response.completed",
                "response.incomplete",
            ):
                usage = event["response"]["usage"]
                prompt, completion = usage["input_tokens"], usage["output_tokens"]
                rid = event["response"]["id"]
            elif api == "messages" and event["type"] == "message_start":
                prompt = event["message"]["usage"]["input_tokens"]
            elif api == "messages" and event["type"] == "message_delta":
                completion = event["usage"]["output_tokens"]
    assert completion > 0
    return {"api": api, "prompt": prompt, "completion": completion, "id": rid}


def _counter(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{name}(\{{[^}}]*\}})? (\S+)$", line)
        if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
            total += float(match.group(2))
    return total


def _per_worker(directory: Path, name: str) -> dict[str, float]:
    """Each worker's own count of `name`, from its multiprocess file."""
    from prometheus_client.multiprocess import MultiProcessCollector

    out = {}
    for path in directory.glob("counter_*.db"):
        pid = path.stem.split("_")[1]
        for metric in MultiProcessCollector.merge([str(path)], accumulate=True):
            for sample in metric.samples:
                if sample.name == name:
                    out[pid] = out.get(pid, 0.0) + sample.value
    return out


def _both_up(url: str, deadline: float, without: int | None = None) -> set[int]:
    """The pids of two workers answering on new connections (other than `without`)."""
    pids: set[int] = set()
    while len(pids) < 2 and time.monotonic() < deadline:
        with httpx.Client(timeout=5) as fresh, contextlib.suppress(httpx.HTTPError):
            pids.add(fresh.get(url + "/health/live").json()["pid"])  # a new connection
        pids -= {without}
        time.sleep(0.1)
    return pids


def test_two_workers_serve_a_burst_with_exact_summed_metrics(tmp_path: Path) -> None:
    directory = tmp_path / "metrics"
    directory.mkdir()
    (directory / "counter_999999.db").write_bytes(b"stale")  # a previous run's: removed
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    store = tmp_path / "shared.sqlite3"
    try:
        flags = ["--workers", "2", "--threads", "1", "--store", str(store), "--api-key", KEY]
        with toolwire_serve(tmp_path / "serve.log", *flags) as url:
            pids = _both_up(url, time.monotonic() + 180)
            assert len(pids) == 2
            for pid in pids:  # a worker knows the keys by their digests only
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                assert KEY.encode() not in environ and b"TOOLWIRE_SERVE_KEYS=" in environ
            apis = [("chat", "responses", "messages")[n % 3] for n in range(BURST)]

            async def burst() -> list[dict[str, Any]]:
                return await asyncio.gather(*(_stream(url, api) for api in apis))

            results = asyncio.run(burst())
            text = httpx.get(url + "/metrics").text
            prompt = sum(r["prompt"] for r in results)
            completion = sum(r["completion"] for r in results)
            assert _counter(text, "toolwire_prompt_tokens_total") == prompt
            assert _counter(text, "toolwire_completion_tokens_total") == completion
            for api in ("chat", "responses", "messages"):
                served = _counter(text, "toolwire_requests_total", route=ROUTES[api], status="200")
                assert served == apis.count(api)
            per_worker = _per_worker(directory, "toolwire_completion_tokens_total")
            assert len(per_worker) == 2 and all(n > 0 for n in per_worker.values())
            assert sum(per_worker.values()) == completion
            assert not (directory / "counter_999999.db").exists()
            # every stored response is there for whichever worker answers; some continue
            stored = [r for r in results if r["api"] == "responses"]
            for n, result in enumerate(stored):
                with httpx.Client(timeout=600, headers=AUTH) as fresh:
                    got = fresh.get(f"{url}/v1/responses/{result['id']}")
                    assert got.status_code == 200
                    if n >= 3:
                        continue
                    again = fresh.post(
                        url + "/v1/responses",
                        json={
                            "model": MODEL,
                            "input": "Another.",
                            "max_output_tokens": 4,
                            "previous_response_id": result["id"],
                        },
                    )
                    assert again.status_code == 200, again.text
                    assert again.json()["usage"]["input_tokens"] > result["prompt"]
            # a worker killed is replaced; what it counted stays in the sums
            before = httpx.get(url + "/metrics").text
            victim = min(pids)
            os.kill(victim, signal.SIGKILL)
            now = _both_up(url, time.monotonic() + 180, without=victim)
            assert len(now) == 2 and victim not in now and pids - {victim} <= now
            after = httpx.get(url + "/metrics").text
            for name in ("toolwire_prompt_tokens_total", "toolwire_completion_tokens_total"):
                assert _counter(after, name) == _counter(before, name) > 0
        log = (tmp_path / "serve.log").read_text()
        assert f"(pid {victim}) exited (-9): replaced" in log
        started = 3  # two, then the replacement
        assert "starting 2 workers" in log and log.count("guidance policy:") == started
        assert log.count("API keys: 1 configured") == started and KEY not in log
    finally:
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]


def test_memory_store_cannot_be_shared_by_workers() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(ValueError, match="--store memory"):
        config_from(parser.parse_args(["--workers", "2", "--store", "memory"]), {})
    with pytest.raises(ValueError, match="--workers"):
        config_from(parser.parse_args(["--workers", "0"]), {})


def _serve_fails(tmp_path: Path, port: int, *flags: str) -> tuple[int, str]:
    command = [sys.executable, "-m", "toolwire.cli", "serve", "--workers", "2", *flags]
    command += ["--store", str(tmp_path / "store.sqlite3")]
    env = {**os.environ, "TOOLWIRE_PORT": str(port)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_a_worker_that_cannot_start_stops_the_server_with_its_message(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, output = _serve_fails(tmp_path, port, "--model", str(missing))
    assert code == 2, output
    assert f"worker cannot start: [Errno 2] No such file or directory: '{missing}'" in output
    assert "failed to start (exit 2)" in output and "Traceback" not in output


def test_a_port_taken_stops_the_server_before_any_worker_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code, output = _serve_fails(tmp_path, taken.getsockname()[1])
    assert code == 2, output
    assert "Address already in use" in output and "starting 2 workers" not in output
