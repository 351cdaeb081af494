"""Preflight: compile a tag with XGrammar (when installed) before it is sent.

Optional dependency: the `grammar` extra (`xgrammar`, which imports torch). Without
it `available()` is False and `check()` returns None (nothing to report): the tag is
sent unchecked. With it, `check()` builds the grammar from the tag
(`xgrammar.Grammar.from_structural_tag`: parses the tag and converts every schema,
which is where tags fail) and returns the error text, or None when it compiles.
Results are cached by the tag's JSON text, so a repeated tool set costs one lookup.

`tokenizer_info()` builds XGrammar's view of a toolwire `Tokenizer` (for engines and
tests that compile token masks); it is cached per tokenizer object.
"""

from __future__ import annotations

import importlib
import json
import weakref
from functools import lru_cache
from typing import Any

from toolwire.tokenizer import Tokenizer

__all__ = ["available", "check", "compiler", "error_text", "tokenizer_info", "xgrammar_module"]


@lru_cache(maxsize=1)
def _xgrammar() -> Any:
    try:
        return importlib.import_module("xgrammar")
    except ImportError:
        return None


def xgrammar_module() -> Any:
    """The `xgrammar` module, or None when it is not installed."""
    return _xgrammar()


def available() -> bool:
    """True when XGrammar can be imported."""
    return _xgrammar() is not None


def check(tag: dict[str, Any]) -> str | None:
    """XGrammar's error for this tag, or None when it compiles (or XGrammar is absent)."""
    if _xgrammar() is None:
        return None
    return _check_text(json.dumps(tag, sort_keys=True, ensure_ascii=False))


@lru_cache(maxsize=512)
def _check_text(text: str) -> str | None:
    xgr = _xgrammar()
    try:
        xgr.Grammar.from_structural_tag(text)
    except Exception as exc:  # XGrammar raises several types; all mean "does not compile"
        return error_text(exc)
    return None


def error_text(exc: Exception) -> str:
    """An XGrammar exception as a reason."""
    return f"{type(exc).__name__}: {str(exc).strip()[:500]}"


#: One `TokenizerInfo` per tokenizer, dropped with it (as the lexicon's caches are).
_INFOS: weakref.WeakKeyDictionary[Tokenizer, Any] = weakref.WeakKeyDictionary()


def tokenizer_info(tokenizer: Tokenizer) -> Any:
    """`xgrammar.TokenizerInfo` for a toolwire tokenizer (requires XGrammar)."""
    xgr = _xgrammar()
    if xgr is None:
        raise ImportError("xgrammar is not installed (pip install 'toolwire[grammar]')")
    cached = _INFOS.get(tokenizer)
    if cached is not None:
        return cached
    stops = sorted(tokenizer.eos_ids) or None
    info = _from_backend(xgr, tokenizer, stops)
    if info is None:
        fast = importlib.import_module("transformers").PreTrainedTokenizerFast(
            tokenizer_object=tokenizer.backend
        )
        info = xgr.TokenizerInfo.from_huggingface(
            fast, vocab_size=tokenizer.vocab_size, stop_token_ids=stops
        )
    _INFOS[tokenizer] = info
    return info


def _from_backend(xgr: Any, tokenizer: Tokenizer, stops: list[int] | None) -> Any:
    """`TokenizerInfo.from_huggingface`'s fast-tokenizer branch, read from the
    `tokenizers` backend itself (no `transformers` wrapper, whose construction copies
    the whole backend): the same vocabulary, metadata and stop ids. None where that
    branch would need the wrapper (a vocabulary whose type contradicts the
    tokenizer's metadata) or XGrammar no longer has these helpers."""
    backend = tokenizer.backend
    detect = getattr(xgr.TokenizerInfo, "_detect_metadata_from_hf", None)
    by_vocab = getattr(xgr.TokenizerInfo, "_detect_vocab_type_from_vocab", None)
    if detect is None or by_vocab is None or not hasattr(backend, "to_str"):
        return None
    vocab: dict[str, int] = backend.get_vocab(with_added_tokens=True)
    metadata = detect(backend.to_str())
    seen = by_vocab(vocab)
    if seen is not None and seen != metadata["vocab_type"]:
        return None
    size = tokenizer.vocab_size
    encoded = [""] * size
    for token, index in vocab.items():
        if index < size:
            encoded[index] = token
    return xgr.TokenizerInfo(
        encoded,
        vocab_type=metadata["vocab_type"],
        vocab_size=size,
        stop_token_ids=stops,
        add_prefix_space=metadata["add_prefix_space"],
    )


def compiler(tokenizer: Tokenizer) -> Any:
    """An `xgrammar.GrammarCompiler` for this tokenizer (requires XGrammar)."""
    return _xgrammar().GrammarCompiler(tokenizer_info(tokenizer), max_threads=2)
