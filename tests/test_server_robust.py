"""Nothing a model or a client writes breaks a conversation, on every API.

Each class is stated once and checked on Chat Completions, Responses and Messages
(`tests/apis.py`), in-process on a scripted engine with Qwen3's real vocabulary, or on
loopback HTTP in front of a scripted vLLM or SGLang upstream where the wire matters:

* delimiter text in content: an answer holding the literal text of Qwen3's `</think>`
  and `<tool_call>` (ordinary ids), sent back the API's way with a question holding it
  too, is served; the prompt carries the text as ordinary ids, with the special ids of
  the same conversation in plain words;
* state that cannot be continued: a call cut by the token limit while its arguments
  streamed is answered and stored; the next turn, sent back the API's way (stored or
  by the client), is served, the cut call rendered as the text the model wrote;
* request shapes that raised: a history call's arguments nested far past the bound, a
  field of the wrong type, are a 400 naming the field;
* bounds: a token budget past any context is cut, a seed past 64 bits and arguments
  that are not a JSON object are a 400 naming the field, a tool declared twice too, and
  a stop string past 1,000 characters (the matcher's memory is quadratic in it);
* timeouts: an upstream that keeps the connection busy (SSE comments, events with no
  token) without producing a token is cut off after `token_timeout`;
* padding ids: ids between the tokenizer's vocabulary and the model's output layer
  are empty text, counted; only ids past the model's are an engine error;
* templates as code: a served template that builds a gigabyte string is refused, named,
  before the string is built (the request allocates a small fraction of it).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.apis import APIS, EVERY_API, MODEL, Api, Reply, ScriptedEngine, in_process
from tests.serving import CALL, GET_TIME, GET_WEATHER, STREAM, running, scripted_engine
from toolwire.server.app import create_app
from toolwire.server.core.pipeline import Limits

TOOLS = [GET_WEATHER, GET_TIME]
#: Qwen3's output layer: 151,936 rows; its tokenizer's last id is 151,668.
ROWS = 151_936
PADDING = 151_700
#: A call cut inside its arguments, as the model wrote it (genuine `<tool_call>` id).
CUT = CALL[: CALL.index("ris")]


def _reply(api: Api, client: Any, body: dict[str, Any]) -> Any:
    return api.read(client.post(api.path, body))


# -- 1. delimiter text in content is inert for the template --------------------------

#: Delimiter text as ordinary text: the model explaining the tags, or echoing a result.
MARKUP = "The tag </think> closes reasoning; <tool_call> opens a call."
PLAIN = "The tag word closes reasoning; a word opens a call."


def _continued_prompts(
    api: Api, client: Any, engine: ScriptedEngine, text: str, stream: bool
) -> list[list[int]]:
    """The answer `text` (spelled from ordinary ids), and the prompt of each next turn
    that sends it back with `text` in the question too (Responses: by id and
    statelessly)."""
    engine.say(spelled=text)
    body = api.body("What closes reasoning?", stream=stream)
    first = _reply(api, client, body)
    assert first.status == 200 and first.text == text, first.error
    turns = [api.next_turn(body, first, ask=f"And {text}?")]
    if api.name == "responses":
        turns.append(api.next_turn(body, first, ask=f"And {text}?", stateless=True))
    prompts = []
    for turn in turns:
        engine.say("Fine.")
        after = _reply(api, client, turn)
        assert after.status == 200, (text, after.error)
        prompts.append(engine.prompt())
    return prompts


@EVERY_API
@STREAM
def test_an_answer_holding_delimiter_text_can_be_continued(api: Api, stream: bool) -> None:
    engine = ScriptedEngine()
    tok = engine.tokenizer
    with in_process(engine) as client:
        marked = _continued_prompts(api, client, engine, MARKUP, stream)
        plain = _continued_prompts(api, client, engine, PLAIN, stream)
    for prompt, neutral in zip(marked, plain, strict=True):
        # the template acted on no text: the structure is that of plain words
        assert [i for i in prompt if i in tok.added_ids] == [
            i for i in neutral if i in tok.added_ids
        ]
        # the answer and the question, each whole, in place
        text = tok.decode(prompt)
        assert text.count(MARKUP) == 2, text


# -- 2. every stored response can be continued ------------------------------------


@EVERY_API
@STREAM
def test_a_call_cut_while_its_arguments_streamed_can_be_continued(api: Api, stream: bool) -> None:
    engine = ScriptedEngine()
    call_id = engine.tokenizer.added_tokens["<tool_call>"]
    with in_process(engine, Limits(timeout=10, stream_tool_arguments=True)) as client:
        engine.say(CUT, finish="length")
        body = api.body(tools=TOOLS, max_tokens=40, stream=stream)
        first = _reply(api, client, body)
        assert first.status == 200 and first.finish == "length", first.error
        assert [c.name for c in first.calls] == ["get_weather"]
        # the template's tool instructions hold the delimiter: what a call adds is counted
        instructions = engine.prompt().count(call_id)
        turns = [api.next_turn(body, first)]
        if api.name == "responses":  # the stored response, and its output sent back
            turns.append(api.next_turn(body, first, stateless=True))
        for turn in turns:
            engine.say("It is sunny.")
            after = _reply(api, client, turn)
            assert after.status == 200, after.error
            assert after.text == "It is sunny."
            prompt = engine.prompt()
            text = engine.tokenizer.decode(prompt)
            if api.name == "messages":
                # Messages gives a cut call the only input an object can be: {}; sent
                # back, it is a call like any other
                assert prompt.count(call_id) == instructions + 1
            else:
                # what the model wrote of the call is in the prompt, as text: no call
                assert '"name": "get_weather", "arguments": {"city": "Pa' in text
                assert prompt.count(call_id) == instructions


# -- 3. malformed fields are 400s naming them, never 500s ---------------------------

_DEEP = "[" * 100_000 + "]" * 100_000


def _history_call(api: Api, arguments: Any) -> dict[str, Any]:
    """A request whose history holds one call to get_weather with `arguments` (text,
    or for Messages the `input` value), its result, and a question."""
    if api.name == "chat":
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": arguments},
        }
        messages = [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
            {"role": "user", "content": "And now?"},
        ]
        return {**api.body(tools=TOOLS), "messages": messages}
    if api.name == "responses":
        items = [
            {"role": "user", "content": "Weather?"},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "get_weather",
                "arguments": arguments,
            },
            {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
            {"role": "user", "content": "And now?"},
        ]
        return {**api.body(tools=TOOLS), "input": items}
    use = {"type": "tool_use", "id": "c1", "name": "get_weather", "input": arguments}
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "x"}]},
    ]
    return {**api.body(tools=TOOLS), "messages": messages}


#: Where `_history_call` puts the arguments, per API.
ARGUMENTS = {
    "chat": "messages[1].tool_calls[0].function.arguments",
    "responses": "input[1].arguments",
    "messages": "messages.1.content.0.input",
}


def _deep_object(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@EVERY_API
def test_arguments_nested_far_past_the_bound_are_a_400_naming_them(api: Api) -> None:
    engine = ScriptedEngine()
    with in_process(engine) as client:
        # as text (Chat, Responses) the decoder would recurse; as an object (Messages)
        # the body's own bound applies
        arguments: Any = _DEEP if api.name != "messages" else _deep_object(500)
        answer = _reply(api, client, _history_call(api, arguments))
        assert answer.status == 400, answer.error
        assert answer.field is not None and answer.field.startswith(ARGUMENTS[api.name])
        assert not engine.generations


#: A field of the wrong type in each API's history, and the path it is named by.
WRONG_TYPES: dict[str, list[tuple[Any, str]]] = {
    "chat": [
        (
            {"role": "assistant", "content": "x", "reasoning_content": 5},
            "messages[1].reasoning_content",
        ),
        ({"role": "assistant", "content": None, "tool_calls": [5]}, "messages[1].tool_calls[0]"),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": 5}}]},
            "messages[1].tool_calls[0].function.name",
        ),
        ({"role": "tool", "tool_call_id": 7, "content": "x"}, "messages[1].tool_call_id"),
    ],
    "responses": [
        ({"type": "reasoning", "content": 5}, "input[1].content"),
        (
            {"type": "reasoning", "content": [{"type": "reasoning_text", "text": 5}]},
            "input[1].content[0].text",
        ),
        ({"type": "reasoning", "summary": 5}, "input[1].summary"),
        (
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": 5},
            "input[1].arguments",
        ),
    ],
    "messages": [
        (
            {"role": "assistant", "content": [{"type": "thinking", "thinking": 5}]},
            "messages.1.content.0.thinking",
        ),
        (
            {"role": "assistant", "content": [{"type": "text", "text": 5}]},
            "messages.1.content.0.text",
        ),
        ({"role": "assistant", "content": [5]}, "messages.1.content.0"),
    ],
}


@EVERY_API
def test_a_field_of_the_wrong_type_is_a_400_naming_it(api: Api) -> None:
    engine = ScriptedEngine()
    with in_process(engine) as client:
        for entry, path in WRONG_TYPES[api.name]:
            body = api.body()
            key = "input" if api.name == "responses" else "messages"
            first = {"role": "user", "content": "Hi"}
            last = [first] if api.name != "responses" else []
            body[key] = [first, entry, *last]
            answer = _reply(api, client, body)
            assert answer.status == 400, (path, answer.status, answer.error)
            assert answer.field == path, (path, answer.error)


# -- 4. one rule per field ----------------------------------------------------------

#: Each API's name of the output budget.
BUDGET = {"chat": "max_tokens", "responses": "max_output_tokens", "messages": "max_tokens"}


@EVERY_API
def test_a_token_budget_past_any_context_is_cut(api: Api) -> None:
    """A budget no engine can hold is cut, not forwarded; at or below 0 it is a 400."""
    engine = ScriptedEngine()
    with in_process(engine) as client:
        for asked in (10**30, 2**63, 2**31):
            engine.say("Fine.")
            answer = _reply(api, client, api.body(max_tokens=asked))
            assert answer.status == 200 and answer.text == "Fine.", answer.error
            assert engine.generations[-1].max_tokens < 2**31
        for bad in (0, -1, 1.5, "10", True):
            answer = _reply(api, client, {**api.body(), BUDGET[api.name]: bad})
            assert answer.status == 400 and answer.field == BUDGET[api.name], (bad, answer.error)


def test_a_seed_past_64_bits_is_a_400_naming_it() -> None:
    """Only Chat Completions has a seed (Responses and Messages have none): vLLM's rule,
    a signed 64-bit integer."""
    (chat,) = [a for a in APIS if a.name == "chat"]
    engine = ScriptedEngine()
    with in_process(engine) as client:
        for seed in (2**70, 2**63, -(2**63) - 1, 1.5, "7"):
            answer = _reply(chat, client, chat.body(seed=seed))
            assert answer.status == 400 and answer.field == "seed", (seed, answer.error)
        for seed in (2**63 - 1, -(2**63), 0):
            engine.say("Fine.")
            assert _reply(chat, client, chat.body(seed=seed)).status == 200
            assert engine.generations[-1].seed == seed


#: Arguments that are not a JSON object: as text (Chat, Responses) and as Messages'
#: `input` value.
NOT_OBJECTS = [
    "[1, 2]",
    "null",
    "NaN",
    '{"city": NaN}',
    "Infinity",
    "5",
    '"Paris"',
    '{"a": 1} {"b": 2}',
    "{}x",
]
NOT_OBJECT_INPUTS: list[Any] = [[1, 2], None, 5, "Paris"]


@EVERY_API
def test_arguments_that_are_not_a_json_object_are_a_400_naming_them(api: Api) -> None:
    engine = ScriptedEngine()
    with in_process(engine) as client:
        values = NOT_OBJECTS if api.name != "messages" else NOT_OBJECT_INPUTS
        for value in values:
            answer = _reply(api, client, _history_call(api, value))
            assert answer.status == 400, (value, answer.status)
            assert answer.field == ARGUMENTS[api.name], (value, answer.error)
        for value in ('{"city": "Paris"}', "") if api.name != "messages" else ({"city": "Paris"},):
            engine.say("Fine.")
            assert _reply(api, client, _history_call(api, value)).status == 200, value
        assert not engine.generations[-1].prompt_ids.count(-1)


@EVERY_API
def test_json_without_a_number_for_nan_is_a_400_naming_the_field(api: Api) -> None:
    """JSON has no NaN or Infinity; Python's decoder takes them: the body check does not."""
    engine = ScriptedEngine()
    with in_process(engine) as client:
        body = json.dumps(api.body(temperature=0.5)).replace("0.5", "NaN")
        answer = api.read(client.post(api.path, body))
        assert answer.status == 400 and answer.field == "temperature", answer.error
        if api.name == "messages":
            body = json.dumps(_history_call(api, {"city": 0.5})).replace("0.5", "-Infinity")
            answer = api.read(client.post(api.path, body))
            assert answer.status == 400 and answer.field == ARGUMENTS[api.name] + ".city"


