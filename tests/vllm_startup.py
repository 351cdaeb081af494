"""Run inside a vLLM venv: what vLLM builds under `--tokenizer-mode toolwire`, per setting.

`python tests/vllm_startup.py JOB.json RESULT.json` (PYTHONPATH=src; imports only vLLM and
toolwire). The job, written by `tests/test_vllm_renderer.py`, names settings: a model
folder and the `ModelConfig` fields a `vllm serve` flag sets (`skip_tokenizer_init`,
`enable_prompt_embeds`). Each goes the way vLLM's server builds its renderer
(`ModelConfig`, `VllmConfig`, `renderer_from_config`: the tokenizer from the registry,
None without tokenizer init), and the result records the renderer's class, or the
error vLLM's startup would end with.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def build(folder: str, fields: dict[str, Any]) -> dict[str, str]:
    from vllm.config import ModelConfig, VllmConfig
    from vllm.renderers.registry import renderer_from_config

    try:
        model_config = ModelConfig(
            model=folder, tokenizer_mode="toolwire", dtype="float32", max_model_len=2048, **fields
        )
        renderer = renderer_from_config(VllmConfig(model_config=model_config))
    except Exception as exc:  # recorded: the test reads the reason
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"renderer": type(renderer).__name__}


def main(job_path: str, result_path: str) -> int:
    import vllm

    from toolwire.integrations.vllm.plugin import register_renderer

    register_renderer()
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    out = {
        "vllm": vllm.__version__,
        "settings": {
            name: build(setting["folder"], setting["fields"])
            for name, setting in job["settings"].items()
        },
    }
    Path(result_path).write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
