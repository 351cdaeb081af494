"""Run inside a vLLM venv: vLLM's own renderer and toolwire's on the same chat requests.

`python tests/vllm_parity.py JOB.json RESULT.json` (PYTHONPATH=src; imports only vLLM
and toolwire, so it runs in .venv-vllm and in .venv-bench alike). The job, written by
`tests/test_vllm_plugin.py`, lists model folders (a config.json vLLM accepts plus the
family's tokenizer) and requests (Chat Completions bodies). For each folder one
`VllmConfig` is built and both renderers come from vLLM's registry: `hf` (vLLM's
`HfRenderer`) and `toolwire` (registered by `register_renderer`). Each request goes
the way vLLM's chat serving takes it (`ChatCompletionRequest`, `build_chat_params`,
the tools as `model_dump()` dicts, `render_chat`), and the ids the engine would get
are recorded, or the error when a renderer refuses the request.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any


def render(renderer: Any, model_config: Any, body: dict[str, Any], template: str | None) -> Any:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    request = ChatCompletionRequest(**body)
    tools = None if request.tools is None else [t.model_dump() for t in request.tools]
    params = request.build_chat_params(template, "auto").with_defaults(
        {"tools": tools, "tokenize": False}
    )
    try:
        _, (engine_input,) = renderer.render_chat(
            [request.messages], params, request.build_tok_params(model_config)
        )
    except Exception as exc:  # recorded: both renderers must refuse alike
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"ids": list(engine_input["prompt_token_ids"])}


def main(job_path: str, result_path: str) -> int:
    import vllm
    from vllm.config import ModelConfig, VllmConfig
    from vllm.renderers.registry import RENDERER_REGISTRY
    from vllm.tokenizers.registry import cached_tokenizer_from_config

    from toolwire.integrations.vllm.plugin import register_renderer

    register_renderer()
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    out: dict[str, Any] = {"vllm": vllm.__version__, "cases": []}
    for model in job["models"]:
        model_config = ModelConfig(
            model=model["folder"], tokenizer_mode="hf", dtype="float32", max_model_len=4096
        )
        try:
            config = VllmConfig(model_config=model_config)
        except RuntimeError as exc:  # a GPU build of vLLM on a machine without a GPU
            out["unavailable"] = str(exc)
            break
        tokenizer = cached_tokenizer_from_config(model_config)
        renderers = {
            mode: RENDERER_REGISTRY.load_renderer(mode, config, tokenizer)
            for mode in ("hf", "toolwire")
        }
        for case in model["cases"]:
            try:
                results = {
                    mode: render(r, model_config, case["body"], case["template"])
                    for mode, r in renderers.items()
                }
            except Exception:
                results = {"crash": traceback.format_exc()}
            out["cases"].append({"id": case["id"], **results})
    Path(result_path).write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
