"""The three APIs as the tests speak them, and an engine scripted inside the process.

`APIS` holds one `Api` per served API (Chat Completions, Responses, Messages). Each
builds one turn's request body from the same neutral parts (`Api.body`), reads its
answer, whole or streamed, into the same `Answer` (text, reasoning, calls, a neutral
finish reason, the field an error names), and builds the next turn the way a client of
that API does (`Api.next_turn`: the answer sent back as history with a result for each
call; Responses by `previous_response_id`, or statelessly). A test parametrized over
`EVERY_API` therefore states one behaviour once and checks it on every API.

`ScriptedEngine` is an `Engine` whose answers are queued token ids (Qwen3's real
vocabulary, from the shared data), delivered a few ids per delta; it keeps the last
`Generation`s it was asked for (prompt ids, budget, structural tag) and counts them all.
`InProcess` posts to the ASGI app on an event loop of its own, with no socket: the
fuzz's thousands of requests cost milliseconds each.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.data import tokenizer_for
from toolwire import Tokenizer
from toolwire.backends.base import Delta, Generation
from toolwire.server.app import create_app
from toolwire.server.core.pipeline import Limits
from toolwire.server.engines import infer_format

__all__ = [
    "APIS",
    "EVERY_API",
    "MODEL",
    "Answer",
    "Api",
    "Call",
    "InProcess",
    "ScriptedEngine",
    "in_process",
]

#: The model name the scripted engine serves.
MODEL = "qwen3-test"

# -- the engine ----------------------------------------------------------------------


@dataclass
class Script:
    """One queued answer: ids, delivered `per_delta` at a time, then `finish`."""

    ids: list[int]
    finish: str = "stop"
    per_delta: int = 3


class ScriptedEngine:
    """An in-process engine on Qwen3's vocabulary that answers with queued ids."""

    def __init__(
        self,
        tokenizer: Tokenizer | None = None,
        *,
        vocab_size: int | None = None,
        template: str | None = None,
    ) -> None:
        self.tokenizer = tokenizer or tokenizer_for("qwen3")
        self.vocab_size = vocab_size or self.tokenizer.vocab_size
        self.model = MODEL
        self.format = infer_format(self.tokenizer)
        self.template = template
        self.max_prompt_tokens: int | None = None
        self.context_length: int | None = None
        self.constrains = True
        self.warnings: list[str] = []
        self.scripts: list[Script] = []
        #: The last generations asked for (a bounded record), and how many there were.
        self.generations: deque[Generation] = deque(maxlen=16)
        self.asked = 0
        self.end = self.tokenizer.added_tokens["<|im_end|>"]

    def say(
        self,
        text: str = "",
        *,
        spelled: str = "",
        ids: Sequence[int] = (),
        finish: str = "stop",
        per_delta: int = 3,
    ) -> list[int]:
        """Queue an answer: `text` with genuine delimiter ids, then `spelled` markup from
        ordinary ids, then `ids`; ended by `<|im_end|>` when it finishes with "stop"."""
        out = self.tokenizer.encode(text) if text else []
        if spelled:
            out += self.tokenizer.encode(spelled, delimiters=False)
        out += list(ids)
        if finish == "stop":
            out.append(self.end)
        self.scripts.append(Script(out, finish, per_delta))
        return out

    async def stream(self, generation: Generation) -> AsyncIterator[Delta]:
        self.generations.append(generation)
        self.asked += 1
        script = self.scripts.pop(0) if self.scripts else Script([self.end])
        ids = script.ids[: generation.max_tokens]
        finish = script.finish if len(ids) == len(script.ids) else "length"
        starts = list(range(0, len(ids), script.per_delta)) or [0]
        for n, start in enumerate(starts):
            last = n == len(starts) - 1
            yield Delta(ids[start : start + script.per_delta], finish if last else None)
            await asyncio.sleep(0)

    def compile_structural_tag(self, tag: Mapping[str, Any]) -> Any:
        """Nothing to compile (the scripted answer is not sampled): keeps the grammar
        service from measuring XGrammar compiles the test does not need."""
        return ()

    async def close(self) -> None:
        return None

    def prompt(self) -> list[int]:
        """The prompt ids of the last generation."""
        return list(self.generations[-1].prompt_ids)

    def tag(self) -> Any:
        """The structural tag of the last generation, or None."""
        return self.generations[-1].structural_tag


# -- the client ------------------------------------------------------------------------


