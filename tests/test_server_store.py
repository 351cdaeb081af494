"""Stored responses: one interface over memory, SQLite and a real Redis; the byte bound
per tenant (and what it costs in RSS); TTL; a restart (SQLite) and two replicas (Redis).

The backend tests run the same assertions on every backend. The server tests start
`toolwire serve` as a user does, on the bundled model: one restarted on the same
SQLite file, and two replicas on two ports sharing one redis-server.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.data import ROOT
from tests.production import redis_server
from tests.serving import toolwire_serve
from toolwire.server.config import add_arguments, config_from
from toolwire.server.core.errors import ApiError
from toolwire.server.responses.store import (
    OVERHEAD,
    MemoryStore,
    Record,
    ResponseStore,
    StoreSettings,
    encode,
)
from toolwire.server.responses.stores import default_path, open_store
from toolwire.server.run import store_from

BACKENDS = ["memory", "sqlite", "redis"]
Open = Callable[[StoreSettings], ResponseStore]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=BACKENDS)
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Open]:
    """Opens a fresh store of the parametrized backend with the given settings."""
    made: list[ResponseStore] = []
    counter = iter(range(1000))

    def open_one(settings: StoreSettings) -> ResponseStore:
        if request.param == "memory":
            spec = "memory"
        elif request.param == "sqlite":
            spec = str(tmp_path / f"store{next(counter)}.sqlite3")
        else:
            url = request.getfixturevalue("redis_url")
            spec = url[: url.rindex("/")] + f"/{next(counter) % 16}"
            import redis

            redis.Redis.from_url(spec).flushdb()
        store = open_store(spec, settings)
        made.append(store)
        return store

    yield open_one
    for store in made:
        store.close()


def _item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def _record(rid: str, previous: str | None = None, pad: int = 0, **kw: Any) -> Record:
    response = {"id": rid, "object": "response", "output": [], "metadata": {"pad": "x" * pad}}
    return encode(response, [_item(f"in {rid}"), _item(f"out {rid}")], previous, **kw)


def test_a_chain_reads_back_and_a_deleted_turn_breaks_it(opened: Open) -> None:
    store = opened(StoreSettings())
    assert store.put("t", _record("r1"))
    assert store.put("t", _record("r2", "r1"))
    assert store.put("t", _record("r3", "r2"))
    texts = [item["content"] for item in store.history("t", "r3")]
    assert texts == ["in r1", "out r1", "in r2", "out r2", "in r3", "out r3"]
    got = store.get("t", "r2")
    assert got is not None and got["id"] == "r2"
    assert store.delete("t", "r2") and not store.delete("t", "r2")
    assert store.get("t", "r2") is None
    with pytest.raises(ApiError) as caught:
        store.history("t", "r3")
    assert (caught.value.status, caught.value.code) == (404, "previous_response_not_found")
    assert "expired or evicted" in caught.value.message
    assert [i["content"] for i in store.history("t", "r1")] == ["in r1", "out r1"]


def test_another_tenant_finds_nothing(opened: Open) -> None:
    store = opened(StoreSettings())
    store.put("alice", _record("r1"))
    store.put("alice", _record("r2", "r1"))
    assert store.get("bob", "r1") is None
    with pytest.raises(ApiError) as caught:
        store.history("bob", "r2")
    assert caught.value.status == 404 and "was not found" in caught.value.message
    assert not store.delete("bob", "r1")
    assert store.used("bob") == 0
    assert len(store.history("alice", "r2")) == 4  # untouched


def test_the_byte_bound_holds_per_tenant(opened: Open) -> None:
    """A tenant past its bound loses its own oldest entries, never another's; a record
    larger than the bound is not kept; the books equal the records kept."""
    bound = 40_000
    store = opened(StoreSettings(max_bytes=bound))
    quiet = _record("bob-1", pad=2_000)
    store.put("bob", quiet)
    sizes = {}
    for n in range(30):
        record = _record(f"a{n}", pad=3_000)
        sizes[record.id] = record.size
        assert store.put("alice", record)
        assert store.used("alice") <= bound
    kept = [rid for rid in sizes if store.get("alice", rid) is not None]
    assert kept == [f"a{n}" for n in range(30 - len(kept), 30)]  # the newest, in order
    assert store.used("alice") == sum(sizes[rid] for rid in kept)
    assert bound - max(sizes.values()) < store.used("alice") <= bound
    assert store.get("bob", "bob-1") is not None and store.used("bob") == quiet.size
    huge = _record("huge", pad=bound)
    assert not store.put("alice", huge) and store.get("alice", "huge") is None
    assert quiet.size == len(quiet.response) + len(quiet.items) + OVERHEAD


def test_an_entry_past_its_ttl_is_gone(opened: Open, request: pytest.FixtureRequest) -> None:
    backend = request.node.callspec.params["opened"]
    store = opened(StoreSettings(ttl=1.0, max_bytes=10**6))
    if backend == "redis":  # Redis's own clock: wait it out
        store.put("t", _record("old"))
        time.sleep(1.2)
    else:
        store.put("t", _record("old", created=time.time() - 5))
    fresh = _record("new", "old")
    store.put("t", fresh)
    assert store.get("t", "old") is None
    assert store.get("t", "new") is not None
    with pytest.raises(ApiError, match="expired or evicted"):
        store.history("t", "new")
    assert not store.delete("t", "old")
    assert store.used("t") == fresh.size  # the expired entry left the books


def test_the_default_store_is_a_sqlite_file_in_the_cache_directory(tmp_path: Path) -> None:
    store = open_store(None, StoreSettings(), {"XDG_CACHE_HOME": str(tmp_path)})
    assert store.name == f"sqlite:{tmp_path / 'toolwire' / 'responses.sqlite3'}"
    assert default_path({"XDG_CACHE_HOME": str(tmp_path)}).is_file()
    assert default_path({}).parts[-3:] == (".cache", "toolwire", "responses.sqlite3")
    store.close()


def test_the_store_flags_set_the_ttl_and_the_bound(tmp_path: Path) -> None:
    """`--store-ttl` and `--store-max-mb` reach the store `serve` opens: an entry older
    than the TTL is gone, 0 keeps it, a negative TTL is refused at startup."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)

    def opened(*flags: str) -> ResponseStore:
        path = tmp_path / f"store{len(list(tmp_path.iterdir()))}.sqlite3"
        return store_from(config_from(parser.parse_args(["--store", str(path), *flags]), {}))

    for flags, kept in ((("--store-ttl", "60"), False), (("--store-ttl", "0"), True)):
        store = opened(*flags)
        store.put("t", _record("old", created=time.time() - 3600))
        assert (store.get("t", "old") is not None) is kept, flags
        store.close()
    store = opened("--store-max-mb", "1")
    assert store.settings.max_bytes == 1024 * 1024
    for n in range(40):
        store.put("t", _record(f"r{n}", pad=50_000))
    assert store.get("t", "r0") is None and store.used("t") <= 1024 * 1024
    store.close()
    with pytest.raises(ValueError, match="--store-ttl"):
        config_from(parser.parse_args(["--store-ttl", "-1"]), {})


