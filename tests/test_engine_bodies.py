"""The bodies sent to vLLM and SGLang, checked against those engines' request models.

The pure test checks field names copied from vLLM 0.33's `CompletionRequest` and SGLang
0.5.23's `GenerateReqInput`/`SamplingParams`; the cross-check hands the same bodies to
the engines' own validation in `.venv-bench` (skipped, saying why, when it is absent).
Each engine gets its constraint in the form of the backend it runs: XGrammar's
structural tag, or llguidance's Lark grammar (vLLM `structured_outputs.grammar`,
SGLang `ebnf`), which llguidance itself must accept.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.data import ROOT, tokenizer_for
from toolwire.backends.base import Generation
from toolwire.backends.grammar_backend import GUIDANCE, XGRAMMAR, request_grammar
from toolwire.backends.sglang import generate_body
from toolwire.backends.vllm import completion_body
from toolwire.grammar.guidance import check_lark, llguidance_module

# Copied from vllm/entrypoints/openai/completion/protocol.py (CompletionRequest).
VLLM_FIELDS = {
    "model", "prompt", "max_tokens", "stream", "temperature", "top_p", "seed",
    "return_token_ids", "skip_special_tokens", "add_special_tokens", "structured_outputs",
}  # fmt: skip
# Copied from vllm/sampling_params.py (StructuredOutputsParams).
VLLM_STRUCTURED = {"structural_tag", "grammar"}
# Copied from sglang/srt/managers/io_struct.py (GenerateReqInput).
SGLANG_FIELDS = {"input_ids", "sampling_params", "stream"}
# Copied from sglang/srt/sampling/sampling_params.py (SamplingParams).
SGLANG_SAMPLING = {
    "max_new_tokens", "temperature", "top_p", "sampling_seed", "skip_special_tokens",
    "structural_tag", "ebnf",
}  # fmt: skip

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]


class _Upstream:
    """An engine whose upstream runs one constraint backend."""

    def __init__(self, backend: str) -> None:
        self.grammar_backends = (backend,)


def _generations(backend: str = XGRAMMAR) -> list[Generation]:
    tok = tokenizer_for("qwen3")
    prompt = tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    out = [Generation(prompt, 16), Generation(prompt, 8, temperature=0.0, top_p=0.5, seed=7)]
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice in ("auto", "required", named):
        result = request_grammar(
            _Upstream(backend), "qwen3", TOOLS, tool_choice=choice, tokenizer=tok
        )
        assert result.tag is not None, result.reasons
        out.append(Generation(prompt, 32, temperature=0.7, structural_tag=result.tag))
    return out


def _bodies(backends: tuple[str, ...] = (XGRAMMAR, GUIDANCE)) -> dict[str, list[dict[str, Any]]]:
    generations = [g for backend in backends for g in _generations(backend)]
    return {
        "vllm": [completion_body(g, "Qwen/Qwen3-0.6B") for g in generations],
        "sglang": [generate_body(g) for g in generations],
    }


def test_each_upstream_backend_gets_its_own_form() -> None:
    """An XGrammar upstream gets the structural tag (JSON text), an llguidance one the
    Lark grammar llguidance accepts; never both, and the same three requests either way."""
    if llguidance_module() is None:
        pytest.skip("llguidance is not installed (the grammar extra)")
    tags = _bodies((XGRAMMAR,))
    larks = _bodies((GUIDANCE,))
    assert len(tags["vllm"]) == len(larks["vllm"]) == 5
    for body in tags["vllm"][2:]:
        assert set(body["structured_outputs"]) == {"structural_tag"}
        assert json.loads(body["structured_outputs"]["structural_tag"])["type"] == "structural_tag"
    for body in larks["vllm"][2:]:
        assert set(body["structured_outputs"]) == {"grammar"}
        assert check_lark(body["structured_outputs"]["grammar"]) is None
    for body in tags["sglang"][2:]:
        assert "structural_tag" in body["sampling_params"]
        assert "ebnf" not in body["sampling_params"]
    for body in larks["sglang"][2:]:
        assert "structural_tag" not in body["sampling_params"]
        assert check_lark(body["sampling_params"]["ebnf"]) is None


def test_bodies_use_only_the_engines_fields() -> None:
    bodies = _bodies()
    for body in bodies["vllm"]:
        assert set(body) <= VLLM_FIELDS
        assert body["return_token_ids"] is True and body["skip_special_tokens"] is False
        assert all(isinstance(i, int) for i in body["prompt"])
        if "structured_outputs" in body:
            assert set(body["structured_outputs"]) <= VLLM_STRUCTURED
            assert len(body["structured_outputs"]) == 1
        assert "stop" not in body  # stop strings are matched on parsed content
    for body in bodies["sglang"]:
        assert set(body) <= SGLANG_FIELDS
        assert set(body["sampling_params"]) <= SGLANG_SAMPLING
        assert body["sampling_params"]["skip_special_tokens"] is False
        assert body["stream"] is True


BENCH_PYTHON = ROOT / ".venv-bench" / "bin" / "python"


@pytest.mark.skipif(
    not BENCH_PYTHON.exists(),
    reason=".venv-bench (vLLM and SGLang on CPU) is absent: the cross-check needs it",
)
def test_engines_accept_the_bodies(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(BENCH_PYTHON), str(ROOT / "bench" / "engine_bodies.py")],
        input=json.dumps(_bodies()),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 20, result.stderr[-2000:]
    assert all(line["ok"] for line in lines), lines
    assert result.returncode == 0
