"""The agent SDKs on every API they speak, against toolwire on a scripted vLLM upstream.

One matrix: client x API x mode. The clients are the official `openai` (Chat
Completions, Responses) and `anthropic` (Messages) SDKs, `openai-agents` (its Responses
and Chat Completions models), `langchain-openai` (both APIs), `langchain-anthropic` and
`litellm` (all three), each as its documentation shows, with only the base URL set. The
modes:

* `whole`, `stream`: the first turn, non-streamed and streamed: one call to
  `get_weather` with `{"city": "Paris"}`, as the upstream's genuine call has it;
* `forced`: the first turn with the client's forced tool choice (`required`, `any`),
  streamed: the call, and a structural tag sent upstream that forces it;
* `second`: the whole loop: the call, the client's tool result sent back as the client
  builds it (`model_dump()` of the SDK's own objects), and the final answer.

The upstream (`tests/agents.py`'s `LoopResponder`) answers by what the prompt holds, so
a second turn that lost the call or its result would not get the final answer.
The agents SDK runs its own loop in every mode (it calls the tool itself).

Run by `make test-agents` (which installs the SDKs: the `agents` extra); without an SDK
its cases skip, saying which.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.agents import FINAL, LoopResponder
from tests.serving import MODEL, ScriptedUpstream, scripted
from toolwire.server.core.pipeline import Limits

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import

pytestmark = pytest.mark.skipif(
    not os.environ.get("TOOLWIRE_AGENTS"),
    reason="the agent SDK matrix runs under `make test-agents` (TOOLWIRE_AGENTS=1)",
)

CALL = {"city": "Paris"}
QUESTION = "What is the weather in Paris?"
RESULT = "Sunny, 21 C"
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "the city"}},
    "required": ["city"],
}
CHAT_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather in a city", "parameters": SCHEMA},
}
FLAT_TOOL = {**CHAT_TOOL["function"], "type": "function"}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Weather in a city", "input_schema": SCHEMA}
MODES = ("whole", "stream", "forced", "second")


def get_weather(city: str) -> str:
    """Weather in a city."""
    return RESULT


class Rig:
    """toolwire (in-process) on a scripted upstream that plays the weather loop."""

    def __init__(self, upstream: ScriptedUpstream, url: str) -> None:
        self.upstream = upstream
        self.url = url
        self.responder = LoopResponder({"get_weather": CALL})
        upstream.responder = self.responder

    def forced(self) -> bool:
        """Whether the last request sent upstream carried a tag forcing a call."""
        body = self.upstream.bodies[-1]
        tag = (body.get("structured_outputs") or {}).get("structural_tag")
        return tag is not None and "get_weather" in tag


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    with scripted("vllm", Limits()) as (upstream, _, urls):
        yield Rig(upstream, urls[0])


def _call(calls: list[tuple[str, Any]]) -> None:
    parsed = [(name, json.loads(a) if isinstance(a, str) else a) for name, a in calls]
    assert parsed == [("get_weather", CALL)], calls


def _sdk(name: str) -> Any:
    return pytest.importorskip(name, reason=f"{name} is not installed (the agents extra)")


# -- openai: Chat Completions and Responses ------------------------------------------


def openai_chat(rig: Rig, mode: str) -> None:
    openai = _sdk("openai")
    client = openai.OpenAI(base_url=rig.url + "/v1", api_key="x", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    forced = {"tool_choice": "required"} if mode == "forced" else {}
    if mode in ("stream", "forced"):
        stream = client.chat.completions.create(
            model=MODEL, messages=messages, tools=[CHAT_TOOL], stream=True, **forced
        )
        calls: dict[int, list[str]] = {}
        finish = None
        for chunk in stream:
            for choice in chunk.choices:
                for call in choice.delta.tool_calls or []:
                    entry = calls.setdefault(call.index, ["", ""])
                    entry[0] += (call.function and call.function.name) or ""
                    entry[1] += (call.function and call.function.arguments) or ""
                finish = choice.finish_reason or finish
        _call([(n, a) for n, a in calls.values()])
        assert finish == "tool_calls"
        return
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=[CHAT_TOOL])
    message = first.choices[0].message
    _call([(c.function.name, c.function.arguments) for c in message.tool_calls or []])
    if mode == "second":
        # the assistant turn as the SDK dumps it: no `content` key when it is null
        messages.append(message.model_dump(exclude_none=True))
        call_id = message.tool_calls[0].id
        messages.append({"role": "tool", "tool_call_id": call_id, "content": RESULT})
        final = client.chat.completions.create(model=MODEL, messages=messages, tools=[CHAT_TOOL])
        assert final.choices[0].message.content == FINAL
        assert final.choices[0].finish_reason == "stop"


def openai_responses(rig: Rig, mode: str) -> None:
    openai = _sdk("openai")
    client = openai.OpenAI(base_url=rig.url + "/v1", api_key="x", max_retries=0)
    forced = {"tool_choice": "required"} if mode == "forced" else {}
    if mode in ("stream", "forced"):
        with client.responses.stream(
            model=MODEL, input=QUESTION, tools=[FLAT_TOOL], **forced
        ) as stream:
            response = stream.get_final_response()
    else:
        response = client.responses.create(model=MODEL, input=QUESTION, tools=[FLAT_TOOL])
    assert response.status == "completed"
    calls = [item for item in response.output if item.type == "function_call"]
    _call([(c.name, c.arguments) for c in calls])
    if mode == "second":
        items: list[Any] = [{"role": "user", "content": QUESTION}]
        items += [item.model_dump(exclude_none=True) for item in response.output]
        output = {"type": "function_call_output", "call_id": calls[0].call_id, "output": RESULT}
        items.append(output)
        final = client.responses.create(model=MODEL, input=items, tools=[FLAT_TOOL], store=False)
        assert final.output_text == FINAL


# -- anthropic: Messages ---------------------------------------------------------------


def anthropic_messages(rig: Rig, mode: str) -> None:
    anthropic = _sdk("anthropic")
    client = anthropic.Anthropic(base_url=rig.url, api_key="x", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    forced = {"tool_choice": {"type": "any"}} if mode == "forced" else {}
    request = {"model": MODEL, "max_tokens": 256, "tools": [ANTHROPIC_TOOL], **forced}
    if mode in ("stream", "forced"):
        with client.messages.stream(messages=messages, **request) as stream:
            message = stream.get_final_message()
    else:
        message = client.messages.create(messages=messages, **request)
    uses = [block for block in message.content if block.type == "tool_use"]
    _call([(u.name, u.input) for u in uses])
    assert message.stop_reason == "tool_use"
    if mode == "second":
        content = [block.model_dump(exclude_none=True) for block in message.content]
        messages.append({"role": "assistant", "content": content})
        result = {"type": "tool_result", "tool_use_id": uses[0].id, "content": RESULT}
        messages.append({"role": "user", "content": [result]})
        final = client.messages.create(messages=messages, **request)
        assert "".join(b.text for b in final.content if b.type == "text") == FINAL
        assert final.stop_reason == "end_turn"


# -- openai-agents: its Responses and Chat Completions models ---------------------------


def _agents(rig: Rig, mode: str, chat: bool) -> None:
    agents = _sdk("agents")
    openai = _sdk("openai")
    agents.set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=rig.url + "/v1", api_key="x", max_retries=0)
    if chat:
        model = agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    else:
        model = agents.OpenAIResponsesModel(model=MODEL, openai_client=client)
    settings = agents.ModelSettings(tool_choice="required" if mode == "forced" else None)
    agent = agents.Agent(
        name="weather",
        instructions="Answer with the tool's help.",
        model=model,
        model_settings=settings,
        tools=[agents.function_tool(get_weather)],
    )
    before = len(rig.responder.log)

    async def run() -> str:
        if mode in ("stream", "forced"):
            streamed = agents.Runner.run_streamed(agent, QUESTION)
            async for _ in streamed.stream_events():
                pass
            return str(streamed.final_output)
        return str((await agents.Runner.run(agent, QUESTION)).final_output)

    assert asyncio.run(run()) == FINAL
    assert rig.responder.log[before:] == ["call get_weather", "final"]


def agents_responses(rig: Rig, mode: str) -> None:
    _agents(rig, mode, chat=False)


def agents_chat(rig: Rig, mode: str) -> None:
    _agents(rig, mode, chat=True)


# -- langchain: ChatOpenAI (both APIs), ChatAnthropic ------------------------------------


def _langchain(model: Any, mode: str) -> None:
    messages_mod = _sdk("langchain_core.messages")
    forced = {"tool_choice": "any"} if mode == "forced" else {}
    bound = model.bind_tools([get_weather], **forced)
    question = messages_mod.HumanMessage(QUESTION)
    if mode in ("stream", "forced"):
        chunks = list(bound.stream([question]))
        reply = chunks[0]
        for chunk in chunks[1:]:
            reply = reply + chunk
    else:
        reply = bound.invoke([question])
    _call([(c["name"], c["args"]) for c in reply.tool_calls])
    if mode == "second":
        result = messages_mod.ToolMessage(RESULT, tool_call_id=reply.tool_calls[0]["id"])
        final = bound.invoke([question, reply, result])
        text = final.text if isinstance(final.text, str) else final.text()
        assert text == FINAL, final


def langchain_openai_chat(rig: Rig, mode: str) -> None:
    lc = _sdk("langchain_openai")
    _langchain(lc.ChatOpenAI(model=MODEL, base_url=rig.url + "/v1", api_key="x"), mode)


def langchain_openai_responses(rig: Rig, mode: str) -> None:
    lc = _sdk("langchain_openai")
    model = lc.ChatOpenAI(
        model=MODEL, base_url=rig.url + "/v1", api_key="x", use_responses_api=True
    )
    _langchain(model, mode)


def langchain_anthropic(rig: Rig, mode: str) -> None:
    lc = _sdk("langchain_anthropic")
    _langchain(lc.ChatAnthropic(model=MODEL, base_url=rig.url, api_key="x", max_tokens=256), mode)


# -- litellm: all three APIs --------------------------------------------------------------


def _litellm_completion(rig: Rig, mode: str, provider: str, base: str) -> None:
    litellm = _sdk("litellm")
    request: dict[str, Any] = {
        "model": f"{provider}/{MODEL}",
        "api_base": base,
        "api_key": "x",
        "tools": [CHAT_TOOL],
        "max_tokens": 256,
    }
    if mode == "forced":
        request["tool_choice"] = "required"
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    if mode in ("stream", "forced"):
        chunks = list(litellm.completion(messages=messages, stream=True, **request))
        message = litellm.stream_chunk_builder(chunks, messages=messages).choices[0].message
    else:
        message = litellm.completion(messages=messages, **request).choices[0].message
    calls = message.tool_calls or []
    _call([(c.function.name, c.function.arguments) for c in calls])
    if mode == "second":
        messages.append(message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": RESULT})
        final = litellm.completion(messages=messages, **request).choices[0].message
        assert final.content == FINAL


def litellm_chat(rig: Rig, mode: str) -> None:
    _litellm_completion(rig, mode, "openai", rig.url + "/v1")


def litellm_messages(rig: Rig, mode: str) -> None:
    _litellm_completion(rig, mode, "anthropic", rig.url)


def litellm_responses(rig: Rig, mode: str) -> None:
    litellm = _sdk("litellm")
    request: dict[str, Any] = {
        "model": f"openai/{MODEL}",
        "api_base": rig.url + "/v1",
        "api_key": "x",
        "tools": [FLAT_TOOL],
    }
    if mode == "forced":
        request["tool_choice"] = "required"
    if mode in ("stream", "forced"):
        final_event = None
        for event in litellm.responses(input=QUESTION, stream=True, **request):
            if getattr(event, "type", "") == "response.completed":
                final_event = event
        assert final_event is not None, "no response.completed event"
        response = final_event.response
    else:
        response = litellm.responses(input=QUESTION, **request)
    calls = [item for item in response.output if getattr(item, "type", "") == "function_call"]
    _call([(c.name, c.arguments) for c in calls])
    if mode == "second":
        items: list[Any] = [{"role": "user", "content": QUESTION}]
        items += [
            {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": a}
            for c in calls
            for a in [c.arguments]
        ]
        output = {"type": "function_call_output", "call_id": calls[0].call_id, "output": RESULT}
        items.append(output)
        final = litellm.responses(input=items, store=False, **request)
        texts = [
            part.text
            for item in final.output
            if getattr(item, "type", "") == "message"
            for part in item.content
        ]
        assert "".join(texts) == FINAL


CLIENTS: dict[str, Callable[[Rig, str], None]] = {
    "openai-chat": openai_chat,
    "openai-responses": openai_responses,
    "anthropic-messages": anthropic_messages,
    "openai_agents-responses": agents_responses,
    "openai_agents-chat": agents_chat,
    "langchain_openai-chat": langchain_openai_chat,
    "langchain_openai-responses": langchain_openai_responses,
    "langchain_anthropic-messages": langchain_anthropic,
    "litellm-chat": litellm_chat,
    "litellm-responses": litellm_responses,
    "litellm-messages": litellm_messages,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_sdk_matrix(rig: Rig, client: str, mode: str) -> None:
    before = len(rig.upstream.bodies)
    CLIENTS[client](rig, mode)
    tags = [_tag(body) for body in rig.upstream.bodies[before:]]
    if mode == "forced":  # the first request carried the grammar that forces the call
        assert tags[0] is not None and "get_weather" in json.dumps(tags[0]), tags[0]


def _tag(body: dict[str, Any]) -> Any:
    tag = (body.get("structured_outputs") or {}).get("structural_tag")
    return None if tag is None else json.loads(tag)


# -- forced calls on the embedded engine (SmolLM2): what the clients need ----------------------


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.serving import toolwire_serve

    log = tmp_path_factory.mktemp("embedded") / "serve.log"
    with toolwire_serve(log, "--max-tokens", "96") as url:
        yield url


SMOLLM = "SmolLM2-135M-Instruct"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_forced_call_ends_on_the_embedded_engine(embedded: str, api: str, stream: bool) -> None:
    """`required`/`any` with parallel calls off: exactly one call, and the finish of a
    completed call (`tool_calls`, `completed`, `tool_use`), streamed or not."""
    openai = _sdk("openai")
    anthropic = _sdk("anthropic")
    if api == "chat":
        client = openai.OpenAI(base_url=embedded + "/v1", api_key="x", max_retries=0)
        request: dict[str, Any] = {
            "model": SMOLLM,
            "messages": [{"role": "user", "content": QUESTION}],
            "temperature": 0,  # greedy: the call is the model's likeliest, not a sample
            "tools": [CHAT_TOOL],
            "tool_choice": "required",
            "parallel_tool_calls": False,
        }
        if stream:
            calls: dict[int, str] = {}
            finish = None
            for chunk in client.chat.completions.create(stream=True, **request):
                for choice in chunk.choices:
                    for call in choice.delta.tool_calls or []:
                        # the name comes with the call's first chunk; argument chunks
                        # after it carry none
                        name = (call.function and call.function.name) or ""
                        calls[call.index] = calls.get(call.index) or name
                    finish = choice.finish_reason or finish
            names = list(calls.values())
        else:
            answer = client.chat.completions.create(**request).choices[0]
            names = [c.function.name for c in answer.message.tool_calls or []]
            finish = answer.finish_reason
        assert (names, finish) == (["get_weather"], "tool_calls")
    elif api == "responses":
        client = openai.OpenAI(base_url=embedded + "/v1", api_key="x", max_retries=0)
        request = {
            "model": SMOLLM,
            "input": QUESTION,
            "temperature": 0,
            "tools": [FLAT_TOOL],
            "tool_choice": "required",
            "parallel_tool_calls": False,
        }
        if stream:
            with client.responses.stream(**request) as events:
                response = events.get_final_response()
        else:
            response = client.responses.create(**request)
        names = [o.name for o in response.output if o.type == "function_call"]
        assert (names, response.status) == (["get_weather"], "completed")
        assert [o.type for o in response.output if o.type == "message"] == []
    else:
        client = anthropic.Anthropic(base_url=embedded, api_key="x", max_retries=0)
        request = {
            "model": SMOLLM,
            # (this SDK takes no temperature: sampled, the call may run longer)
            "max_tokens": 256,
            "messages": [{"role": "user", "content": QUESTION}],
            "tools": [ANTHROPIC_TOOL],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        }
        if stream:
            with client.messages.stream(**request) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(**request)
        blocks = [(b.type, getattr(b, "name", None)) for b in message.content]
        assert (blocks, message.stop_reason) == ([("tool_use", "get_weather")], "tool_use")
