"""The operator's guidance policy: flags and variables, what requests carry, the report.

Each API's request goes through toolwire in front of a scripted vLLM, which records the
body it was sent: the structural tag is `structured_outputs.structural_tag` there. The
vLLM plugin's half that needs no vLLM reads the same variables.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.data import ROOT, data_dir, tokenizer_for
from tests.production import APIS, Keyed, keyed, send, with_tools
from tests.serving import ScriptedUpstream, running
from toolwire.grammar import GrammarPolicy
from toolwire.integrations.vllm.request import openai_tools, structural_tag_for
from toolwire.server.config import add_arguments, config_from
from toolwire.server.core.pipeline import Limits
from toolwire.server.guidance import SWITCHES, describe, policy_from, policy_from_env
from toolwire.server.run import build_app, limits_from

OFF = policy_from({"guidance": "off"})
AUTO = policy_from({"guidance_scope": "auto"})


@pytest.fixture(scope="module")
def off() -> Iterator[Keyed]:
    with keyed(limits=Limits(timeout=10, guidance=OFF)) as server:
        yield server


@pytest.fixture(scope="module")
def auto() -> Iterator[Keyed]:
    with keyed(limits=Limits(timeout=10, guidance=AUTO)) as server:
        yield server


def _tag(server: Keyed) -> Any:
    return server.rig.tag()


def _asked(server: Keyed, api: str, **extra: Any) -> Any:
    server.rig.script("Fine.")
    answer = send(server.url, api, **extra)
    assert answer.status == 200, answer.json
    return _tag(server)


@pytest.mark.parametrize("api", APIS)
def test_with_guidance_off_no_request_carries_a_tag(off: Keyed, api: str) -> None:
    for choice in ("auto", "required"):
        for strict in (None, True):
            assert _asked(off, api, **with_tools(api, choice, strict)) is None, (choice, strict)
            assert "structured_outputs" not in off.upstream.bodies[-1]  # no other constraint
    answer_format = {
        "chat": {"response_format": {"type": "json_object"}},
        "responses": {"text": {"format": {"type": "json_object"}}},
        "messages": {
            "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}
        },
    }[api]
    refused = send(off.url, api, **answer_format)
    assert refused.status == 400
    said = json.dumps(refused.json)
    assert "guidance off" in said
    param = {"chat": "response_format", "responses": "text.format"}.get(api)
    if param is not None:
        assert refused.json["error"]["param"] == param


@pytest.mark.parametrize("api", APIS)
def test_scope_auto_constrains_auto_only_for_strict_tools(auto: Keyed, api: str) -> None:
    assert _asked(auto, api, **with_tools(api, "auto")) is None
    assert _asked(auto, api, **with_tools(api, "auto", strict=False)) is None
    assert _asked(auto, api, **with_tools(api, "auto", strict=True)) is not None
    assert _asked(auto, api, **with_tools(api, "required")) is not None


def test_the_default_policy_constrains_every_tool_request() -> None:
    with keyed(limits=Limits(timeout=10)) as server:
        for api in APIS:
            assert _asked(server, api, **with_tools(api, "auto")) is not None


def test_switches_from_flags_and_variables() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = parser.parse_args(["--guidance-scope", "auto", "--guidance-max-whitespace", "0"])
    env = {"TOOLWIRE_GUIDANCE_SCHEMA": "strict", "TOOLWIRE_GUIDANCE_SCOPE": "always"}
    policy = limits_from(config_from(flags, env)).guidance
    assert policy == GrammarPolicy(scope="auto", schema="strict", max_whitespace=None)
    assert limits_from(config_from(parser.parse_args([]), {})).guidance == GrammarPolicy()
    off = config_from(parser.parse_args(["--guidance", "off"]), {})
    assert not limits_from(off).guidance.enabled
    with pytest.raises(ValueError, match="--guidance-scope 'sometimes'"):
        config_from(parser.parse_args(["--guidance-scope", "sometimes"]), {})
    with pytest.raises(ValueError, match="TOOLWIRE_GUIDANCE_EXCLUDE_DELIMITERS"):
        policy_from_env({"TOOLWIRE_GUIDANCE_EXCLUDE_DELIMITERS": "maybe"})
    offs = {s.env: "off" for s in SWITCHES if s.default == "on"}
    assert len(offs) == 3
    assert describe(policy_from_env(offs)) == {
        "guidance": "off",
        "guidance_scope": "always",
        "guidance_schema": "auto",
        "guidance_max_whitespace": "16",
        "guidance_exclude_delimiters": "off",
        "guidance_shared_rules": "off",
    }


def test_the_policy_is_reported_in_ready_and_in_the_startup_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    upstream = ScriptedUpstream("vllm")
    with running(upstream.app()) as upstream_url:
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        flags = [
            "--engine",
            "vllm",
            "--upstream",
            upstream_url,
            "--tokenizer",
            str(data_dir() / "tokenizers" / "qwen3"),
            "--store",
            "memory",
            "--guidance-scope",
            "auto",
            "--guidance-exclude-delimiters",
            "off",
        ]
        with caplog.at_level(logging.INFO, logger="toolwire.server"):
            app = build_app(config_from(parser.parse_args(flags), {}))
        assert (
            "guidance policy: guidance=on, guidance_scope=auto, guidance_schema=auto, "
            "guidance_max_whitespace=16, guidance_exclude_delimiters=off, "
            "guidance_shared_rules=on"
        ) in caplog.text
        with running(app) as url:
            ready = httpx.get(url + "/health/ready").json()
    assert ready["guidance"]["guidance_scope"] == "auto"
    assert ready["guidance"]["guidance_exclude_delimiters"] == "off"


def test_the_vllm_plugin_reads_the_same_variables() -> None:
    tok = tokenizer_for("qwen3")
    tools = openai_tools([with_tools("chat", "auto")["tools"][0]])
    off = policy_from_env({"TOOLWIRE_GUIDANCE": "off"})
    auto = policy_from_env({"TOOLWIRE_GUIDANCE_SCOPE": "auto"})
    assert structural_tag_for("qwen3", tok, tools, "required", True, off).tag is None
    assert structural_tag_for("qwen3", tok, tools, "auto", True, auto).tag is None
    assert structural_tag_for("qwen3", tok, tools, "required", True, auto).tag is not None
    script = (
        "from toolwire.integrations.vllm.request import POLICY; "
        "from toolwire.server.guidance import describe; import json; "
        "print(json.dumps(describe(POLICY)))"
    )
    env = {"PYTHONPATH": str(ROOT / "src"), "TOOLWIRE_GUIDANCE": "off"}
    env["TOOLWIRE_GUIDANCE_SCOPE"] = "auto"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    loaded = json.loads(out.stdout)
    assert (loaded["guidance"], loaded["guidance_scope"]) == ("off", "auto")