def test_memory_store_expires_by_its_clock() -> None:
    now = [1000.0]
    store = MemoryStore(StoreSettings(ttl=10), clock=lambda: now[0])
    store.put("t", _record("r1", created=now[0]))
    now[0] += 9
    assert store.get("t", "r1") is not None
    now[0] += 2
    assert store.get("t", "r1") is None and store.used("t") == 0


def test_sqlite_is_shared_by_processes_writing_at_once(tmp_path: Path) -> None:
    """Two processes put into one file at the same time (WAL, write locks): every
    record of both is there, and the triggers' byte count equals the records'."""
    path = tmp_path / "shared.sqlite3"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{str(ROOT / "src")!r}, {str(ROOT)!r}]
        from tests.test_server_store import _record
        from toolwire.server.responses.store import StoreSettings
        from toolwire.server.responses.stores import open_store
        store = open_store({str(path)!r}, StoreSettings())
        for n in range(60):
            store.put("t", _record(f"child{{n}}", pad=500))
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script])
    store = open_store(str(path), StoreSettings())
    sizes = 0
    for n in range(60):
        record = _record(f"parent{n}", pad=500)
        sizes += record.size
        store.put("t", record)
    assert child.wait(timeout=120) == 0
    for n in range(60):
        assert store.get("t", f"child{n}") is not None
        assert store.get("t", f"parent{n}") is not None
    sizes += sum(_record(f"child{n}", pad=500).size for n in range(60))
    assert store.used("t") == sizes
    store.close()


