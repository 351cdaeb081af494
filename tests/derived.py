"""Tokenizers for families whose vocabulary is not available offline.

Kimi K2, GLM, MiniMax M2 and Gemma 4 ship only chat templates here (Kimi also its
`tokenizer_config.json` with real ids). Their tests use a *derived* tokenizer, built by
`peers.vocab` (the conformance run uses the same one): Qwen3's real byte-level
BPE vocabulary, with Qwen's own added tokens removed and the family's delimiters and
turn markers added as special tokens, real ids kept where known (Kimi). It is written
as an ordinary model folder and loaded with `toolwire.load_tokenizer`, so that path is
exercised too.
"""

from __future__ import annotations

from peers.vocab import tokenizer_for
from tests.data import data_dir
from toolwire import Tokenizer


def derived_tokenizer(family: str) -> Tokenizer:
    """Qwen3's vocabulary plus `family`'s special tokens (real ids where known)."""
    return tokenizer_for(f"derived:{family}", data_dir())