@dataclass
class Reply:
    """One HTTP answer: its status and body bytes."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)


class InProcess:
    """Requests to an ASGI app on an event loop of its own (no socket, no thread)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        transport = httpx.ASGITransport(app=app)
        self.client = httpx.AsyncClient(transport=transport, base_url="http://toolwire")

    def post(self, path: str, body: Any) -> Reply:
        if isinstance(body, bytes | str):
            content = body.encode() if isinstance(body, str) else body
        else:
            content = json.dumps(body).encode()
        headers = {"content-type": "application/json"}
        r = self.loop.run_until_complete(self.client.post(path, content=content, headers=headers))
        return Reply(r.status_code, r.content, dict(r.headers))

    def get(self, path: str) -> Reply:
        r = self.loop.run_until_complete(self.client.get(path))
        return Reply(r.status_code, r.content, dict(r.headers))

    def metric(self, name: str) -> float:
        text = self.get("/metrics").body.decode()
        found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        return float(found.group(1)) if found else 0.0

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.app.state.grammars.close()
        self.loop.close()


@contextlib.contextmanager
def in_process(engine: Any, limits: Limits | None = None) -> Iterator[InProcess]:
    """toolwire's app on `engine`, reached in-process."""
    client = InProcess(create_app(engine, limits or Limits(timeout=10)))
    try:
        yield client
    finally:
        client.close()


# -- the answers -----------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    #: The arguments as the API returned them, as JSON text (Messages: `input` dumped).
    arguments: str


@dataclass
class Answer:
    """One turn's answer, read the same way for every API."""

    status: int
    text: str = ""
    reasoning: str = ""
    calls: list[Call] = field(default_factory=list)
    #: "stop", "length", "tool_calls", or "error" (a failure after the stream started).
    finish: str | None = None
    #: Messages: the stop sequence that ended the output.
    stop_sequence: str | None = None
    #: The error object (a status other than 200, or the stream's error event).
    error: Any = None
    #: The field the error names, in the API's spelling (None when it names none).
    field: str | None = None
    #: The API's final object (completion message, response, message), for next turns.
    raw: Any = None


def _events(body: bytes) -> list[tuple[str | None, Any]]:
    """The (event name, JSON payload) of each server-sent event; `[DONE]` as a string."""
    out: list[tuple[str | None, Any]] = []
    for block in body.decode().split("\n\n"):
        name, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            text = "\n".join(data)
            out.append((name, text if text == "[DONE]" else json.loads(text)))
    return out


#: How an OpenAI `param` or an Anthropic message names a field: a path from the body.
_PATH = re.compile(r"^[A-Za-z_][\w-]*(?:(?:\.[\w-]+)|(?:\[\d+\]))*$")


def _openai_field(error: Any) -> str | None:
    param = error.get("param") if isinstance(error, Mapping) else None
    return param if isinstance(param, str) and _PATH.match(param) else None


def _anthropic_field(error: Any) -> str | None:
    message = error.get("message") if isinstance(error, Mapping) else None
    if not isinstance(message, str) or ": " not in message:
        return None
    head = message.split(": ", 1)[0]
    return head if _PATH.match(head) else None


class Api:
    """One API: its route, request shape and answer shape."""

    name: str
    path: str

    # what differs ------------------------------------------------------------------

    def body(
        self,
        ask: str = "What is the weather in Paris?",
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        choice: str | None = None,
        max_tokens: int | None = 64,
        stop: Sequence[str] = (),
        answer_format: Mapping[str, Any] | None = None,
        stream: bool = False,
        **extra: Any,
    ) -> dict[str, Any]:
        """One turn asking `ask`: `tools` in the Chat Completions shape, `choice`
        "auto" / "none" / "required" / a tool's name, `answer_format` a JSON schema."""
        raise NotImplementedError

    def whole(self, payload: Any) -> Answer:
        raise NotImplementedError

    def streamed(self, events: list[tuple[str | None, Any]]) -> Answer:
        raise NotImplementedError

    def error_field(self, error: Any) -> str | None:
        return _openai_field(error)

    def next_turn(
        self, body: Mapping[str, Any], answer: Answer, ask: str = "Go on.", stateless: bool = False
    ) -> dict[str, Any]:
        """The next turn after `answer` to `body`: the answer sent back, a result for
        each call, and `ask`; Responses continues by id unless `stateless`."""
        raise NotImplementedError

    # the same for all --------------------------------------------------------------

    def read(self, reply: Reply) -> Answer:
        """An HTTP answer, whole or streamed, as an `Answer`."""
        if reply.status != 200:
            try:
                error = reply.json()
            except ValueError:
                return Answer(reply.status, error=reply.body)
            inner = error.get("error") if isinstance(error, Mapping) else None
            return Answer(reply.status, error=inner, field=self.error_field(inner))
        if reply.headers.get("content-type", "").startswith("text/event-stream"):
            return self.streamed(_events(reply.body))
        return self.whole(reply.json())

    def ask(self, client: InProcess, body: Mapping[str, Any]) -> Answer:
        return self.read(client.post(self.path, dict(body)))

    def __repr__(self) -> str:
        return self.name