RSS_SCRIPT = """
import base64, ctypes, json, os, random, sys
sys.path[:0] = [{src!r}]
from toolwire.server.responses.store import MemoryStore, StoreSettings, encode

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

bound = {bound}
store = MemoryStore(StoreSettings(max_bytes=bound))
rng = random.Random(7)

def random_text(size):  # random ASCII, incompressible, at C speed
    return base64.b64encode(rng.randbytes(size)).decode()[:size]

meta = {{f"key{{k:02d}}": random_text(512) for k in range(16)}}
before = rss()
for n in range({count}):
    size = rng.choice([2_000, 20_000, 200_000, 1_500_000])
    text = random_text(size)
    response = {{"id": f"resp_{{n}}", "object": "response", "metadata": meta,
                "instructions": text[: size // 4],
                "output": [{{"type": "message", "content": [{{"text": text}}]}}]}}
    items = [{{"type": "message", "role": "user", "content": text[: size // 2]}}]
    store.put("t", encode(response, items, None))
    del text, response, items
cached = rss() - before
ctypes.CDLL("libc.so.6").malloc_trim(0)  # what malloc keeps of freed blocks back to the OS
print(json.dumps({{"growth": rss() - before, "untrimmed": cached, "used": store.used("t")}}))
"""


def test_the_byte_bound_is_what_the_process_grows_by() -> None:
    """A memory store filled to four times its bound (responses of 2 KB to 3 MB,
    metadata at OpenAI's limits) holds its counted bytes of memory, within 10%: the
    process's RSS growth once malloc has handed freed blocks back (`malloc_trim`; the
    blocks this test's own data generation freed are otherwise cached by glibc)."""
    bound = 96 * 1024 * 1024
    code = RSS_SCRIPT.format(src=str(ROOT / "src"), bound=bound, count=600)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    measured = json.loads(out.stdout)
    used, growth = measured["used"], measured["growth"]
    assert 0.9 * bound < used <= bound
    assert abs(growth - used) <= 0.1 * used, measured


# -- the server: a restart on SQLite, two replicas on Redis --------------------------------

MODEL = "SmolLM2-135M-Instruct"


def _respond(url: str, **body: Any) -> dict[str, Any]:
    request = {"model": MODEL, "input": "Say hi.", "max_output_tokens": 8, **body}
    answer = httpx.post(url + "/v1/responses", json=request, timeout=120)
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def test_a_stored_response_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite3"
    with toolwire_serve(tmp_path / "one.log", "--store", str(path)) as url:
        made = _respond(url)
        fresh = _respond(url, store=False)["usage"]["input_tokens"]
    with toolwire_serve(tmp_path / "two.log", "--store", str(path)) as url:
        got = httpx.get(f"{url}/v1/responses/{made['id']}")
        assert got.status_code == 200 and got.json()["output"] == made["output"]
        again = _respond(url, previous_response_id=made["id"])
        assert again["previous_response_id"] == made["id"]
        assert again["usage"]["input_tokens"] > fresh  # the stored turn is in the prompt
    assert f"responses stored in sqlite:{path}" in (tmp_path / "two.log").read_text()


def test_two_replicas_share_one_redis(tmp_path: Path, redis_url: str) -> None:
    """`toolwire serve` twice, on two ports, `--store redis://`: a response made on one
    is read, continued and deleted through the other."""
    flags = ("--store", redis_url)
    with (
        toolwire_serve(tmp_path / "a.log", *flags) as first,
        toolwire_serve(tmp_path / "b.log", *flags) as second,
    ):
        made = _respond(first)
        fresh = _respond(second, store=False)["usage"]["input_tokens"]
        got = httpx.get(f"{second}/v1/responses/{made['id']}")
        assert got.status_code == 200 and got.json()["id"] == made["id"]
        again = _respond(second, previous_response_id=made["id"])
        assert again["usage"]["input_tokens"] > fresh
        later = _respond(first, previous_response_id=again["id"])  # the chain, back on A
        assert later["usage"]["input_tokens"] > again["usage"]["input_tokens"]
        assert httpx.delete(f"{second}/v1/responses/{made['id']}").status_code == 200
        assert httpx.get(f"{first}/v1/responses/{made['id']}").status_code == 404
        ready = httpx.get(f"{first}/health/ready").json()
        assert ready["store"] == redis_url and ready["checks"]["store"] == "ok"
