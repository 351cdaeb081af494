"""`/health/live`, `/health/ready` and `/health`: what each says, and when ready fails.

toolwire runs in front of a scripted vLLM (Qwen3's tokenizer), so the upstream can be
made to stall, refuse or vanish; the store and the template are broken on purpose.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.production import keyed, send
from tests.serving import MODEL, Script, running, scripted_engine
from toolwire.server.app import create_app
from toolwire.server.core.pipeline import Limits
from toolwire.server.responses.redis_store import RedisStore
from toolwire.server.responses.store import StoreSettings


@pytest.fixture
def probed() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """toolwire's URL, and the bodies its upstream received."""
    with keyed(ready_timeout=1.0) as server:
        yield server.url, server.upstream.bodies


def test_live_says_the_process_answers_and_which_one(
    probed: tuple[str, list[dict[str, Any]]],
) -> None:
    url, _ = probed
    live = httpx.get(url + "/health/live")
    assert live.status_code == 200 and live.json() == {"status": "live", "pid": os.getpid()}
    old = httpx.get(url + "/health").json()
    assert {"status", "model", "format", "gated", "constrained", "warnings"} <= set(old)


def test_ready_probes_the_engine_with_a_one_token_request(
    probed: tuple[str, list[dict[str, Any]]],
) -> None:
    url, bodies = probed
    ready = httpx.get(url + "/health/ready")
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["status"] == "ready"
    assert body["checks"] == {"template": "ok", "engine": "ok", "store": "ok"}
    assert body["model"] == MODEL and body["store"] == "memory"
    assert body["guidance"]["guidance"] == "on"
    assert len(bodies) == 1 and bodies[0]["max_tokens"] == 1  # the probe itself
    assert bodies[0]["prompt"]  # the rendered template


def test_a_real_first_token_is_evidence_enough(probed: tuple[str, list[dict[str, Any]]]) -> None:
    """Right after a request's first token, ready does not probe (a busy engine is not
    asked for more)."""
    url, bodies = probed
    assert send(url, "chat").status == 200
    sent = len(bodies)
    for _ in range(3):
        assert httpx.get(url + "/health/ready").status_code == 200
    assert len(bodies) == sent


def test_concurrent_probes_share_one() -> None:
    with keyed(ready_timeout=5.0) as server:
        server.upstream.scripts.append(Script([], stall=0.5))
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda _: httpx.get(server.url + "/health/ready"), range(6)))
        assert [a.status_code for a in answers] == [200] * 6
        assert len(server.upstream.bodies) == 1


def test_not_ready_when_the_engine_stalls_past_the_deadline() -> None:
    with keyed(ready_timeout=0.3) as server:
        server.upstream.scripts.append(Script([], stall=3))
        ready = httpx.get(server.url + "/health/ready", timeout=10)
        assert ready.status_code == 503
        body = ready.json()
        assert (
            body["status"] == "not ready"
            and "no output id within 0.3 s" in body["checks"]["engine"]
        )
        assert body["checks"]["template"] == "ok" and body["checks"]["store"] == "ok"
        assert httpx.get(server.url + "/health/live").status_code == 200
        assert httpx.get(server.url + "/health").status_code == 200  # its old meaning


def test_not_ready_when_the_upstream_is_down() -> None:
    engine = scripted_engine("vllm", "http://127.0.0.1:9", timeout=2)  # nothing listens
    with running(create_app(engine, Limits(timeout=5), ready_timeout=3)) as url:
        ready = httpx.get(url + "/health/ready", timeout=10)
        assert ready.status_code == 503
        assert "127.0.0.1:9" in ready.json()["checks"]["engine"]


def test_not_ready_when_the_store_is_unreachable() -> None:
    store = RedisStore("redis://127.0.0.1:9/0", StoreSettings(), timeout=0.5)
    with keyed(store=store, ready_timeout=2.0) as server:
        ready = httpx.get(server.url + "/health/ready", timeout=10)
        assert ready.status_code == 503
        assert ready.json()["checks"]["store"] != "ok"
        assert ready.json()["checks"]["engine"] == "ok"


def test_not_ready_when_the_template_does_not_render() -> None:
    with keyed(ready_timeout=2.0) as server:
        server.app.state.engine.template = "{{ raise_exception('this template is broken') }}"
        ready = httpx.get(server.url + "/health/ready", timeout=10)
        assert ready.status_code == 503
        checks = ready.json()["checks"]
        assert "this template is broken" in checks["template"]
        assert checks["engine"].startswith("not probed")
