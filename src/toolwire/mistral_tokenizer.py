"""The Mistral tokenizer's former home; it lives in `toolwire.tokenizer.mistral` (the
class) and `toolwire.tokenizer.files` (file detection and loading)."""

from __future__ import annotations

from toolwire.tokenizer.files import is_mistral_file, load_mistral
from toolwire.tokenizer.mistral import MistralTokenizer

__all__ = ["MistralTokenizer", "is_mistral_file", "load_mistral"]
