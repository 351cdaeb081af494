"""Cross-check: request bodies toolwire sends upstream, validated by the engines' own code.

Run with the interpreter that has vLLM and SGLang installed (`.venv-bench`), reading
`{"vllm": [body, ...], "sglang": [body, ...]}` as JSON on stdin::

    .venv-bench/bin/python bench/engine_bodies.py < bodies.json

vLLM: `CompletionRequest.model_validate` (which also compiles-checks the structural tag
with vLLM's XGrammar backend), and no field outside `CompletionRequest.model_fields`.
SGLang: every top-level field is a field of `GenerateReqInput` (read from its source, as
importing `io_struct` pulls in multimodal dependencies), and `sampling_params` builds a
`SamplingParams` that passes `verify()`. Prints one JSON line per body; exits 1 on any
rejection.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any


def _sglang_request_fields() -> set[str]:
    spec = importlib.util.find_spec("sglang")
    assert spec is not None and spec.submodule_search_locations
    source = Path(next(iter(spec.submodule_search_locations))) / "srt/managers/io_struct.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "GenerateReqInput":
            return {
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
    raise RuntimeError("GenerateReqInput not found in SGLang's io_struct.py")


def check_vllm(body: dict[str, Any]) -> str | None:
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest

    unknown = set(body) - set(CompletionRequest.model_fields)
    if unknown:
        return f"fields vLLM does not know: {sorted(unknown)}"
    try:
        request = CompletionRequest.model_validate(body)
    except Exception as exc:  # pydantic and vLLM validation errors
        return f"{type(exc).__name__}: {exc}"
    if not request.return_token_ids or request.skip_special_tokens is not False:
        return "token ids not requested, or special tokens skipped"
    if not isinstance(request.prompt, list):
        return "the prompt is not token ids"
    return None


def check_sglang(body: dict[str, Any], fields: set[str]) -> str | None:
    from sglang.srt.sampling.sampling_params import SamplingParams

    unknown = set(body) - fields
    if unknown:
        return f"fields SGLang does not know: {sorted(unknown)}"
    try:
        params = SamplingParams(**body.get("sampling_params", {}))
        params.verify(vocab_size=1 << 20)
    except Exception as exc:  # SGLang raises ValueError/TypeError for bad params
        return f"{type(exc).__name__}: {exc}"
    if "input_ids" not in body or params.skip_special_tokens:
        return "no input_ids, or special tokens skipped"
    return None


def main() -> int:
    bodies = json.load(sys.stdin)
    failed = 0
    for body in bodies.get("vllm", []):
        error = check_vllm(body)
        failed += error is not None
        print(json.dumps({"engine": "vllm", "ok": error is None, "error": error}))
    fields = _sglang_request_fields() if bodies.get("sglang") else set()
    for body in bodies.get("sglang", []):
        error = check_sglang(body, fields)
        failed += error is not None
        print(json.dumps({"engine": "sglang", "ok": error is None, "error": error}))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