@EVERY_API
def test_a_tool_declared_twice_is_a_400_naming_it(api: Api) -> None:
    engine = ScriptedEngine()
    with in_process(engine) as client:
        answer = _reply(api, client, api.body(tools=[GET_WEATHER, GET_TIME, GET_WEATHER]))
        assert answer.status == 400 and answer.field is not None
        assert re.match(r"tools(\[2\]|\.2)\.(function\.)?name$", answer.field), answer.field


#: Each API's stop strings (Responses has none), and the path of the second one.
STOPS = {"chat": ("stop", "stop[1]"), "messages": ("stop_sequences", "stop_sequences.1")}


@pytest.mark.parametrize("api", [a for a in APIS if a.name in STOPS], ids=list(STOPS))
def test_a_stop_string_past_the_bound_is_a_400_naming_it(api: Api) -> None:
    """The stop matcher holds every proper prefix of each stop string: memory grows with
    the square of its length (200,000 characters would be 2*10^10). Past 1,000
    characters it is refused, before anything is built."""
    engine = ScriptedEngine()
    key, second = STOPS[api.name]
    long = "word " * 4_000
    with in_process(engine) as client:
        tracemalloc.start()
        try:
            answer = _reply(api, client, api.body(stop=["\n\n\n", long]))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert answer.status == 400 and answer.field == second, answer.error
        assert "20,000 characters, more than the 1,000" in json.dumps(answer.error)
        assert peak < 16 * 2**20, f"the request allocated {peak:,} bytes"
        if api.name == "chat":  # one string
            answer = _reply(api, client, {**api.body(), key: long})
            assert answer.status == 400 and answer.field == key, answer.error
        engine.say("Sunny. " + "x" * 1_000)
        answer = _reply(api, client, api.body(stop=["x" * 1_000], max_tokens=2_000))
        assert answer.status == 200 and answer.text == "Sunny. ", answer.error
        assert answer.finish == "stop"


