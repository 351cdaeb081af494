"""API keys: a 401 in each API's own shape, both headers, open health, owned responses.

toolwire's app runs with two keys (A and B) in front of a scripted vLLM (Qwen3's
tokenizer); the official clients and raw HTTP talk to it on loopback. The ownership
test shares one store between that app and one without keys (the anonymous tenant), as
a server restarted without `--api-key` on the same store would.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.production import APIS, Keyed, headers_for, keyed, send
from tests.serving import MODEL
from toolwire.server.config import add_arguments, config_from
from toolwire.server.core.auth import ANONYMOUS, Keys
from toolwire.server.core.errors import ApiError
from toolwire.server.responses.store import MemoryStore
from toolwire.server.run import keys_from

A = "sk-test-alpha-0123456789"
B = "sk-test-bravo-9876543210"


@pytest.fixture(scope="module")
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture(scope="module")
def served(store: MemoryStore) -> Iterator[Keyed]:
    with keyed(keys=Keys([A, B]), store=store) as server:
        yield server


@pytest.fixture(scope="module")
def open_server(store: MemoryStore) -> Iterator[Keyed]:
    """The same store, without keys: every caller is the anonymous tenant."""
    with keyed(store=store) as server:
        yield server


def _answer(server: Keyed, text: str = "Fine.", n: int = 1) -> None:
    for _ in range(n):
        server.rig.script(text)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_no_key_or_a_wrong_key_is_a_401_in_the_apis_shape(
    served: Keyed, api: str, stream: bool
) -> None:
    sent = len(served.upstream.bodies)
    for key, says in ((None, "no API key"), ("sk-wrong", "not valid")):
        answer = send(served.url, api, key, stream=stream)
        assert answer.status == 401, (api, key)
        assert answer.headers["www-authenticate"] == "Bearer"
        if api == "messages":
            assert answer.json["type"] == "error"
            assert answer.json["error"]["type"] == "authentication_error"
            assert says in answer.json["error"]["message"]
        else:
            error = answer.json["error"]
            assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_api_key")
            assert says in error["message"]
    assert len(served.upstream.bodies) == sent  # the engine never saw them


@pytest.mark.parametrize("header", ["bearer", "x-api-key"])
@pytest.mark.parametrize("api", APIS)
def test_either_header_carries_the_key(served: Keyed, api: str, header: str) -> None:
    for key in (A, B):
        _answer(served)
        answer = send(served.url, api, key, header=header)
        assert answer.status == 200, answer.json


def test_the_official_clients_get_their_authentication_errors(served: Keyed) -> None:
    bad = openai.OpenAI(base_url=served.url + "/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.AuthenticationError):
        bad.responses.create(model=MODEL, input="x")
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    claude = anthropic.Anthropic(base_url=served.url, api_key="sk-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        claude.messages.create(
            model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}]
        )
    good = openai.OpenAI(base_url=served.url + "/v1", api_key=A, max_retries=0)
    assert [m.id for m in good.models.list()] == [MODEL]


def test_health_is_open_and_metrics_are_open_unless_protected(served: Keyed) -> None:
    for path in ("/health", "/health/live", "/health/ready", "/metrics"):
        assert httpx.get(served.url + path).status_code == 200, path
    assert httpx.get(served.url + "/v1/models").status_code == 401
    with keyed(keys=Keys([A]), protect_metrics=True) as guarded:
        assert httpx.get(guarded.url + "/health/live").status_code == 200
        assert httpx.get(guarded.url + "/metrics").status_code == 401
        shown = httpx.get(guarded.url + "/metrics", headers=headers_for("chat", A))
        assert shown.status_code == 200 and "toolwire_requests_total" in shown.text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_response_belongs_to_the_key_that_made_it(
    served: Keyed, open_server: Keyed, stream: bool
) -> None:
    """Key B and the anonymous tenant (a server without keys on the same store) get a
    404 for key A's response: GET, continue, DELETE; key A keeps every right."""
    _answer(served)
    made = send(served.url, "responses", A, stream=stream)
    assert made.status == 200
    rid = made.json["id"] if not stream else made.events[-1]["response"]["id"]
    for url, key in ((served.url, B), (open_server.url, None)):
        auth = headers_for("responses", key)
        assert httpx.get(f"{url}/v1/responses/{rid}", headers=auth).status_code == 404
        _answer(served)
        _answer(open_server)
        again = send(url, "responses", key, previous_response_id=rid)
        assert again.status == 404
        assert again.json["error"]["code"] == "previous_response_not_found"
        assert again.json["error"]["param"] == "previous_response_id"
        assert httpx.delete(f"{url}/v1/responses/{rid}", headers=auth).status_code == 404
    auth = headers_for("responses", A)
    got = httpx.get(f"{served.url}/v1/responses/{rid}", headers=auth)
    assert got.status_code == 200 and got.json()["id"] == rid
    _answer(served)
    assert send(served.url, "responses", A, previous_response_id=rid).status == 200
    gone = httpx.delete(f"{served.url}/v1/responses/{rid}", headers=auth)
    assert gone.status_code == 200
    assert gone.json() == {"id": rid, "object": "response", "deleted": True}
    assert httpx.get(f"{served.url}/v1/responses/{rid}", headers=auth).status_code == 404
    assert httpx.delete(f"{served.url}/v1/responses/{rid}", headers=auth).status_code == 404