def _choice_chat(choice: str | None) -> Any:
    if choice in (None, "auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


class Chat(Api):
    name = "chat"
    path = "/v1/chat/completions"

    def body(
        self,
        ask: str = "What is the weather in Paris?",
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        choice: str | None = None,
        max_tokens: int | None = 64,
        stop: Sequence[str] = (),
        answer_format: Mapping[str, Any] | None = None,
        stream: bool = False,
        **extra: Any,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": MODEL,
            "messages": [{"role": "user", "content": ask}],
            "stream": stream,
        }
        if tools:
            body["tools"] = [dict(t) for t in tools]
        if choice is not None:
            body["tool_choice"] = _choice_chat(choice)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if stop:
            body["stop"] = list(stop)
        if answer_format is not None:
            spec = {"name": "answer", "schema": dict(answer_format)}
            body["response_format"] = {"type": "json_schema", "json_schema": spec}
        return {**body, **extra}

    def whole(self, payload: Any) -> Answer:
        choice = payload["choices"][0]
        message = choice["message"]
        calls = [
            Call(c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls") or []
        ]
        return Answer(
            200,
            message.get("content") or "",
            message.get("reasoning_content") or "",
            calls,
            choice["finish_reason"],
            raw=message,
        )

    def streamed(self, events: list[tuple[str | None, Any]]) -> Answer:
        text, reasoning, finish, error = [], [], None, None
        entries: dict[int, dict[str, str]] = {}
        for _, data in events:
            if data == "[DONE]":
                continue
            if "error" in data:
                error = data["error"]
            for choice in data.get("choices") or []:
                delta = choice["delta"]
                text.append(delta.get("content") or "")
                reasoning.append(delta.get("reasoning_content") or "")
                for call in delta.get("tool_calls") or []:
                    entry = entries.setdefault(call["index"], {"id": "", "name": "", "args": ""})
                    entry["id"] = call.get("id") or entry["id"]
                    function = call.get("function") or {}
                    entry["name"] += function.get("name") or ""
                    entry["args"] += function.get("arguments") or ""
                finish = choice.get("finish_reason") or finish
        calls = [Call(e["id"], e["name"], e["args"]) for _, e in sorted(entries.items())]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
        if error is not None:
            finish = "error"
        answer = Answer(200, "".join(text), "".join(reasoning), calls, finish, raw=message)
        answer.error, answer.field = error, None if error is None else self.error_field(error)
        return answer

    def next_turn(
        self, body: Mapping[str, Any], answer: Answer, ask: str = "Go on.", stateless: bool = False
    ) -> dict[str, Any]:
        message = dict(answer.raw)
        if answer.reasoning:
            message["reasoning_content"] = answer.reasoning
        results = [
            {"role": "tool", "tool_call_id": c.id, "content": "Sunny, 22C"} for c in answer.calls
        ]
        history = [*body["messages"], message, *results, {"role": "user", "content": ask}]
        return {**body, "messages": history}


def _flat(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", **t["function"]} for t in tools]


class Responses(Api):
    name = "responses"
    path = "/v1/responses"

    def body(
        self,
        ask: str = "What is the weather in Paris?",
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        choice: str | None = None,
        max_tokens: int | None = 64,
        stop: Sequence[str] = (),
        answer_format: Mapping[str, Any] | None = None,
        stream: bool = False,
        **extra: Any,
    ) -> dict[str, Any]:
        if stop:
            raise ValueError("the Responses API has no stop strings")
        body: dict[str, Any] = {"model": MODEL, "input": ask, "stream": stream}
        if tools:
            body["tools"] = _flat(tools)
        if choice in ("auto", "none", "required"):
            body["tool_choice"] = choice
        elif choice is not None:
            body["tool_choice"] = {"type": "function", "name": choice}
        if max_tokens is not None:
            body["max_output_tokens"] = max_tokens
        if answer_format is not None:
            spec = {"type": "json_schema", "name": "answer", "schema": dict(answer_format)}
            body["text"] = {"format": spec}
        return {**body, **extra}

    def whole(self, payload: Any) -> Answer:
        output = payload["output"]
        text = "".join(
            part["text"] for i in output if i["type"] == "message" for part in i["content"]
        )
        reasoning = "".join(
            part["text"] for i in output if i["type"] == "reasoning" for part in i["content"]
        )
        calls = [
            Call(i["call_id"], i["name"], i["arguments"])
            for i in output
            if i["type"] == "function_call"
        ]
        status = payload["status"]
        finish = {"completed": "tool_calls" if calls else "stop", "incomplete": "length"}.get(
            status, "error"
        )
        answer = Answer(200, text, reasoning, calls, finish, raw=payload)
        if payload.get("error"):
            answer.error = payload["error"]
        return answer

    def streamed(self, events: list[tuple[str | None, Any]]) -> Answer:
        final = [
            data["response"]
            for name, data in events
            if name in ("response.completed", "response.incomplete", "response.failed")
        ]
        assert len(final) == 1, [name for name, _ in events]
        return self.whole(final[0])

    def next_turn(
        self, body: Mapping[str, Any], answer: Answer, ask: str = "Go on.", stateless: bool = False
    ) -> dict[str, Any]:
        results = [
            {"type": "function_call_output", "call_id": c.id, "output": "Sunny, 22C"}
            for c in answer.calls
        ]
        turn = [*results, {"role": "user", "content": ask}]
        if not stateless:
            return {**body, "input": turn, "previous_response_id": answer.raw["id"]}
        first = body["input"]
        first = [{"role": "user", "content": first}] if isinstance(first, str) else list(first)
        return {**body, "input": [*first, *answer.raw["output"], *turn], "store": False}


class Messages(Api):
    name = "messages"
    path = "/v1/messages"

    def body(
        self,
        ask: str = "What is the weather in Paris?",
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        choice: str | None = None,
        max_tokens: int | None = 64,
        stop: Sequence[str] = (),
        answer_format: Mapping[str, Any] | None = None,
        stream: bool = False,
        **extra: Any,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": MODEL,
            "messages": [{"role": "user", "content": ask}],
            "max_tokens": 64 if max_tokens is None else max_tokens,
            "stream": stream,
        }
        if tools:
            body["tools"] = [
                {
                    "name": t["function"]["name"],
                    "description": t["function"].get("description", ""),
                    "input_schema": t["function"].get("parameters", {"type": "object"}),
                }
                for t in tools
            ]
        kinds = {"auto": "auto", "none": "none", "required": "any"}
        if choice in kinds:
            body["tool_choice"] = {"type": kinds[choice]}
        elif choice is not None:
            body["tool_choice"] = {"type": "tool", "name": choice}
        if stop:
            body["stop_sequences"] = list(stop)
        if answer_format is not None:
            body["output_config"] = {"format": {"type": "json_schema", "schema": answer_format}}
        return {**body, **extra}

    def error_field(self, error: Any) -> str | None:
        return _anthropic_field(error)

    def whole(self, payload: Any) -> Answer:
        blocks = payload["content"]
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        reasoning = "".join(b["thinking"] for b in blocks if b["type"] == "thinking")
        calls = [
            Call(b["id"], b["name"], json.dumps(b["input"]))
            for b in blocks
            if b["type"] == "tool_use"
        ]
        reason = payload["stop_reason"]
        finish = {"max_tokens": "length", "tool_use": "tool_calls"}.get(reason, "stop")
        return Answer(
            200, text, reasoning, calls, finish, payload.get("stop_sequence"), raw=payload
        )

    def streamed(self, events: list[tuple[str | None, Any]]) -> Answer:
        message: dict[str, Any] = {}
        blocks: list[dict[str, Any]] = []
        partial: dict[int, str] = {}
        error = None
        for name, data in events:
            if name == "message_start":
                message = dict(data["message"])
            elif name == "content_block_start":
                blocks.append(dict(data["content_block"]))
            elif name == "content_block_delta":
                block, delta = blocks[data["index"]], data["delta"]
                if delta["type"] == "text_delta":
                    block["text"] += delta["text"]
                elif delta["type"] == "thinking_delta":
                    block["thinking"] += delta["thinking"]
                else:
                    partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
            elif name == "message_delta":
                message.update(data["delta"])
            elif name == "error":
                error = data["error"]
        for index, text in partial.items():
            try:
                blocks[index]["input"] = json.loads(text)
            except ValueError:
                blocks[index]["input"] = {}
        message["content"] = blocks
        if error is not None:
            answer = Answer(200, error=error, field=self.error_field(error), finish="error")
            return answer
        return self.whole(message)

    def next_turn(
        self, body: Mapping[str, Any], answer: Answer, ask: str = "Go on.", stateless: bool = False
    ) -> dict[str, Any]:
        results: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": c.id, "content": "Sunny, 22C"}
            for c in answer.calls
        ]
        history = [
            *body["messages"],
            {"role": "assistant", "content": answer.raw["content"]},
            {"role": "user", "content": [*results, {"type": "text", "text": ask}]},
        ]
        return {**body, "messages": history}


APIS: list[Api] = [Chat(), Responses(), Messages()]
EVERY_API = pytest.mark.parametrize("api", APIS, ids=[a.name for a in APIS])