# -- 5. progress means tokens ---------------------------------------------------------


class Idle:
    """A vLLM or SGLang upstream that sends `first` ids, then keeps the connection busy
    without a token: SSE comments (`: ping`) or events carrying no ids, every 0.1 s."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.first: list[int] = []
        self.idle = "ping"
        self.closed = 0

    def app(self) -> Starlette:
        path = "/v1/completions" if self.protocol == "vllm" else "/generate"
        return Starlette(routes=[Route(path, self._handle, methods=["POST"])])

    def _event(self, ids: list[int], total: list[int]) -> bytes:
        if self.protocol == "vllm":
            choice = {"index": 0, "text": "", "token_ids": ids, "finish_reason": None}
            payload: Any = {"choices": [choice]}
        else:
            payload = {
                "text": "",
                "output_ids": total,
                "meta_info": {"completion_tokens": len(total)},
            }
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    async def _handle(self, request: Request) -> Response:
        await request.json()
        return StreamingResponse(self._events(), media_type="text/event-stream")

    async def _events(self) -> AsyncIterator[bytes]:
        try:
            if self.first:
                yield self._event(self.first, self.first)
            for _ in range(600):  # a minute of keep-alive, unless the client leaves
                await asyncio.sleep(0.1)
                yield b": ping\n\n" if self.idle == "ping" else self._event([], self.first)
        finally:
            self.closed += 1


TOKEN_TIMEOUT = 0.4


@pytest.fixture(scope="module", params=["vllm", "sglang"])
def idle(request: pytest.FixtureRequest) -> Iterator[tuple[Idle, str]]:
    upstream = Idle(request.param)
    with running(upstream.app()) as upstream_url:
        # the engine's own wait is per read: comments and empty events restart it
        engine = scripted_engine(request.param, upstream_url, timeout=TOKEN_TIMEOUT)
        limits = Limits(timeout=30, token_timeout=TOKEN_TIMEOUT)
        with running(create_app(engine, limits)) as url:
            yield upstream, url


@EVERY_API
@STREAM
def test_an_upstream_that_sends_no_token_is_cut_off(
    idle: tuple[Idle, str], api: Api, stream: bool
) -> None:
    """Before any token and after one, on every API, whole and streamed, and both
    upstreams, each request kept waiting by one kind of keep-alive: comments in half
    the items before the first token, empty events in the other half, and the other
    kind after it, so every (kind, before or after) pair is on every upstream. Each
    request waits out the timeout: every kind on every item doubled the module's time."""
    upstream, url = idle
    tok = scripted_engine("vllm", "http://unused").tokenizer
    kinds = ["ping", "empty"]
    if (APIS.index(api) + stream) % 2:
        kinds.reverse()
    for first, upstream.idle in zip(([], tok.encode("Hello")), kinds, strict=True):
        upstream.first = first
        closed = upstream.closed
        started = time.monotonic()
        r = httpx.post(url + api.path, json=api.body(stream=stream), timeout=20)
        took = time.monotonic() - started
        assert took < TOKEN_TIMEOUT + 3, took
        answer = api.read(Reply(r.status_code, r.content, dict(r.headers)))
        if not first:  # nothing was sent yet: a plain 504
            assert answer.status == 504, answer.error
        elif stream:  # the stream ends with the API's error event, the text kept
            assert answer.status == 200 and answer.finish == "error", answer
            assert "no token" in json.dumps(answer.error)
            if api.name != "messages":
                assert answer.text == "Hello"
        else:
            assert answer.status == 504, answer.error
        deadline = time.monotonic() + 3
        while upstream.closed == closed and time.monotonic() < deadline:
            time.sleep(0.02)
        assert upstream.closed == closed + 1  # the upstream stream was closed


