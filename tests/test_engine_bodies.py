"""The bodies sent to vLLM and SGLang, checked against those engines' request models.

The pure test checks field names copied from vLLM 0.33's `CompletionRequest` and SGLang
0.5.23's `GenerateReqInput`/`SamplingParams`; the cross-check hands the same bodies to
the engines' own validation in `.venv-bench` (skipped, saying why, when it is absent).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.data import ROOT, tokenizer_for
from toolwire.backends.base import Generation
from toolwire.backends.sglang import generate_body
from toolwire.backends.vllm import completion_body
from toolwire.grammar import structural_tag

# Copied from vllm/entrypoints/openai/completion/protocol.py (CompletionRequest).
VLLM_FIELDS = {
    "model", "prompt", "max_tokens", "stream", "temperature", "top_p", "seed",
    "return_token_ids", "skip_special_tokens", "add_special_tokens", "structured_outputs",
}  # fmt: skip
# Copied from vllm/sampling_params.py (StructuredOutputsParams).
VLLM_STRUCTURED = {"structural_tag"}
# Copied from sglang/srt/managers/io_struct.py (GenerateReqInput).
SGLANG_FIELDS = {"input_ids", "sampling_params", "stream"}
# Copied from sglang/srt/sampling/sampling_params.py (SamplingParams).
SGLANG_SAMPLING = {
    "max_new_tokens", "temperature", "top_p", "sampling_seed", "skip_special_tokens",
    "structural_tag",
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


def _generations() -> list[Generation]:
    tok = tokenizer_for("qwen3")
    prompt = tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    out = [Generation(prompt, 16), Generation(prompt, 8, temperature=0.0, top_p=0.5, seed=7)]
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice in ("auto", "required", named):
        tag = structural_tag("qwen3", TOOLS, tool_choice=choice, tokenizer=tok)
        assert tag is not None
        out.append(Generation(prompt, 32, temperature=0.7, structural_tag=tag))
    return out


def _bodies() -> dict[str, list[dict[str, Any]]]:
    generations = _generations()
    return {
        "vllm": [completion_body(g, "Qwen/Qwen3-0.6B") for g in generations],
        "sglang": [generate_body(g) for g in generations],
    }


def test_bodies_use_only_the_engines_fields() -> None:
    bodies = _bodies()
    for body in bodies["vllm"]:
        assert set(body) <= VLLM_FIELDS
        assert body["return_token_ids"] is True and body["skip_special_tokens"] is False
        assert all(isinstance(i, int) for i in body["prompt"])
        if "structured_outputs" in body:
            assert set(body["structured_outputs"]) <= VLLM_STRUCTURED
            json.loads(body["structured_outputs"]["structural_tag"])
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
    assert len(lines) == 10, result.stderr[-2000:]
    assert all(line["ok"] for line in lines), lines
    assert result.returncode == 0
