"""The vLLM parser plugin: its vLLM-free half here, and vLLM 0.33's serving path when the
peers' venv exists (the CPU server itself is `tests/test_vllm_real.py`, `make test-vllm`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import peers  # noqa: F401  (registers vllm+toolwire)
from peers.impls import peer_python
from tests.data import ROOT, data_dir, tokenizer_for
from toolwire.backends.grammar_backend import GUIDANCE, XGRAMMAR, lark_of
from toolwire.backends.vllm import VllmEngine
from toolwire.check.run import CheckOptions, run_check
from toolwire.errors import UsageError
from toolwire.events import ToolCallBegin
from toolwire.grammar.guidance import llguidance_module
from toolwire.integrations.vllm import plugin_path
from toolwire.integrations.vllm.request import (
    RequestParse,
    configured_backend,
    constraint_for,
    openai_tool_choice,
    openai_tools,
    prompt_in_reasoning,
    relaxed_tag_for,
)
from toolwire.server.core.pipeline import Limits, plan
from toolwire.server.core.request import ChatRequest

TOOL = {
    "type": "function",
    "function": {
        "name": "set_mode",
        "parameters": {
            "type": "object",
            "properties": {"mode": {"type": "string", "enum": ["on", "off"]}},
            "required": ["mode"],
        },
    },
}
CHOICES = ["auto", "required", "none", {"type": "function", "function": {"name": "set_mode"}}]


def test_plugin_path_is_a_file_vllm_can_import_under_its_name() -> None:
    path = plugin_path()
    assert path.is_file() and path.stem != "vllm"  # vLLM imports it as sys.modules[stem]
    printed = subprocess.run(
        [sys.executable, "-m", "toolwire.integrations.vllm", "--path"],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT / "src")},
    ).stdout.strip()
    assert Path(printed) == path


@pytest.mark.parametrize("choice", CHOICES, ids=["auto", "required", "none", "named"])
@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("backend", [XGRAMMAR, GUIDANCE])
def test_plugin_tag_is_the_servers_tag(choice: object, parallel: bool, backend: str) -> None:
    """The constraint the plugin attaches in a vLLM running `backend` is the one
    `toolwire serve --engine vllm --grammar-backend backend` sends for the request:
    XGrammar's structural tag, or llguidance's Lark grammar."""
    if backend == GUIDANCE and llguidance_module() is None:
        pytest.skip("llguidance is not installed (the grammar extra)")
    tok = tokenizer_for("qwen3")
    engine = VllmEngine(
        "http://127.0.0.1:9", model="m", tokenizer=tok, format="qwen3", grammar_backend=backend
    )
    request = ChatRequest(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        tools=[TOOL],
        tool_choice=choice,
        parallel_tool_calls=parallel,
    )
    served = plan(engine, request, Limits()).generation.structural_tag
    tools = openai_tools([TOOL])
    ours = constraint_for("qwen3", tok, tools, openai_tool_choice(choice), parallel, backend).tag
    assert ours == served
    if choice != "none":
        assert ours is not None and (lark_of(ours) is not None) == (backend == GUIDANCE)


@pytest.mark.parametrize(
    ("argv", "environ", "backend"),
    [
        ([], {}, XGRAMMAR),  # vLLM's auto takes a structural tag to XGrammar
        (["--structured-outputs-config.backend", "guidance"], {}, GUIDANCE),
        (["--structured-outputs-config.backend=guidance"], {}, GUIDANCE),
        (["--structured_outputs_config.backend", "guidance"], {}, GUIDANCE),
        (["--structured-outputs-config", '{"backend": "guidance"}'], {}, GUIDANCE),
        (['--structured-outputs-config={"backend":"guidance"}'], {}, GUIDANCE),
        (["--structured-outputs-config.backend", "xgrammar"], {}, XGRAMMAR),
        (["--structured-outputs-config.backend", "auto"], {}, XGRAMMAR),
        (["--structured-outputs-config", "not json"], {}, XGRAMMAR),
        (["--structured-outputs-config.backend"], {}, XGRAMMAR),  # no value: vLLM refuses
        # the last flag wins, as in vLLM's argument parser
        (
            ["--structured-outputs-config.backend=guidance"] * 2
            + ["--structured-outputs-config.backend=xgrammar"],
            {},
            XGRAMMAR,
        ),
        # the operator's variable wins over the command line
        (
            ["--structured-outputs-config.backend", "guidance"],
            {"TOOLWIRE_GRAMMAR_BACKEND": "xgrammar"},
            XGRAMMAR,
        ),
        ([], {"TOOLWIRE_GRAMMAR_BACKEND": "llguidance"}, GUIDANCE),
        ([], {"TOOLWIRE_GRAMMAR_BACKEND": " LLGuidance "}, GUIDANCE),
        (
            ["--structured-outputs-config.backend", "guidance"],
            {"TOOLWIRE_GRAMMAR_BACKEND": "auto"},
            GUIDANCE,
        ),
    ],
)
def test_the_plugin_reads_its_vllms_structured_output_backend(
    argv: list[str], environ: dict[str, str], backend: str
) -> None:
    assert configured_backend(["vllm", "serve", "m", *argv], environ) == backend


def test_an_unknown_grammar_backend_variable_is_refused_naming_it() -> None:
    with pytest.raises(UsageError, match="TOOLWIRE_GRAMMAR_BACKEND='outlines'"):
        configured_backend([], {"TOOLWIRE_GRAMMAR_BACKEND": "outlines"})


def test_relaxed_tag_only_for_forced_calls() -> None:
    tok = tokenizer_for("qwen3")
    tools = openai_tools([TOOL])
    assert relaxed_tag_for("qwen3", tok, tools, "auto", True) is None
    relaxed = relaxed_tag_for("qwen3", tok, tools, "required", True)
    assert relaxed is not None and '"enum"' not in str(relaxed)


def test_request_shapes() -> None:
    flat = {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}
    assert openai_tools([flat]) == [
        {
            "type": "function",
            "function": {"name": "f", "parameters": {"type": "object"}, "strict": True},
        }
    ]
    assert openai_tools(None) is None and openai_tools([]) is None
    assert openai_tool_choice(None) == "auto"
    assert openai_tool_choice({"type": "function", "name": "f"}) == {
        "type": "function",
        "function": {"name": "f"},
    }


def test_prompt_in_reasoning_reads_the_last_block() -> None:
    tok = tokenizer_for("qwen3")
    opened = tok.encode("<|im_start|>assistant\n<think>\n")
    closed = tok.encode("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert prompt_in_reasoning("qwen3", tok, opened) is True
    assert prompt_in_reasoning("qwen3", tok, closed) is False
    assert prompt_in_reasoning("qwen3", tok, []) is None  # unknown: the format's default
    assert prompt_in_reasoning("hermes", tok, opened) is None  # no reasoning block


def test_request_parse_mints_one_id_per_call() -> None:
    tok = tokenizer_for("qwen3")
    minted: list[int] = []

    def call_id(index: int) -> str:
        minted.append(index)
        return f"chatcmpl-tool-{index}"

    run = RequestParse(
        "qwen3",
        tok,
        tools=openai_tools([TOOL]),
        tool_choice="auto",
        parallel_tool_calls=True,
        in_reasoning=None,
        call_id=call_id,
    )
    call = '<tool_call>\n{"name": "set_mode", "arguments": {"mode": "on"}}\n</tool_call>'
    events = []
    for token in tok.encode(call + call):
        events += run.feed([token])
    events += run.finish() + run.finish()
    begins = [e for e in events if isinstance(e, ToolCallBegin)]
    assert [b.id for b in begins] == ["chatcmpl-tool-0", "chatcmpl-tool-1"]
    assert minted == [0, 1]


@pytest.mark.skipif(peer_python() is None, reason="needs .venv-bench (vLLM 0.33)")
def test_plugin_through_vllm_033_serving_path_equals_toolwire() -> None:
    """vLLM 0.33's `ParserManager` and `ChatStreamProcessor` driving the plugin give the
    `toolwire` row on every property (one format; `toolwire check --impl vllm+toolwire`
    runs them all)."""
    options = CheckOptions(
        data=data_dir(),
        formats=("qwen3",),
        impls=("toolwire", "vllm+toolwire"),
        groups=("echo",),
        limit=1,
    )
    results = run_check(options)
    assert not results.skipped, results.skipped
    rows: dict[str, list[dict[str, bool | None]]] = {}
    for r in results.results:
        rows.setdefault(r.impl, []).append(dict(r.verdicts))
    assert rows["vllm+toolwire"] == rows["toolwire"]
    assert all(False not in v.values() for v in rows["toolwire"])


_ALIASES_IN_VLLM = """
from toolwire import formats
from toolwire.integrations.vllm import plugin
from vllm.tool_parsers import ToolParserManager

plugin.register()
names = plugin.parser_names()
for alias, canonical in formats.aliases().items():
    assert "toolwire_" + alias in names, alias
    assert ToolParserManager.get_tool_parser("toolwire_" + alias).format == canonical, alias
for name in formats.names():
    assert ToolParserManager.get_tool_parser("toolwire_" + name).format == name, name
print("ok")
"""


@pytest.mark.skipif(peer_python() is None, reason="needs .venv-bench (vLLM 0.33)")
def test_the_plugin_registers_every_alias_as_a_parser_name() -> None:
    """`--tool-call-parser toolwire_glm5` serves glm47, and so on for every alias."""
    done = subprocess.run(
        [str(peer_python()), "-c", _ALIASES_IN_VLLM],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")
