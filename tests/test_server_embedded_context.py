"""The embedded engine sized for agents, and its logprobs and choices, for real.

`toolwire serve` on the bundled SmolLM2-135M (llama.cpp), as a user starts it:

* its context is the GGUF's training context (8192), not a fixed 4096: `/v1/models`
  says so, a prompt past 4096 tokens (4.5k, not an agent's whole first prompt: Codex's,
  ~9.2k on this vocabulary, is served to Codex itself in `make test-agents`; a
  prefill's cost grows faster than its length) is served on every API, and one past
  the context is a 400 naming the API's own field (`input` on Responses, `messages`
  on Messages and Chat Completions);
* `max_tokens` far past the context is cut to what the context leaves, not refused,
  and a generation that fills the context ends there (`length`): shown on a second
  server whose context is set to 512 (`--context`), a prompt a dozen tokens short of
  it (the same arithmetic as at 8192, without a second long prefill: the tokens near
  8k cost the most, each attending to all before it);
* `logprobs` come from the model's logits (before any grammar mask): greedy decoding
  picks each token's best alternative, streamed and whole agree;
* `n` choices are generated one after another.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.serving import toolwire_serve

MODEL = "SmolLM2-135M-Instruct"
CONTEXT = 8192
#: About 4.5k tokens of SmolLM2's vocabulary (one token per repeated word).
LONG = "Read this. " + "note " * 4500
#: The small server's context, and a prompt a dozen tokens short of it.
SMALL = 512
NEARLY_FULL = "Read this. " + "note " * 466
#: A JSON value that cannot end within what the small context leaves.
LONGER = {"type": "string", "minLength": 1000}


class Served:
    def __init__(self, url: str) -> None:
        self.url = url
        # a long prompt's prefill takes a while on a busy machine: generous timeouts
        self.openai = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=1800)
        self.anthropic = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=1800)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    # no server-side limit: on a loaded machine a long prefill can pass the default
    # 600 s; the clients' own timeouts bound each request
    with toolwire_serve(log, "--max-tokens", "8", "--timeout", "0") as url:
        yield Served(url)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with toolwire_serve(log, "--context", str(SMALL), "--timeout", "0") as url:
        yield Served(url)


def test_the_context_is_the_models(served: Served) -> None:
    (model,) = httpx.get(served.url + "/v1/models").json()["data"]
    assert (model["id"], model["max_model_len"]) == (MODEL, CONTEXT)


def test_a_prompt_past_4096_tokens_is_served_on_every_api(served: Served) -> None:
    response = served.openai.responses.create(model=MODEL, input=LONG, max_output_tokens=4)
    assert 4096 < response.usage.input_tokens < CONTEXT - 1  # past the old 4095
    # The same prompt on the other two (its prefill cached)
    message = served.anthropic.messages.create(
        model=MODEL, max_tokens=4, messages=[{"role": "user", "content": LONG}]
    )
    assert message.usage.input_tokens == response.usage.input_tokens
    chat = served.openai.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": LONG}], max_tokens=2
    )
    assert chat.usage is not None and chat.usage.prompt_tokens == response.usage.input_tokens


def test_a_prompt_near_the_context_is_answered_within_what_it_leaves(small: Served) -> None:
    (model,) = httpx.get(small.url + "/v1/models").json()["data"]
    assert model["max_model_len"] == SMALL
    # Claude Code's max_tokens, far past the context: cut to what it leaves, not refused
    message = small.anthropic.messages.create(
        model=MODEL, max_tokens=128000, messages=[{"role": "user", "content": NEARLY_FULL}]
    )
    left = SMALL - message.usage.input_tokens
    assert 0 < left < 30, message.usage
    assert 0 < message.usage.output_tokens <= left
    # Every token the context leaves, taken (a schema that cannot end sooner): the
    # engine stops at the context's end, not past it.
    chat = small.openai.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": NEARLY_FULL}],
        max_tokens=128000,
        response_format={"type": "json_schema", "json_schema": {"name": "long", "schema": LONGER}},
    )
    assert chat.usage is not None and chat.usage.prompt_tokens == message.usage.input_tokens
    assert chat.usage.completion_tokens == SMALL - chat.usage.prompt_tokens
    assert chat.choices[0].finish_reason == "length"


def test_a_prompt_past_the_context_names_each_apis_field(served: Served) -> None:
    past = LONG + "note " * 4000  # 8.5k tokens
    with pytest.raises(openai.BadRequestError) as caught:
        served.openai.responses.create(model=MODEL, input=past)
    assert caught.value.body["param"] == "input"  # type: ignore[index]
    assert "context of 8192 tokens" in caught.value.message
    assert caught.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as caught:
        served.openai.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": past}]
        )
    assert caught.value.body["param"] == "messages"  # type: ignore[index]
    with pytest.raises(anthropic.BadRequestError) as refused:
        served.anthropic.messages.create(
            model=MODEL, max_tokens=8, messages=[{"role": "user", "content": past}]
        )
    said = refused.value.body["error"]["message"]  # type: ignore[index]
    assert said.startswith("messages:"), said


def _entries(content: list[Any]) -> list[tuple[str, float, list[str]]]:
    return [(e.token, e.logprob, [t.token for t in e.top_logprobs]) for e in content]


def test_logprobs_are_the_models_and_agree_streamed(served: Served) -> None:
    request: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say hello."}],
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 3,
        "max_tokens": 6,
    }
    whole = served.openai.chat.completions.create(**request)
    entries = _entries(whole.choices[0].logprobs.content)
    assert entries and len(entries) <= whole.usage.completion_tokens
    for token, logprob, top in entries:
        assert logprob <= 0 and len(top) == 3
        assert top[0] == token  # greedy: the chosen token is the most likely one
    assert "".join(t for t, _, _ in entries).startswith(whole.choices[0].message.content or "")
    streamed: list[Any] = []
    for chunk in served.openai.chat.completions.create(stream=True, **request):
        for choice in chunk.choices:
            streamed += (choice.logprobs and choice.logprobs.content) or []
    got = _entries(streamed)
    assert [t for t, _, _ in got] == [t for t, _, _ in entries]
    assert [round(p, 3) for _, p, _ in got] == [round(p, 3) for _, p, _ in entries]


def test_n_choices_on_the_embedded_engine(served: Served) -> None:
    response = served.openai.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Name a color."}],
        n=2,
        seed=3,
        max_tokens=4,
    )
    assert [c.index for c in response.choices] == [0, 1]
    assert all(c.finish_reason in ("stop", "length") for c in response.choices)
