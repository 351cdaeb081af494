"""Tokenizers for families whose vocabulary is not available offline.

Kimi K2, GLM, MiniMax M2 and Gemma 4 ship only chat templates here (Kimi also its
`tokenizer_config.json` with real ids). Their tests use a *derived* tokenizer: Qwen3's
real byte-level BPE vocabulary, with Qwen's own added tokens removed and the family's
delimiters and turn markers added as special tokens. Where the real ids are known
(Kimi) they are kept, by filling the gap with reserved tokens. The result is written
as an ordinary model folder (tokenizer.json + tokenizer_config.json + template) and
loaded with `toolwire.load_tokenizer`, so that path is exercised too.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from tests.conftest import data_dir
from toolwire import Tokenizer, load_tokenizer

#: family -> (special tokens in id order, eos token, default template file)
FAMILIES: dict[str, tuple[list[str], str, str]] = {
    "glm": (
        [
            "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>",
            "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
            "<think>", "</think>", "<tool_call>", "</tool_call>",
            "<tool_response>", "</tool_response>",
            "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
        ],
        "<|endoftext|>",
        "GLM-4.7-Flash.jinja",
    ),
    "minimax_m2": (
        ["]~!b[", "]~b]", "[e~[", "<minimax:tool_call>", "</minimax:tool_call>",
         "<think>", "</think>"],
        "[e~[",
        "MiniMax-M2.jinja",
    ),
    "gemma4": (
        [
            "<pad>", "<eos>", "<bos>", "<|turn>", "<turn|>", "<|tool_call>", "<tool_call|>",
            '<|"|>', "<|channel>", "<channel|>", "<|tool>", "<tool|>",
            "<|tool_response>", "<tool_response|>", "<|think|>",
            "<|image|>", "<|audio|>", "<|video|>",
        ],
        "<turn|>",
        "google-gemma-4-31B-it.jinja",
    ),
}  # fmt: skip

_BASE_VOCAB = 151643  # Qwen3's BPE vocabulary; its first added token is <|endoftext|>


def _token(content: str, special: bool = True) -> dict[str, Any]:
    return {
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": special,
    }


def _family_tokens(family: str) -> tuple[dict[int, str], dict[str, Any]]:
    """Ids -> token text, and extra tokenizer_config keys."""
    if family == "kimi_k2":
        config = json.loads((data_dir() / "tokenizers/kimi_k2/tokenizer_config.json").read_text())
        tokens = {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()}
        extra = {k: config[k] for k in ("bos_token", "eos_token") if k in config}
        return tokens, extra
    names, eos, _ = FAMILIES[family]
    tokens = {_BASE_VOCAB + 1 + n: text for n, text in enumerate(names)}
    return tokens, {"eos_token": eos}


@cache
def derived_tokenizer(family: str, template: str | None = None) -> Tokenizer:
    """Qwen3's vocabulary plus `family`'s special tokens (real ids where known)."""
    tokens, extra = _family_tokens(family)
    with gzip.open(data_dir() / "tokenizers/qwen3/tokenizer.json.gz", "rt") as fh:
        data = json.load(fh)
    data["added_tokens"] = []
    table: dict[int, str] = {_BASE_VOCAB: "<|endoftext|>", **tokens}
    for i in range(_BASE_VOCAB, max(table) + 1):  # ids are assigned in order: no gaps
        data["added_tokens"].append({"id": i, **_token(table.get(i, f"<|reserved_{i}|>"))})
    folder = Path(tempfile.mkdtemp(prefix=f"toolwire-derived-{family}-"))
    (folder / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    config: dict[str, Any] = {
        "added_tokens_decoder": {str(i): _token(t) for i, t in sorted(tokens.items())},
        **extra,
    }
    source = data_dir() / "tokenizers" / family
    name = template or (FAMILIES[family][2] if family in FAMILIES else "Kimi-K2-Thinking.jinja")
    config["chat_template"] = (source / name).read_text(encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    tok = load_tokenizer(folder)
    for i, text in tokens.items():
        assert tok.token_id(text) == i, (family, text, i)
    return tok
