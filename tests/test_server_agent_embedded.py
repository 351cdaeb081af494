"""The Responses and Messages APIs on `toolwire serve` with the embedded engine, for real.

One server (a subprocess started as a user starts it: llama.cpp + SmolLM2-135M-Instruct,
`hermes`, ungated, constrained by XGrammar) serves every test here; the official
`openai` and `anthropic` clients talk to it. Greedy decoding keeps runs reproducible and
small token limits keep the module short.

SmolLM2's vocabulary has no delimiter tokens, so `hermes` is matched as text (ungated,
and the server warns so): a model that copies call markup out of a tool result makes a
call there, on every API alike (the documented limit of text-gated formats). The
echo attack is therefore shown on the gated Qwen3 vocabulary, over the scripted vLLM and
SGLang upstreams (test_server_agent_remote.py), not here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import anthropic
import jsonschema
import openai
import pytest

from tests.serving import (
    GET_TIME,
    GET_WEATHER,
    messages_tools,
    responses_tools,
    schemas,
    toolwire_serve,
)

MODEL = "SmolLM2-135M-Instruct"
SCHEMAS = schemas([GET_WEATHER, GET_TIME])
RESPONSES_TOOLS = responses_tools([GET_WEATHER, GET_TIME])
MESSAGES_TOOLS = messages_tools([GET_WEATHER, GET_TIME])
ASK = "What is the weather in Paris?"


class Served:
    def __init__(self, url: str) -> None:
        self.url = url
        self.openai = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        self.anthropic = anthropic.Anthropic(base_url=url, api_key="none", max_retries=0)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with toolwire_serve(log, "--max-tokens", "40") as url:
        yield Served(url)


def _valid(name: str, arguments: Any) -> None:
    assert name in SCHEMAS
    jsonschema.validate(
        json.loads(arguments) if isinstance(arguments, str) else arguments, SCHEMAS[name]
    )


# ---- Responses ----------------------------------------------------------------------------


def _response(served: Served, mode: str, **request: Any) -> Any:
    request = {"model": MODEL, "temperature": 0, "input": ASK, **request}
    if mode == "whole":
        return served.openai.responses.create(**request)
    if mode == "events":
        final = None
        deltas: dict[str, str] = {}
        for event in served.openai.responses.create(stream=True, **request):
            if event.type == "response.function_call_arguments.delta":
                deltas[event.item_id] = deltas.get(event.item_id, "") + event.delta
            if event.type in ("response.completed", "response.incomplete"):
                final = event.response
        assert final is not None
        for item in final.output:
            if item.type == "function_call":
                assert deltas[item.id] == item.arguments
        return final
    with served.openai.responses.stream(**request) as stream:
        return stream.get_final_response()


MODES = pytest.mark.parametrize("mode", ["whole", "events", "helper"])


@MODES
def test_responses_required_returns_a_valid_call(served: Served, mode: str) -> None:
    r = _response(
        served, mode, tools=RESPONSES_TOOLS, tool_choice="required", parallel_tool_calls=False
    )
    calls = [i for i in r.output if i.type == "function_call"]
    assert r.status == "completed" and len(calls) == 1, r.output
    _valid(calls[0].name, calls[0].arguments)
    assert calls[0].call_id.startswith("call_")


def test_responses_two_turns(served: Served) -> None:
    named = {"type": "function", "name": "get_weather"}
    first = _response(
        served, "whole", tools=RESPONSES_TOOLS, tool_choice=named, parallel_tool_calls=False
    )
    call = next(i for i in first.output if i.type == "function_call")
    assert call.name == "get_weather"
    _valid(call.name, call.arguments)
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 22C."}
    second = _response(
        served, "helper", input=[result], previous_response_id=first.id, tools=RESPONSES_TOOLS
    )
    assert second.status in ("completed", "incomplete")
    for item in second.output:
        if item.type == "function_call":
            _valid(item.name, item.arguments)


def test_responses_none_yields_text(served: Served) -> None:
    r = _response(served, "whole", tools=RESPONSES_TOOLS, tool_choice="none", max_output_tokens=16)
    assert [i.type for i in r.output] == ["message"] and r.output_text
    assert "<tool_call>" not in r.output_text


# ---- Messages -----------------------------------------------------------------------------


def _message(served: Served, mode: str, **request: Any) -> Any:
    request = {
        "model": MODEL,
        "extra_body": {"temperature": 0},  # current SDKs have no sampling parameters
        "max_tokens": 40,
        "messages": [{"role": "user", "content": ASK}],
        **request,
    }
    if mode == "whole":
        return served.anthropic.messages.create(**request)
    if mode == "events":
        with served.anthropic.messages.create(stream=True, **request) as stream:
            blocks: dict[int, Any] = {}
            partial: dict[int, str] = {}
            reason = None
            for event in stream:
                if event.type == "content_block_start":
                    blocks[event.index] = event.content_block
                    partial[event.index] = ""
                elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                    partial[event.index] += event.delta.partial_json
                elif event.type == "message_delta":
                    reason = event.delta.stop_reason
            for index, block in blocks.items():
                if block.type == "tool_use":
                    block.input = json.loads(partial[index])
            content = [blocks[i] for i in sorted(blocks)]
            return SimpleNamespace(content=content, stop_reason=reason)
    with served.anthropic.messages.stream(**request) as stream:
        return stream.get_final_message()


@MODES
def test_messages_any_returns_a_valid_call(served: Served, mode: str) -> None:
    m = _message(
        served,
        mode,
        tools=MESSAGES_TOOLS,
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
    )
    uses = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use" and len(uses) == 1, m.content
    _valid(uses[0].name, uses[0].input)


def test_messages_two_turns(served: Served) -> None:
    first = _message(
        served,
        "whole",
        tools=MESSAGES_TOOLS,
        tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
    )
    use = next(b for b in first.content if b.type == "tool_use")
    assert use.name == "get_weather"

    def turn(result: str, mode: str) -> Any:
        messages = [
            {"role": "user", "content": ASK},
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": result}],
            },
        ]
        return _message(served, mode, messages=messages, tools=MESSAGES_TOOLS)

    second = turn("Sunny, 22C.", "helper")
    assert second.stop_reason in ("end_turn", "tool_use", "max_tokens")
    for block in second.content:
        if block.type == "tool_use":
            _valid(block.name, block.input)


def test_messages_none_yields_text(served: Served) -> None:
    m = _message(served, "whole", tools=MESSAGES_TOOLS, tool_choice={"type": "none"}, max_tokens=16)
    assert [b.type for b in m.content] == ["text"] and m.content[0].text
    assert "<tool_call>" not in m.content[0].text


def test_bad_input_in_each_api_shape(served: Served) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        served.anthropic.messages.create(model=MODEL, max_tokens=0, messages=[])
    assert caught.value.body["error"]["message"].startswith("max_tokens:")  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as failed:
        served.openai.responses.create(model=MODEL, input="x", tools=[{"type": "no_such_tool"}])
    assert failed.value.body["param"] == "tools[0].type"  # type: ignore[index]