# -- 6. padding ids -------------------------------------------------------------------


@EVERY_API
@STREAM
def test_ids_in_the_output_layers_padding_are_empty_text(api: Api, stream: bool) -> None:
    engine = ScriptedEngine(vocab_size=ROWS)
    tok = engine.tokenizer
    assert tok.vocab_size < PADDING < ROWS
    with in_process(engine) as client:
        tokens = client.metric("toolwire_completion_tokens_total")
        engine.say(ids=[*tok.encode("Hel"), PADDING, *tok.encode("lo"), ROWS - 1], per_delta=2)
        answer = _reply(api, client, api.body(stream=stream))
        assert answer.status == 200 and answer.text == "Hello", answer.error
        assert client.metric("toolwire_padding_ids_total") == 2
        # they are ids the engine produced: the budget and the usage count them
        assert client.metric("toolwire_completion_tokens_total") == tokens + 2 + 3
        # inside a call's arguments too: the parser never sees them
        cut = CALL.index("Paris")
        ids = [*tok.encode(CALL[:cut]), PADDING, *tok.encode(CALL[cut:])]
        engine.say(ids=ids, per_delta=1)
        answer = _reply(api, client, api.body(tools=TOOLS, stream=stream))
        assert [(c.name, json.loads(c.arguments)) for c in answer.calls] == [
            ("get_weather", {"city": "Paris"})
        ]
        # past the model's rows: the upstream is wrong
        for bad in (ROWS, ROWS + 5000):
            engine.say(ids=[*tok.encode("Hi"), bad], per_delta=1)
            answer = _reply(api, client, api.body(stream=stream))
            if stream:
                assert answer.status == 200 and answer.finish == "error"
            else:
                assert answer.status == 502
            assert "outside the model's vocabulary" in json.dumps(answer.error)


