"""Structural tags applied in-process: XGrammar's matcher as a logits mask.

Data flow, per output token::

    structural tag --compile (once per tag; the server caches it)--> GrammarMatcher
    logits --mask()--> logits with every id the grammar forbids set to -inf
    sampled id --accept()--> matcher advances; `finished` once the grammar is complete

The vocabulary handed to XGrammar is the served tokenizer's, id for id, so a delimiter
the grammar forces is the id the parser waits for (for a gated format), or the same
characters the parser matches as text (for an ungated one). XGrammar is optional (the
`grammar` extra): without it `GrammarConstraint.load()` returns None and the embedded
engine runs unconstrained, which the server reports at startup.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from toolwire.tokenizer import Tokenizer

__all__ = ["GrammarConstraint", "SequenceConstraint"]


class SequenceConstraint:
    """The grammar state of one output sequence."""

    def __init__(self, matcher: Any, bitmask: Any, vocab_size: int) -> None:
        self._matcher = matcher
        self._bitmask = bitmask
        self._words = bitmask.numpy().view(np.uint8)
        self._vocab_size = vocab_size

    def mask(self, scores: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Forbid, in place, every id the grammar does not allow next."""
        if self._matcher.fill_next_token_bitmask(self._bitmask):
            allowed = np.unpackbits(self._words, bitorder="little")[: len(scores)]
            scores[allowed == 0] = -np.inf
        return scores

    def accept(self, token_id: int) -> bool:
        """Advance by one sampled id; False when the grammar rejects it."""
        return bool(self._matcher.accept_token(token_id))

    @property
    def finished(self) -> bool:
        """The grammar is complete and only a stop id may follow."""
        return bool(self._matcher.is_terminated())


class GrammarConstraint:
    """Compiles structural tags against one vocabulary."""

    def __init__(self, xgrammar: Any, tokenizer: Tokenizer, stop_ids: Iterable[int]) -> None:
        self._xgr = xgrammar
        size = tokenizer.vocab_size
        vocab = tokenizer.backend.get_vocab(with_added_tokens=True)
        encoded = [""] * size
        for text, index in vocab.items():
            if 0 <= index < size:
                encoded[index] = text
        info = xgrammar.TokenizerInfo(
            encoded,
            xgrammar.VocabType.BYTE_LEVEL,
            vocab_size=size,
            stop_token_ids=sorted(stop_ids),
        )
        self._info = info
        # No compiler-side cache: the server keeps compiled grammars in its own cache,
        # bounded in entries and bytes (`server.grammars`). One thread per compile:
        # compiles run beside generation, which must keep its cores.
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    @classmethod
    def load(cls, tokenizer: Tokenizer, stop_ids: Iterable[int]) -> GrammarConstraint | None:
        """A constraint compiler, or None when XGrammar is not installed."""
        try:
            import xgrammar
        except ImportError:
            return None
        return cls(xgrammar, tokenizer, stop_ids)

    def compile(self, tag: Mapping[str, Any]) -> Any:
        """The compiled grammar (token masks over this vocabulary) of a structural tag;
        raises ValueError when the tag does not compile. Slow: seconds for big tool
        sets; thread-safe (XGrammar releases the GIL while it compiles)."""
        try:
            return self._compiler.compile_structural_tag(json.dumps(tag))
        except Exception as exc:  # XGrammar raises several types for a bad tag
            raise ValueError(f"structural tag does not compile: {exc}") from exc

    def start(self, tag: Mapping[str, Any], compiled: Any = None) -> SequenceConstraint:
        """A fresh matcher for one sequence, from `compiled` (the tag's compiled grammar)
        or by compiling `tag`; raises ValueError when the tag does not compile."""
        if compiled is None:
            compiled = self.compile(tag)
        matcher = self._xgr.GrammarMatcher(compiled)
        bitmask = self._xgr.allocate_token_bitmask(1, self._info.vocab_size)
        return SequenceConstraint(matcher, bitmask, self._info.vocab_size)
