"""Earlier reproductions, replayed on every API (Chat Completions, Responses, Messages).

Each was first found and fixed on Chat Completions; the same request through the other
two APIs must behave the same:

* stop strings and forced calls: a stop string never cuts a call, forced or not,
  complete or cut; a forced call cut by the token limit is a cut call, never text; the
  finish reason says what ended the turn (a call, the token limit, a stop string) the
  API's way;
* `response_format` (Responses' `text.format`, Messages' `output_config.format`)
  reaches a remote engine (vLLM, SGLang) as a structural tag holding the schema, and
  the constrained answer is returned as written; no format, no tag;
* rendering is off the event loop: a request whose prompt takes about a second to
  tokenize does not stall a stream being served at the same time.

(A client leaving a non-streaming request on the embedded engine is replayed per API in
tests/test_server_embedded.py, where the real engine runs.)
"""

from __future__ import annotations

import gc
import itertools
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.apis import EVERY_API, Api, Reply, ScriptedEngine, in_process
from tests.serving import CALL, GET_WEATHER, STREAM, ScriptedRig, scripted
from toolwire.server.core.pipeline import Limits

TOOLS = [GET_WEATHER]
#: A call cut by the token limit inside its arguments.
CUT = CALL[: CALL.index("Paris")]
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


# -- stop strings and forced calls ------------------------------------------------------


@EVERY_API
@STREAM
@pytest.mark.parametrize("choice", ["auto", "required", "get_weather"])
def test_a_stop_string_never_cuts_a_call_and_the_finish_says_what_ended(
    api: Api, stream: bool, choice: str
) -> None:
    engine = ScriptedEngine()
    # Responses has no stop strings: there the same turns run without one
    stops = (lambda *s: ()) if api.name == "responses" else (lambda *s: s)
    with in_process(engine) as client:
        engine.say(CALL)
        body = api.body(tools=TOOLS, choice=choice, stop=stops("get_", "Paris"), stream=stream)
        answer = api.ask(client, body)
        assert answer.status == 200, answer.error
        assert [(c.name, json.loads(c.arguments)) for c in answer.calls] == [
            ("get_weather", {"city": "Paris"})
        ]
        assert answer.finish == "tool_calls" and answer.stop_sequence is None

        engine.say(CUT, finish="length")
        body = api.body(tools=TOOLS, choice=choice, stop=stops("city"), stream=stream)
        answer = api.ask(client, body)
        assert answer.status == 200, answer.error
        if choice == "auto":  # a call cut off is not returned
            assert answer.calls == []
        else:  # a forced call cut off is a cut call, never text (core/forced.py)
            assert [c.name for c in answer.calls] == ["get_weather"] and not answer.text
        assert answer.finish == "length" and answer.stop_sequence is None

        if choice != "auto":
            return
        engine.say("Sunny in Paris. More text.")
        answer = api.ask(client, api.body(tools=TOOLS, stop=stops(" More"), stream=stream))
        assert answer.status == 200, answer.error
        assert answer.calls == [] and answer.finish == "stop"
        if api.name != "responses":
            assert answer.text == "Sunny in Paris."
            if api.name == "messages":
                assert answer.stop_sequence == " More"


# -- response_format on the remote engines ----------------------------------------------


@pytest.fixture(scope="module", params=["vllm", "sglang"])
def rig(request: pytest.FixtureRequest) -> Iterator[ScriptedRig]:
    with scripted(request.param, Limits(timeout=10)) as (upstream, upstream_url, urls):
        yield ScriptedRig(upstream, upstream_url, urls[0])


def _post(rig: ScriptedRig, api: Api, body: dict[str, Any]) -> Any:
    r = httpx.post(rig.url + api.path, json=body, timeout=20)
    return api.read(Reply(r.status_code, r.content, dict(r.headers)))


def _schemas(tag: Any) -> list[Any]:
    """Every JSON schema a structural tag constrains to."""
    found: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "json_schema" and "json_schema" in node:
                found.append(node["json_schema"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(tag)
    return found


@EVERY_API
@STREAM
def test_an_answer_format_reaches_a_remote_engine_as_its_schema(
    rig: ScriptedRig, api: Api, stream: bool
) -> None:
    rig.upstream.scripts.clear()
    rig.script('{"city": "Paris"}')
    answer = _post(rig, api, api.body("A city.", answer_format=SCHEMA, stream=stream))
    assert answer.status == 200, answer.error
    assert json.loads(answer.text) == {"city": "Paris"} and answer.finish == "stop"
    tag = rig.tag()
    assert tag is not None and tag["type"] == "structural_tag"
    assert _schemas(tag) == [SCHEMA]

    rig.script("plain")
    answer = _post(rig, api, api.body("A city.", stream=stream))
    assert answer.status == 200 and answer.text == "plain"
    assert rig.tag() is None


# -- rendering off the event loop -------------------------------------------------------


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """The test process's heap (every tokenizer the session loaded) kept out of the
    collector while a test times the server running in it: a full collection of it
    pauses every thread for a second, which is the suite's weight, not the server's."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@EVERY_API
@pytest.mark.usefixtures("frozen_heap")
def test_rendering_does_not_block_other_streams(api: Api) -> None:
    with scripted("vllm", Limits(timeout=20)) as (upstream, upstream_url, urls):
        rig = ScriptedRig(upstream, upstream_url, urls[0])
        rig.script(" ".join(["tick"] * 100), per_event=1, delay=0.02)
        arrivals: list[float] = []

        def watch() -> None:
            body = {"model": "qwen3-test", "stream": True}
            body["messages"] = [{"role": "user", "content": "x"}]
            with httpx.stream(
                "POST", rig.url + "/v1/chat/completions", json=body, timeout=30
            ) as response:
                for line in response.iter_lines():  # events that arrive together
                    arrivals.extend([time.monotonic()] * line.count("tick"))  # share a line

        thread = threading.Thread(target=watch)
        thread.start()
        deadline = time.monotonic() + 5
        while len(arrivals) <= 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(arrivals) > 3
        rig.script("ok")
        # about a second of rendering (tokenizing 1.25 MB), through this API
        heavy = _post(rig, api, api.body("word " * 250_000))
        thread.join(timeout=30)
        assert heavy.status == 200, heavy.error
        gaps = [b - a for a, b in itertools.pairwise(arrivals)]
        assert len(arrivals) == 100 and max(gaps) < 0.5, max(gaps)
