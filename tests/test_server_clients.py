"""What agent clients send, understood the same way on every API (scripted upstreams).

Over real HTTP with the official clients where they can say it, and raw bodies where
the fields are newer than they are:

* every API's field table (`SURFACE`) is the truth: each refused field is a 400 naming
  it, in the API's own error shape; a field no table names is answered, and named in
  `toolwire-fields-ignored`; docs/server.md's table is the one the tables make (`make docs`);
* the first requests Codex CLI 0.171.0 and Claude Code 2.1.332 send (captured,
  long texts trimmed: `tests/clients/`) are answered 200, whole and streamed;
* hosted tools (every API's own kind) are not offered: the prompt does not name them,
  the `toolwire-hosted-tools-dropped` header and the metric do; with
  `hosted_tools="refuse"` they are a 400 naming the tool;
* namespace tools are offered as their functions; a call comes back under the
  member's name with its `namespace`, and goes back into the prompt the same way;
* mid-conversation system messages keep their place; `clear_at`, per-message
  effort, `thinking.display`, `context_management`, `tool_reference`;
* the prompt bound is the model's context, and errors name the API's own field
  (`messages`, `input`); `max_tokens` past the context is cut to what is left;
* model names: aliases and patterns (`--served-model-name`), and the 404;
* Chat Completions' `logprobs`/`top_logprobs` (per returned token, from the ids the
  parser saw, streamed joined equal to whole) and `n` > 1; the engine that cannot
  return logprobs says so with a 400.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.serving import (
    CALL,
    GET_WEATHER,
    MODEL,
    STREAM,
    ScriptedRig,
    fake_logprob,
    messages_tools,
    responses_tools,
    running,
    scripted,
    scripted_engine,
)
from toolwire.backends.context import model_length, upstream_context
from toolwire.server.app import create_app
from toolwire.server.chat.request import SURFACE as CHAT
from toolwire.server.core.pipeline import Limits
from toolwire.server.core.surface import markdown
from toolwire.server.core.turn import HOSTED_HEADER, IGNORED_HEADER
from toolwire.server.messages.request import SURFACE as MESSAGES
from toolwire.server.responses.request import SURFACE as RESPONSES

CLIENTS = Path(__file__).parent / "clients"
ROOT = Path(__file__).resolve().parent.parent
SURFACES = {"/v1/chat/completions": CHAT, "/v1/responses": RESPONSES, "/v1/messages": MESSAGES}
USER = "What is the weather in Paris?"


class Rig(ScriptedRig):
    def __init__(self, upstream: Any, upstream_url: str, url: str, refusing: str) -> None:
        super().__init__(upstream, upstream_url, url)
        self.refusing = refusing  # the same server with hosted_tools="refuse"
        self.oa = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        self.an = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)

    def post(self, route: str, body: dict[str, Any], url: str | None = None) -> httpx.Response:
        return httpx.post((url or self.url) + route, json=body, timeout=30)

    def text(self) -> str:
        """The last prompt sent upstream, decoded."""
        return self.tok.decode(self.prompt())


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    limits = Limits()
    refusing = Limits(hosted_tools="refuse", model_aliases=("claude-*", "gpt-oss"))
    with scripted("vllm", limits, refusing) as (upstream, upstream_url, urls):
        yield Rig(upstream, upstream_url, urls[0], urls[1])


def _body(route: str, **extra: Any) -> dict[str, Any]:
    """The smallest valid request of each API, plus `extra`."""
    if route == "/v1/chat/completions":
        return {"model": MODEL, "messages": [{"role": "user", "content": USER}], **extra}
    if route == "/v1/responses":
        return {"model": MODEL, "input": USER, **extra}
    return {
        "model": MODEL,
        "max_tokens": 32,
        "messages": [{"role": "user", "content": USER}],
        **extra,
    }


def _param(route: str, response: httpx.Response) -> str:
    error = response.json()["error"]
    if route == "/v1/messages":
        return str(error["message"]).split(":", 1)[0]
    return str(error["param"])


# -- the field tables ------------------------------------------------------------------


def _refused() -> list[tuple[str, str]]:
    return [
        (route, name)
        for route, surface in SURFACES.items()
        for name, field in surface.items()
        if field.status == "refuses"
    ]


@pytest.mark.parametrize(("route", "name"), _refused(), ids=lambda x: x)
def test_every_refused_field_is_a_400_naming_it(rig: Rig, route: str, name: str) -> None:
    response = rig.post(route, _body(route, **{name: {"asks": "for it"}}))
    assert response.status_code == 400, response.text
    assert _param(route, response) == name
    assert "is not supported" in response.text


@pytest.mark.parametrize("route", list(SURFACES))
def test_a_refused_field_may_still_ask_for_nothing(rig: Rig, route: str) -> None:
    harmless = {
        name: field.allowed[0]
        for name, field in SURFACES[route].items()
        if field.status == "refuses" and field.allowed
    }
    assert harmless, "each API has a refused field with a harmless value"
    rig.script("Sunny.")
    assert rig.post(route, _body(route, **harmless)).status_code == 200


@pytest.mark.parametrize("route", list(SURFACES))
def test_an_unknown_field_is_named_in_a_header(rig: Rig, route: str) -> None:
    rig.script("Sunny.")
    response = rig.post(route, _body(route, brand_new_field=1, metadata={"k": "v"}))
    assert response.status_code == 200, response.text
    assert response.headers[IGNORED_HEADER] == "brand_new_field"
    rig.script("Sunny.")
    assert IGNORED_HEADER not in rig.post(route, _body(route)).headers
    metrics = httpx.get(rig.url + "/metrics").text
    assert f'toolwire_unknown_fields_total{{route="{route}"}}' in metrics


def test_the_docs_table_is_the_one_the_tables_make() -> None:
    table = markdown([("Chat Completions", CHAT), ("Responses", RESPONSES), ("Messages", MESSAGES)])
    page = (ROOT / "docs" / "server.md").read_text()
    assert table in page, "docs/server.md's field table differs from the API tables:\n" + table


# -- the clients' own first requests ---------------------------------------------------


def _captured(name: str) -> dict[str, Any]:
    return dict(json.loads((CLIENTS / name).read_text()))


@STREAM
@pytest.mark.parametrize(
    "name", ["codex-0.171.0-first.json", "claude-code-2.1.332-first.json"], ids=lambda n: n[:6]
)
def test_the_clients_first_requests_are_served(rig: Rig, name: str, stream: bool) -> None:
    captured = _captured(name)
    body = {**captured["body"], "model": MODEL, "stream": stream}
    headers = captured["headers"]
    rig.script("<think>\nfine\n</think>\n\nHello.")
    route = captured["path"]
    response = httpx.post(rig.url + route, json=body, headers=headers, timeout=60)
    assert response.status_code == 200, response.text
    assert IGNORED_HEADER not in response.headers  # every field they send is in a table
    assert "Hello." in response.text
    prompt = rig.text()
    if name.startswith("codex"):
        assert response.headers[HOSTED_HEADER] == "web_search"
        for member in ("spawn_agent", "wait_agent", "close_agent"):  # its namespace
            assert f'"name": "{member}"' in prompt
        assert "web_search" not in prompt.split("</tools>")[0].split("<tools>")[-1]
    else:  # the system message inside `messages` keeps its place: after the user's
        assert prompt.index("list the files here") < prompt.index("# Environment")
        assert HOSTED_HEADER not in response.headers


# -- hosted tools -------------------------------------------------------------------------

HOSTED = {
    "/v1/chat/completions": ({"web_search_options": {}}, "web_search_options", "web_search"),
    "/v1/responses": (
        {"tools": [*responses_tools([GET_WEATHER]), {"type": "file_search"}]},
        "tools[1]",
        "file_search",
    ),
    "/v1/messages": (
        {
            "tools": [
                *messages_tools([GET_WEATHER]),
                {"type": "web_search_20250305", "name": "web_search"},
            ]
        },
        "tools.1",
        "web_search_20250305",
    ),
}


@pytest.mark.parametrize("route", list(HOSTED))
def test_hosted_tools_are_not_offered_and_said(rig: Rig, route: str) -> None:
    extra, path, kind = HOSTED[route]
    rig.script("Sunny.")
    response = rig.post(route, _body(route, **extra))
    assert response.status_code == 200, response.text
    assert response.headers[HOSTED_HEADER] == kind
    assert kind not in rig.text()
    metrics = httpx.get(rig.url + "/metrics").text
    assert f'toolwire_hosted_tools_dropped_total{{type="{kind}"}}' in metrics
    refused = rig.post(route, _body(route, **extra), url=rig.refusing)
    assert refused.status_code == 400
    assert _param(route, refused) == path
    assert "hosted tool" in refused.text and kind in refused.text


# -- namespaces (Responses) -----------------------------------------------------------------

NAMESPACE = {
    "type": "namespace",
    "name": "crm",
    "description": "Customer records.",
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": GET_WEATHER["function"]["parameters"],
        },
        {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}},
    ],
}


@STREAM
def test_a_namespace_member_is_called_under_the_clients_names(rig: Rig, stream: bool) -> None:
    tools = [*responses_tools([GET_WEATHER]), NAMESPACE]  # get_weather twice: crm's is qualified
    call = '<tool_call>\n{"name": "crm__get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    rig.script(call)
    if stream:
        with rig.oa.responses.stream(model=MODEL, input=USER, tools=tools) as events:
            response = events.get_final_response()
    else:
        response = rig.oa.responses.create(model=MODEL, input=USER, tools=tools)
    prompt = rig.text()
    assert '"name": "lookup"' in prompt and '"name": "crm__get_weather"' in prompt
    assert "Customer records." in prompt
    (item,) = [o for o in response.output if o.type == "function_call"]
    assert (item.name, item.namespace, json.loads(item.arguments)) == (
        "get_weather",
        "crm",
        {"city": "Paris"},
    )
    rig.script("Sunny.")
    items = [
        {"role": "user", "content": USER},
        item.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": item.call_id, "output": "sunny"},
    ]
    rig.oa.responses.create(model=MODEL, input=items, tools=tools, store=False)
    assert '{"name": "crm__get_weather"' in rig.text().split("<|im_start|>assistant")[-2]


# -- Messages: system messages, per-turn effort, thinking, deferred tools --------------------


def test_messages_mid_conversation_system_and_per_turn_controls(rig: Rig) -> None:
    rig.script("Sunny.")
    body = _body(
        "/v1/messages",
        system="First rules.",
        messages=[
            {"role": "user", "content": "one"},
            {
                "role": "system",
                "content": "Hidden once the user speaks.",
                "clear_at": "next_user_message",
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "old thought"},
                    {"type": "text", "text": "ok"},
                ],
            },
            {"role": "user", "content": "two"},
            {
                "role": "system",
                "content": [
                    {"type": "text", "text": "Late rules.", "cache_control": {"type": "ephemeral"}}
                ],
                "output_config": {"effort": "high"},
            },
        ],
        thinking={"type": "adaptive", "display": "omitted"},
        context_management={
            "edits": [
                {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 0}}
            ]
        },
    )
    response = rig.post("/v1/messages", body)
    assert response.status_code == 200, response.text
    prompt = rig.text()
    assert (
        prompt.index("First rules.")
        < prompt.index("one")
        < prompt.index("two")
        < prompt.index("Late rules.")
    )
    assert "Hidden once" not in prompt and "old thought" not in prompt
    refused = {"edits": [{"type": "clear_tool_uses_20250919"}]}
    bad = rig.post("/v1/messages", {**body, "context_management": refused})
    assert bad.status_code == 400 and "context_management.edits.0.type" in bad.text


@STREAM
def test_messages_thinking_omitted_keeps_the_block_without_its_text(rig: Rig, stream: bool) -> None:
    rig.script("<think>\nsecret steps\n</think>\n\nSunny.")
    request = {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": USER}],
        "thinking": {"type": "adaptive", "display": "omitted"},
    }
    if stream:
        with rig.an.messages.stream(**request) as events:
            message = events.get_final_message()
    else:
        message = rig.an.messages.create(**request)
    kinds = [
        (b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in message.content
    ]
    assert kinds == [("thinking", None), ("text", "Sunny.")] or kinds == [
        ("thinking", ""),
        ("text", "Sunny."),
    ]


def test_messages_a_tool_reference_loads_a_deferred_tool(rig: Rig) -> None:
    deferred = {**messages_tools([GET_WEATHER])[0], "defer_loading": True}
    search = {"name": "ToolSearch", "input_schema": {"type": "object", "properties": {}}}
    rig.script("Sunny.")
    first = _body("/v1/messages", tools=[search, deferred])
    assert rig.post("/v1/messages", first).status_code == 200
    assert "get_weather" not in rig.text()
    messages = [
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "tool_reference", "tool_name": "get_weather"}],
                }
            ],
        },
    ]
    rig.script(CALL)
    message = rig.an.messages.create(
        model=MODEL, max_tokens=64, messages=messages, tools=[search, deferred]
    )
    assert '"name": "get_weather"' in rig.text()
    assert [b.name for b in message.content if b.type == "tool_use"] == ["get_weather"]
    unknown = [
        *messages[:2],
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "tool_reference", "tool_name": "nope"}],
                }
            ],
        },
    ]
    response = rig.post("/v1/messages", _body("/v1/messages", messages=unknown, tools=[search]))
    assert response.status_code == 400 and "nope" in response.text


# -- Chat: an assistant turn without content ---------------------------------------------------


def test_chat_second_turn_without_content_key(rig: Rig) -> None:
    rig.script(CALL)
    first = rig.oa.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": USER}], tools=[GET_WEATHER]
    )
    message = first.choices[0].message.model_dump(exclude_none=True)
    assert "content" not in message
    rig.script("Sunny.")
    second = rig.oa.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "user", "content": USER},
            message,
            {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "sunny"},
        ],
        tools=[GET_WEATHER],
    )
    assert second.choices[0].message.content == "Sunny."


# -- context, and the field an error names ---------------------------------------------------


def test_the_upstreams_context_is_read_from_its_models() -> None:
    listing = {"data": [{"id": "other", "max_model_len": 5}, {"id": MODEL, "max_model_len": 40960}]}
    assert model_length(listing, MODEL) == 40960
    assert model_length({"data": [{"id": "served-as", "max_model_len": 9}]}, MODEL) == 9
    assert model_length({"data": []}, MODEL) is None
    from tests.serving import ScriptedUpstream

    upstream = ScriptedUpstream("vllm", context=32768)
    with running(upstream.app()) as url:
        assert upstream_context(url, MODEL) == 32768
    with running(ScriptedUpstream("vllm").app()) as url:  # no /v1/models: unknown
        assert upstream_context(url, MODEL) is None


PAST = {
    "/v1/chat/completions": "messages",
    "/v1/responses": "input",
    "/v1/messages": "messages",
}


@pytest.mark.parametrize("route", list(PAST))
def test_the_context_bounds_the_prompt_and_the_answer(rig: Rig, route: str) -> None:
    engine = scripted_engine("vllm", rig.upstream_url)
    engine.context_length = 64
    with running(create_app(engine, Limits())) as url:
        long = _body(route)
        text = "word " * 200
        if route == "/v1/responses":
            long["input"] = text
        else:
            long["messages"] = [{"role": "user", "content": text}]
        response = httpx.post(url + route, json=long, timeout=30)
        assert response.status_code == 400
        assert _param(route, response) == PAST[route]
        assert "context of 64 tokens" in response.text
        asked = {"/v1/chat/completions": "max_tokens", "/v1/responses": "max_output_tokens"}
        rig.script("Sunny.")
        body = _body(route, **{asked.get(route, "max_tokens"): 128000})
        assert httpx.post(url + route, json=body, timeout=30).status_code == 200
        sent = rig.upstream.bodies[-1]
        assert sent["max_tokens"] == 64 - len(sent["prompt"])


# -- model names ---------------------------------------------------------------------------


def test_model_aliases_and_patterns(rig: Rig) -> None:
    for name in ("claude-opus-5-5", "claude-haiku-4-5", "gpt-oss", MODEL):
        rig.script("Sunny.")
        body = {**_body("/v1/messages"), "model": name}
        response = rig.post("/v1/messages", body, url=rig.refusing)
        assert response.status_code == 200, (name, response.text)
        assert response.json()["model"] == name  # the client's own name, echoed
    missing = rig.post(
        "/v1/messages", {**_body("/v1/messages"), "model": "gpt-5"}, url=rig.refusing
    )
    assert missing.status_code == 404 and "claude-*" in missing.text
    assert (
        rig.post("/v1/messages", {**_body("/v1/messages"), "model": "claude-x"}).status_code == 404
    )
    listed = [m["id"] for m in httpx.get(rig.refusing + "/v1/models").json()["data"]]
    assert listed == [MODEL, "gpt-oss"]  # patterns are not names to list


# -- logprobs and n (Chat Completions) -------------------------------------------------------------


def _expected(rig: Rig, ids: list[int], top: int) -> list[tuple[str, float, list[str]]]:
    special = rig.tok.special_ids
    return [
        (
            rig.tok.token_text(i),
            fake_logprob(k),
            [rig.tok.token_text(i + j) for j in range(top)],
        )
        for k, i in enumerate(ids)
        if i not in special
    ]


def _entries(content: list[Any]) -> list[tuple[str, float, list[str]]]:
    return [(e.token, e.logprob, [t.token for t in e.top_logprobs]) for e in content]


@pytest.mark.parametrize(
    "text", ["Sunny in Paris.", f"<think>\nhm\n</think>\n\n{CALL}"], ids=["text", "call"]
)
def test_chat_logprobs_per_returned_token(rig: Rig, text: str) -> None:
    request: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": USER}],
        "tools": [GET_WEATHER],
        "logprobs": True,
        "top_logprobs": 2,
    }
    ids = rig.script(text)
    whole = rig.oa.chat.completions.create(**request)
    assert rig.upstream.bodies[-1]["logprobs"] == 2
    expected = _expected(rig, ids, 2)
    assert _entries(whole.choices[0].logprobs.content) == expected
    assert whole.choices[0].logprobs.content[0].bytes == list(expected[0][0].encode())
    rig.script(text)
    streamed: list[Any] = []
    for chunk in rig.oa.chat.completions.create(stream=True, **request):
        for choice in chunk.choices:
            if choice.logprobs is not None:
                streamed += choice.logprobs.content or []
    assert _entries(streamed) == expected
    rig.script(text)
    plain = rig.oa.chat.completions.create(
        **{k: v for k, v in request.items() if "logprobs" not in k}
    )
    assert plain.choices[0].logprobs is None


def test_logprobs_on_an_engine_without_them_is_a_400() -> None:
    with scripted("sglang", Limits()) as (_, _, urls):
        client = openai.OpenAI(base_url=urls[0] + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": USER}], logprobs=True
            )
        assert caught.value.body["param"] == "logprobs"  # type: ignore[index]


@STREAM
def test_chat_n_choices(rig: Rig, stream: bool) -> None:
    for text in ("One.", "Two.", "Three."):
        rig.script(text)
    request: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": USER}],
        "n": 3,
        "seed": 7,
    }
    before = len(rig.upstream.bodies)
    if stream:
        texts = {0: "", 1: "", 2: ""}
        finishes: dict[int, str] = {}
        usage = None
        for chunk in rig.oa.chat.completions.create(
            stream=True, stream_options={"include_usage": True}, **request
        ):
            usage = chunk.usage or usage
            for choice in chunk.choices:
                texts[choice.index] += choice.delta.content or ""
                if choice.finish_reason:
                    finishes[choice.index] = choice.finish_reason
        assert sorted(texts.values()) == ["One.", "Three.", "Two."]
        assert finishes == {0: "stop", 1: "stop", 2: "stop"}
        assert usage is not None and usage.completion_tokens == 9
    else:
        response = rig.oa.chat.completions.create(**request)
        assert [c.index for c in response.choices] == [0, 1, 2]
        assert [c.message.content for c in response.choices] == ["One.", "Two.", "Three."]
        assert response.usage is not None and response.usage.completion_tokens == 9
    seeds = [body["seed"] for body in rig.upstream.bodies[before:]]
    assert seeds == [7, 8, 9]


@pytest.mark.parametrize(
    ("route", "param"),
    [("/v1/responses", "tools[0].type"), ("/v1/messages", "tools.0.type")],
)
def test_a_tool_type_no_one_hosts_is_still_a_400(rig: Rig, route: str, param: str) -> None:
    tool = {"type": "functoin", "name": "f", "parameters": {}, "input_schema": {}}
    response = rig.post(route, _body(route, tools=[tool]))
    assert response.status_code == 400
    assert _param(route, response) == param and "functoin" in response.text