def test_store_false_keeps_nothing(served: Keyed, store: MemoryStore) -> None:
    tenant = Keys([A]).tenant_of({"authorization": f"Bearer {A}"})
    before = store.used(tenant)
    _answer(served)
    made = send(served.url, "responses", A, store=False)
    assert made.status == 200 and store.used(tenant) == before
    auth = headers_for("responses", A)
    assert (
        httpx.get(f"{served.url}/v1/responses/{made.json['id']}", headers=auth).status_code == 404
    )


def test_keys_are_never_logged(served: Keyed, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for key in (A, "sk-wrong-secret-42"):
        for api in APIS:
            _answer(served)
            send(served.url, api, key)
    assert caplog.records  # something was logged (uvicorn, httpx, the server)
    for key in (A, "sk-wrong-secret-42"):
        assert key not in caplog.text


def test_tenants_are_stable_one_way_names_of_keys() -> None:
    one = Keys([A]).tenant_of({"x-api-key": A})
    assert one == Keys([B, A]).tenant_of({"authorization": f"Bearer {A}"})
    assert one != Keys([B]).tenant_of({"x-api-key": B})
    assert A not in one and one.startswith("key-")
    assert Keys().tenant_of({}) == ANONYMOUS  # no keys: no check
    workers = Keys.from_digests(Keys([A, B]).digests())  # what a worker receives
    assert workers.tenant_of({"x-api-key": B}) == Keys([B]).tenant_of({"x-api-key": B})
    with pytest.raises(ApiError) as caught:
        workers.tenant_of({"authorization": "Basic " + A})  # not a bearer token
    assert caught.value.status == 401


def test_keys_come_from_flags_the_variable_and_a_file(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    path = tmp_path / "keys"
    path.write_text("# team keys\nsk-file-one\n\n  sk-file-two  # ci\n")
    flags = parser.parse_args(["--api-key", A, "--api-key", B, "--api-key-file", str(path)])
    keys = keys_from(config_from(flags, {}))
    assert len(keys) == 4
    for key in (A, B, "sk-file-one", "sk-file-two"):
        assert keys.tenant_of({"x-api-key": key}).startswith("key-")
    from_env = keys_from(config_from(parser.parse_args([]), {"TOOLWIRE_API_KEY": f"{A}, {B}"}))
    assert len(from_env) == 2
    assert not keys_from(config_from(parser.parse_args([]), {})).enabled
