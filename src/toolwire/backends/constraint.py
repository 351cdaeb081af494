"""Grammars applied in-process: XGrammar's or llguidance's matcher as a logits mask.

Data flow, per output token::

    constraint --compile (once per grammar; the server caches it)--> compiled grammar
    logits --mask()--> logits with every id the grammar forbids set to -inf
    sampled id --accept()--> matcher advances; `finished` once the grammar is complete

Two compilers, one interface (`compile`, `start`): `GrammarConstraint` takes XGrammar
structural tags; `GuidanceConstraint` takes llguidance grammars
(`{"grammars": [{"lark_grammar": ...}]}`, `backends.grammar_backend.GUIDANCE`). Its
tokenizer (llguidance's view of the vocabulary, seconds to build for a big one) is
built once, on a thread started with the engine, so no request waits for it unless it
arrives within the first seconds (then its compile, off the generation thread, waits).

The vocabulary handed to either is the served tokenizer's, id for id, so a delimiter
the grammar forces is the id the parser waits for (for a gated format), or the same
characters the parser matches as text (for an ungated one). Both are optional (the
`grammar` extra): without them `load()` returns None and the embedded engine runs
unconstrained, which the server reports at startup.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from threading import Thread
from typing import Any

import numpy as np
import numpy.typing as npt

from toolwire.backends.grammar_backend import lark_of
from toolwire.tokenizer import Tokenizer

__all__ = ["GrammarConstraint", "GuidanceConstraint", "SequenceConstraint", "guidance_grammar"]


def guidance_grammar(constraint: Mapping[str, Any]) -> str | None:
    """The Lark grammar of a constraint in llguidance's form, else None (an XGrammar
    structural tag)."""
    return lark_of(constraint)


class SequenceConstraint:
    """The grammar state of one output sequence."""

    def __init__(
        self,
        fill: Callable[[], bool],
        words: npt.NDArray[np.uint8],
        accept: Callable[[int], bool],
        finished: Callable[[], bool],
    ) -> None:
        self._fill = fill
        self._words = words
        self._accept = accept
        self._finished = finished

    def mask(self, scores: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Forbid, in place, every id the grammar does not allow next."""
        if self._fill():
            allowed = np.unpackbits(self._words, bitorder="little")[: len(scores)]
            scores[allowed == 0] = -np.inf
        return scores

    def accept(self, token_id: int) -> bool:
        """Advance by one sampled id; False when the grammar rejects it."""
        return self._accept(token_id)

    @property
    def finished(self) -> bool:
        """The grammar is complete and only a stop id may follow."""
        return self._finished()


class GrammarConstraint:
    """Compiles structural tags against one vocabulary (XGrammar)."""

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
        return SequenceConstraint(
            lambda: bool(matcher.fill_next_token_bitmask(bitmask)),
            bitmask.numpy().view(np.uint8),
            lambda token: bool(matcher.accept_token(token)),
            lambda: bool(matcher.is_terminated()),
        )


class GuidanceConstraint:
    """Compiles llguidance grammars against one vocabulary. Its tokenizer is built on a
    thread started here (seconds for a 150k vocabulary) and cached per vocabulary."""

    def __init__(self, llguidance: Any, tokenizer: Tokenizer, stop_ids: Iterable[int]) -> None:
        from toolwire.grammar.guidance import ll_tokenizer

        self._llg = llguidance
        self._size = tokenizer.vocab_size
        self._tokenizer: Future[Any] = Future()
        stops = sorted(stop_ids)

        def build() -> None:
            try:
                self._tokenizer.set_result(ll_tokenizer(tokenizer, stops))
            except Exception as exc:  # reported by every compile that needs it
                self._tokenizer.set_exception(exc)

        Thread(target=build, name="llguidance-tokenizer", daemon=True).start()

    @classmethod
    def load(cls, tokenizer: Tokenizer, stop_ids: Iterable[int]) -> GuidanceConstraint | None:
        """A constraint compiler, or None when llguidance is not installed or the
        vocabulary is not a Hugging Face one."""
        try:
            import llguidance
        except ImportError:
            return None
        if not hasattr(getattr(tokenizer, "backend", None), "to_str"):
            return None
        return cls(llguidance, tokenizer, stop_ids)

    def compile(self, grammar: Mapping[str, Any]) -> Any:
        """The grammar compiled for this vocabulary (a matcher no sequence uses: each
        sequence starts from a copy); raises ValueError when it does not compile.
        Waits for the tokenizer while it is being built."""
        lark = guidance_grammar(grammar)
        if lark is None:
            raise ValueError("not an llguidance grammar")
        serialized = self._llg.LLMatcher.grammar_from_lark(lark)
        matcher = self._llg.LLMatcher(self._tokenizer.result(), serialized, log_level=0)
        if matcher.is_error():
            raise ValueError(f"grammar does not compile: {matcher.get_error()[:500]}")
        return matcher

    def start(self, grammar: Mapping[str, Any], compiled: Any = None) -> SequenceConstraint:
        """A fresh matcher for one sequence, from `compiled` or by compiling."""
        matcher = (compiled if compiled is not None else self.compile(grammar)).deep_copy()
        words = np.zeros(((self._size + 31) // 32) * 4, dtype=np.uint8)

        def fill() -> bool:
            matcher.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
            return True

        return SequenceConstraint(
            fill,
            words,
            lambda token: bool(matcher.consume_token(token)),
            lambda: bool(matcher.is_stopped()),
        )