def test_without_a_wider_output_layer_every_id_past_the_tokenizer_is_an_error() -> None:
    engine = ScriptedEngine()
    (chat,) = [a for a in APIS if a.name == "chat"]
    with in_process(engine) as client:
        engine.say(ids=[PADDING], per_delta=1)
        assert _reply(chat, client, chat.body()).status == 502


def test_the_models_vocabulary_size_is_read_from_its_config(tmp_path: Path) -> None:
    from toolwire.server.engines import model_vocab_size

    assert model_vocab_size(tmp_path) is None
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": ROWS}))
    assert model_vocab_size(tmp_path) == ROWS
    nested = {"architectures": ["X"], "text_config": {"vocab_size": 262_208}}
    (tmp_path / "config.json").write_text(json.dumps(nested))
    assert model_vocab_size(tmp_path) == 262_208
    (tmp_path / "config.json").write_text("{not json")
    assert model_vocab_size(tmp_path) is None
    assert model_vocab_size(tmp_path / "tokenizer.json") is None
    assert model_vocab_size("Qwen/Qwen3-0.6B") is None  # a hub id: nothing on disk
    assert MODEL


# -- 7. templates as code ---------------------------------------------------------------


@EVERY_API
@STREAM
def test_a_template_that_builds_a_gigabyte_string_is_refused_before_it_is_built(
    api: Api, stream: bool
) -> None:
    engine = ScriptedEngine(template="{{ 'a' * 10**9 }}")
    with in_process(engine) as client:
        tracemalloc.start()
        try:
            answer = _reply(api, client, api.body(stream=stream))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert answer.status == 400, answer.error
    assert answer.field == ("input" if api.name == "responses" else "messages")
    assert "1,000,000,000 characters, more than the 16,777,216" in json.dumps(answer.error)
    assert not engine.generations
    assert peak < 64 * 2**20, f"the request allocated {peak:,} bytes"
