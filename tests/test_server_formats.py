"""Every format serves: startup (warm-up included) and one request, for each format
whose chat template is in the shared data, against a scripted vLLM upstream.

Startup goes through `build_app`, as `toolwire serve --engine vllm --format X` does,
for formats with a real tokenizer folder; formats tested with a derived vocabulary
(tests/derived.py) start from a built engine through the same `prepare`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import cases
from tests.data import data_dir
from tests.serving import Script, ScriptedUpstream, running
from toolwire import formats
from toolwire.backends.vllm import VllmEngine
from toolwire.prompt.reasoning import ends_in_reasoning
from toolwire.server.config import add_arguments, config_from
from toolwire.server.core.pipeline import Limits
from toolwire.server.run import build_app, prepare

#: format -> (tokenizer folder under tokenizers/, or None for the derived one; template)
SERVED: dict[str, tuple[str | None, str | None]] = {
    "hermes": ("qwen3", "qwen3/Qwen-Qwen2.5-7B-Instruct.jinja"),
    "qwen3": ("qwen3", "qwen3/Qwen-Qwen3-0.6B.jinja"),
    "qwen3_coder": ("qwen3", "qwen3/Qwen3-Coder.jinja"),
    "deepseek_v3": ("deepseek_v3", None),  # the template of its tokenizer_config.json
    "deepseek_v31": ("deepseek_v3", "deepseek_v3/deepseek-ai-DeepSeek-V3.1.jinja"),
    "deepseek_v32": ("deepseek_v4", "deepseek_v3/deepseek-ai-DeepSeek-V3.2.jinja"),
    "gpt_oss": ("gpt_oss", "gpt_oss/openai-gpt-oss-120b.jinja"),
    "llama3_json": ("llama3", "llama3/meta-llama-Llama-3.1-8B-Instruct.jinja"),
    "pythonic": ("llama3", "llama3/meta-llama-Llama-3.2-3B-Instruct.jinja"),
    "kimi_k2": (None, "kimi_k2/Kimi-K2-Instruct.jinja"),
    "glm45": (None, "glm/GLM-4.6.jinja"),
    "glm47": (None, "glm/GLM-4.7-Flash.jinja"),
    "minimax_m2": (None, "minimax_m2/MiniMax-M2.jinja"),
    "gemma4": (None, "gemma4/google-gemma-4-31B-it.jinja"),
}
#: Registered formats with no chat template in the shared data, and why.
NO_TEMPLATE = {
    "deepseek_v4": "no template ships with its tokenizer",
    "deepseek_v41": "no template ships with its tokenizer",
    **{
        name: "no chat template or vocabulary of the family is available offline"
        for name in (
            "granite",
            "granite4",
            "seed_oss",
            "lfm2",
            "command",
            "hunyuan",
            "hy_v3",
            "hy_v4",
            "llama4",
            "nemotron",
            "gigachat3",
            "gigachat31",
            "gigachat35",
            "internlm",
            "step3",
            "longcat",
            "phi4_mini",
            "ernie45",
            "olmo3",
            "granite31",
            "minicpm5",
            "functiongemma",
            "apertus",
            "xlam",
            "jamba",
        )
    },
    "kimi_k3": "no Jinja template exists: its tokenizer renders prompts in Python",
    "inkling": "no chat template is available offline",
    "minimax_m3": "no chat template is available offline",
}
MISTRAL = {"mistral": "prompts are built with mistral-common, not a chat template"}
#: Complete tools, as strict templates want them (gpt-oss reads `description`).
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "the city"}},
                "required": ["city"],
            },
        },
    }
]


def test_the_table_covers_every_format() -> None:
    assert set(SERVED) | set(NO_TEMPLATE) | set(MISTRAL) == set(formats.names())


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[ScriptedUpstream, str]]:
    scripted = ScriptedUpstream("vllm")
    with running(scripted.app()) as url:
        yield scripted, url


def _app(name: str, upstream_url: str) -> Any:
    folder, template = SERVED[name]
    shared = data_dir() / "tokenizers"
    if folder is None:
        text = (shared / template).read_text(encoding="utf-8") if template else None
        engine = VllmEngine(
            upstream_url,
            model=name,
            tokenizer=cases.tokenizer(name),
            format=name,
            template=text,
            timeout=5,
        )
        return prepare(engine, Limits(timeout=10))
    flags = ["--engine", "vllm", "--upstream", upstream_url, "--format", name]
    flags += ["--tokenizer", str(shared / folder), "--model", name]
    if template is not None:
        flags += ["--chat-template", str(shared / template)]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return build_app(config_from(parser.parse_args(flags), {}))


@pytest.mark.parametrize("name", sorted(SERVED))
def test_every_format_starts_and_serves_a_call(
    name: str, upstream: tuple[ScriptedUpstream, str]
) -> None:
    scripted, upstream_url = upstream
    scripted.scripts.clear()
    app = _app(name, upstream_url)  # startup: engine, warm-up, app
    fmt = formats.get(name)
    tok = cases.tokenizer(name)
    with running(app) as url:
        body: dict[str, Any] = {
            "model": name,
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": TOOLS,
        }
        # The model's output follows its prompt: where the template opens the reasoning
        # block, the model closes it before it calls (the families whose calls may not
        # begin inside reasoning read a call there as reasoning text).
        scripted.scripts.append(Script([]))
        probe = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
        assert probe.status_code == 200, probe.text
        prompt = scripted.bodies[-1]["prompt"]
        text = prompt if isinstance(prompt, str) else tok.decode(prompt)
        opened = ends_in_reasoning(text, fmt.reasoning)
        output = fmt.render_output(
            reasoning="Checking." if opened else None,
            calls=[("get_weather", {"city": "Paris"})],
            prefilled=opened,
        )
        for stream in (False, True):
            scripted.scripts.append(Script(tok.encode(output), per_event=4))
            body["stream"] = stream
            r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
            assert r.status_code == 200, r.text
            if stream:
                chunks = [
                    json.loads(line[5:])
                    for line in r.text.splitlines()
                    if line.startswith("data:") and line != "data: [DONE]"
                ]
                assert r.text.rstrip().endswith("data: [DONE]")
                deltas = [c["choices"][0] for c in chunks if c.get("choices")]
                names = [
                    call["function"]["name"]
                    for d in deltas
                    for call in d["delta"].get("tool_calls") or []
                    if call["function"].get("name")
                ]
                arguments = "".join(
                    call["function"].get("arguments") or ""
                    for d in deltas
                    for call in d["delta"].get("tool_calls") or []
                )
                finish = [d["finish_reason"] for d in deltas if d["finish_reason"]]
            else:
                choice = r.json()["choices"][0]
                calls = choice["message"].get("tool_calls") or []
                names = [c["function"]["name"] for c in calls]
                arguments = "".join(c["function"]["arguments"] for c in calls)
                finish = [choice["finish_reason"]]
            assert names == ["get_weather"], (stream, r.text[:500])
            assert json.loads(arguments) == {"city": "Paris"}
            assert finish == ["tool_calls"]
