"""A tiny random-weight Qwen3 checkpoint for running a real vLLM on the CPU.

`python -m tests.tiny_qwen3 DEST [TOKENIZER_DIR]` (in a venv with torch and
transformers, such as .venv-vllm) writes a Hugging Face model folder: `config.json`,
`model.safetensors` (about 49 MB: the tied 151936 x 64 embedding is nearly all of it),
and Qwen3's real tokenizer and chat template from the shared data. The weights are
random (seeded, so every build is the same model): the model writes nonsense, which
is the point; only grammars make its output structured.

The shape is the smallest vLLM's CPU backend serves: `head_dim` 32 is its attention
kernel's minimum.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

__all__ = ["CONFIG", "build"]

#: transformers' Qwen3Config fields of the tiny model.
CONFIG = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "intermediate_size": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}


def build(dest: Path, tokenizer_dir: Path, *, seed: int = 0) -> Path:
    """Write the model folder (idempotent: an existing complete folder is kept)."""
    marker = dest / ".complete"
    if marker.is_file():
        return dest
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    dest.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(Qwen3Config(**CONFIG, torch_dtype="float32"))
    model.save_pretrained(dest, safe_serialization=True)
    with gzip.open(tokenizer_dir / "tokenizer.json.gz", "rb") as src:
        (dest / "tokenizer.json").write_bytes(src.read())
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    generation = {"bos_token_id": CONFIG["bos_token_id"], "eos_token_id": [151645, 151643]}
    (dest / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    for template in tokenizer_dir.glob("Qwen-Qwen3-*.jinja"):
        shutil.copyfile(template, dest / "chat_template.jinja")
    marker.touch()
    return dest


if __name__ == "__main__":
    from tests.data import data_path

    source = Path(sys.argv[2]) if len(sys.argv) > 2 else data_path() / "tokenizers" / "qwen3"
    print(build(Path(sys.argv[1]), source))
