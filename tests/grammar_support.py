"""Helpers for the structural-tag tests: BFCL tool sets, compiling, matching, walking.

Two backends run the same checks: XGrammar (the structural tag) and llguidance (the
same language as Lark, `toolwire.grammar.lark_grammar`). `constraint(backend, ...)`
builds and compiles a request's grammar on either; `Matcher` is the one interface
the checks use (accept an id, the allowed ids, complete, fork).

Walking: from the compiled grammar's token mask at each step, a seeded random choice
among the allowed tokens. Lengths are bounded: after `budget` tokens the walk prefers
the end of output (a stop token) when the grammar allows it, and otherwise tokens that
close structure (quotes, brackets, tags), so every walk ends quickly.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pytest

from tests.data import data_dir, needs
from toolwire import Tokenizer
from toolwire.grammar import lark_grammar_with_reason, structural_tag_with_reason
from toolwire.grammar.guidance import ll_tokenizer, llguidance_module
from toolwire.grammar.preflight import tokenizer_info


class _XGrammar:
    """`xgrammar`, imported on first use: a test that reaches for it without the
    `grammar` extra is skipped (the reason naming the extra), the module's other
    tests run."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name.startswith("pytest"):  # pytest collecting looks
            raise AttributeError(name)
        return getattr(needs("xgrammar"), name)


xgr: Any = _XGrammar()

#: The constraint backends the grammar checks run on.
BACKENDS = ("xgrammar", "llguidance")

BFCL_FILES = (
    "BFCL_v4_simple_python.json",
    "BFCL_v4_multiple.json",
    "BFCL_v4_parallel.json",
    "BFCL_v4_parallel_multiple.json",
)


def _lines(path: Any) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


@cache
def bfcl() -> list[tuple[str, list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]]:
    """(id, tools, one ground-truth list of calls) for every BFCL case with an answer."""
    root = data_dir() / "corpora" / "bfcl"
    out = []
    for name in BFCL_FILES:
        answers = {a["id"]: a["ground_truth"] for a in _lines(root / "possible_answer" / name)}
        for case in _lines(root / name):
            truth = answers.get(case["id"])
            if truth is None:
                continue
            calls = []
            for call in truth:
                ((fn, args),) = call.items()
                chosen = {k: v[0] for k, v in args.items() if v and v[0] != ""}
                calls.append((fn, chosen))
            out.append((case["id"], case["function"], calls))
    return out


#: Each vocabulary's compiler keeps at most this much of compiled grammars, a few (one
#: holds token masks of the vocabulary's size, about 3.5 MB on Qwen3's: unbounded, the
#: agreement tests held gigabytes).
CACHE_BYTES = 16 << 20


@cache
def compile_for(tokenizer: Tokenizer) -> Any:
    """One compiler per vocabulary for the session, its cache bounded."""
    return xgr.GrammarCompiler(
        tokenizer_info(tokenizer), max_threads=2, cache_limit_bytes=CACHE_BYTES
    )


def release(tokenizer: Tokenizer) -> None:
    """Drop what the grammars built for `tokenizer`'s vocabulary: XGrammar's compiler and
    TokenizerInfo, llguidance's tokenizer (about 120 MB each on a 150k vocabulary), the
    walks' id pools. The agreement tests run one format after another and release each
    when they move on, so the session never holds every vocabulary's at once."""
    from toolwire.grammar import guidance, preflight

    compile_for.cache_clear()
    texts.cache_clear()
    _pools.cache_clear()
    _packed_whole.cache_clear()
    preflight._INFOS.pop(tokenizer, None)
    guidance._BUILT.pop(tokenizer, None)
    guidance._BY_VOCABULARY.clear()


def compile_tag(tag: dict[str, Any], tokenizer: Tokenizer) -> Any:
    return compile_for(tokenizer).compile_structural_tag(json.dumps(tag))


def accepts(compiled: Any, ids: list[int]) -> bool:
    """The matcher accepts every id and the grammar is complete at the end."""
    matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return all(matcher.accept_token(i) for i in ids) and bool(matcher.is_completed())


class Matcher:
    """One sequence's grammar state, on either backend."""

    def __init__(self, backend: str, state: Any, vocab_size: int) -> None:
        self.backend = backend
        self._state = state
        self._size = vocab_size
        self._bitmask = xgr.allocate_token_bitmask(1, vocab_size) if backend == "xgrammar" else None

    def accept(self, token: int) -> bool:
        if self.backend == "xgrammar":
            return bool(self._state.accept_token(token))
        return bool(self._state.consume_token(token))

    def packed(self, size: int) -> np.ndarray:
        """The mask of allowed ids, packed (bit i of byte b: id 8b + i), `size` bytes."""
        if self.backend == "xgrammar":
            self._state.fill_next_token_bitmask(self._bitmask)
            words = self._bitmask[0].numpy().view(np.uint8)
        else:
            words = np.frombuffer(self._state.compute_bitmask(), dtype=np.uint8)
        if len(words) < size:
            words = np.concatenate([words, np.zeros(size - len(words), dtype=np.uint8)])
        return words[:size]

    def allowed(self) -> np.ndarray:
        """The mask of allowed ids (0/1 per id of the vocabulary)."""
        words = self.packed((self._size + 7) // 8)
        return np.unpackbits(words, bitorder="little")[: self._size]

    def completed(self) -> bool:
        """The grammar may end here."""
        if self.backend == "xgrammar":
            return bool(self._state.is_completed())
        return bool(self._state.is_accepting())

    def terminated(self) -> bool:
        """Nothing but a stop id may follow (a stop token was taken, or all is written)."""
        if self.backend == "xgrammar":
            return bool(self._state.is_terminated())
        stopped = bool(self._state.is_stopped())
        # A matcher that stopped for its limits (lexer or parser too complex) or an
        # error is a failure, never an end of output.
        assert self._state.stop_reason() in ("NotStopped", "NoExtension", "EndOfSentence"), (
            self._state.stop_reason(),
            self._state.get_error()[:300],
        )
        return stopped

    def fork(self) -> Matcher:
        copy = self._state.fork() if self.backend == "xgrammar" else self._state.deep_copy()
        return Matcher(self.backend, copy, self._size)


@dataclass(frozen=True)
class Compiled:
    """A request's grammar compiled on one backend."""

    backend: str
    grammar: Any
    tokenizer: Tokenizer
    token_level: bool
    #: Ids that end the output (a stop token).
    stops: frozenset[int]

    def matcher(self, *, terminate_without_stop_token: bool = False) -> Matcher:
        size = self.tokenizer.vocab_size
        if self.backend == "xgrammar":
            state = xgr.GrammarMatcher(
                self.grammar, terminate_without_stop_token=terminate_without_stop_token
            )
            return Matcher("xgrammar", state, size)
        return Matcher("llguidance", self.grammar.deep_copy(), size)


def need(backend: str) -> None:
    """Skip the test when `backend` is not installed."""
    if backend == "llguidance" and llguidance_module() is None:
        pytest.skip("llguidance is not installed (the grammar extra)")


def constraint(
    backend: str, fmt: str, tok: Tokenizer, tools: Any, *, text_level: bool = False, **kw: Any
) -> Compiled | None:
    """The request's grammar compiled on `backend` (token level where the format is
    gated by `tok`, unless `text_level`), or None when that backend gives none."""
    tokenizer = None if text_level else tok
    if backend == "xgrammar":
        result = structural_tag_with_reason(fmt, tools, tokenizer=tokenizer, **kw)
        if result.tag is None:
            return None
        stops = set(tok.eos_ids) or set(tokenizer_info(tok).stop_token_ids)
        return Compiled(
            backend, compile_tag(result.tag, tok), tok, result.token_level, frozenset(stops)
        )
    lark = lark_grammar_with_reason(fmt, tools, tokenizer=tokenizer, **kw)
    if lark.lark is None:
        return None
    llg = llguidance_module()
    tokenizer_ll = ll_tokenizer(tok)
    grammar = llg.LLMatcher(tokenizer_ll, llg.LLMatcher.grammar_from_lark(lark.lark), log_level=0)
    assert not grammar.is_error(), grammar.get_error()
    return Compiled(backend, grammar, tok, lark.token_level, frozenset(tokenizer_ll.eos_tokens))


def accepts_all(compiled: Compiled, ids: list[int]) -> bool:
    """The matcher accepts every id and the grammar is complete at the end."""
    matcher = compiled.matcher(terminate_without_stop_token=True)
    return all(matcher.accept(i) for i in ids) and matcher.completed()


@cache
def texts(tokenizer: Tokenizer) -> list[str]:
    """Each id's text alone (`tokenizer.decode([id])`), in id order: one batch through
    the `tokenizers` backend where there is one."""
    ids = [[token] for token in range(tokenizer.vocab_size)]
    backend = getattr(tokenizer, "backend", None)
    if backend is not None and hasattr(backend, "decode_batch"):
        return list(backend.decode_batch(ids, skip_special_tokens=False))
    return [tokenizer.decode(one) for one in ids]


@cache
def _pools(tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(ids whose text is complete UTF-8, short ids that close structure).

    Walks draw only complete-text ids: a byte fragment that never completes is not
    something a model writes, and it is no grammar question (the parser's handling of
    a fragment right before a delimiter id is a detokenization matter).
    """
    whole = np.zeros(tokenizer.vocab_size, dtype=bool)
    closers = []
    for token, text in enumerate(texts(tokenizer)):
        if not text or "\ufffd" in text:
            continue
        whole[token] = True
        if len(text) <= 3 and any(c in text for c in '"}]>\n,<0123456789'):
            closers.append(token)
    closers += list(tokenizer.added_ids)
    return whole, np.array(sorted(set(closers)), dtype=np.int64)


@cache
def _packed_whole(tokenizer: Tokenizer) -> np.ndarray:
    """`_pools`' complete-text ids as a bitmask laid out as XGrammar's (bit i of byte b:
    id 8b + i), so each step masks a few thousand bytes, not one entry per id; padded
    to whole 64-bit words, which `_Allowed` counts in."""
    whole, _ = _pools(tokenizer)
    packed = np.packbits(whole, bitorder="little")
    return np.concatenate([packed, np.zeros(-len(packed) % 8, dtype=np.uint8)])


class _Allowed:
    """One step's token mask: which ids the grammar allows, and its complete-text ids
    in id order (as `np.flatnonzero` would list them), counted a 64-bit word at a time
    (id 64w + j is bit j of word w, the bytes read little-endian)."""

    def __init__(self, raw: np.ndarray, whole: np.ndarray) -> None:
        self.raw = raw
        self.masked = (raw & whole).view("<u8")
        self.total = int(np.bitwise_count(self.masked).sum(dtype=np.int64))

    def has(self, token: int) -> bool:
        return bool((self.raw[token >> 3] >> (token & 7)) & 1)

    def which(self, tokens: np.ndarray) -> np.ndarray:
        return ((self.raw[tokens >> 3] >> (tokens & 7)) & 1).astype(bool)

    def nth(self, n: int) -> int:
        """The `n`-th allowed complete-text id."""
        counts = np.bitwise_count(self.masked)
        ends = np.cumsum(counts, dtype=np.int64)
        word = int(np.searchsorted(ends, n, side="right"))
        bits = int(self.masked[word])
        for _ in range(n - int(ends[word] - counts[word])):
            bits &= bits - 1  # drop the lowest set bit
        if not bits:
            raise AssertionError("no such bit")
        return word * 64 + (bits & -bits).bit_length() - 1


def walk(
    compiled: Compiled,
    tokenizer: Tokenizer,
    rng: random.Random,
    *,
    prefer: tuple[int, ...] = (),
    finish: tuple[int, ...] = (),
    sequences: tuple[tuple[int, ...], ...] = (),
    openers: tuple[tuple[int, ...], ...] = (),
    budget: int = 30,
    limit: int = 500,
) -> list[int] | None:
    """One output generated by the grammar; None when it did not end within `limit`.

    `prefer`: ids drawn more often early (call openers), never once past `budget`;
    `finish`: ids drawn more often past `budget` (closing delimiters); `sequences`: id
    runs past `budget` continued once begun (texts that close values, spelled);
    `openers`: id runs begun now and then before `budget` (a text-level call opener,
    spelled, which random tokens would almost never write)."""
    matcher = compiled.matcher()
    stops = compiled.stops
    _, closers = _pools(tokenizer)
    whole = _packed_whole(tokenizer)
    far = closers[~np.isin(closers, prefer)]
    out: list[int] = []
    pending: list[int] = []
    while len(out) < limit:
        allowed = _Allowed(matcher.packed(len(whole)), whole)
        if allowed.total == 0:
            return None
        stop = [s for s in stops if allowed.has(s)]
        late = len(out) >= budget
        if stop and (late or rng.random() < 0.03):
            return out
        wanted = [p for p in (finish if late else prefer) if allowed.has(p)]
        if pending and not allowed.has(pending[0]):
            pending = []
        if not late and openers and not pending and rng.random() < 0.1:
            begun = [q for q in openers if allowed.has(q[0])]
            pending = list(rng.choice(begun)) if begun else []
        if late and not (pending and allowed.has(pending[0])):
            begun = [q for q in sequences if allowed.has(q[0])]
            pending = list(rng.choice(begun)) if begun and rng.random() < 0.5 else []
        if pending and allowed.has(pending[0]):
            choice = pending.pop(0)
        elif wanted and rng.random() < (0.7 if late else 0.15):
            choice = rng.choice(wanted)
        elif late:
            near = far[allowed.which(far)]
            if len(near):
                choice = int(near[rng.randrange(len(near))])
            else:
                choice = allowed.nth(rng.randrange(allowed.total))
        else:
            choice = allowed.nth(rng.randrange(allowed.total))
        if choice in stops:
            return out
        if not matcher.accept(choice):
            raise AssertionError(f"the matcher refused an allowed token {choice}")
        if matcher.terminated():
            # XGrammar: a stop token it detected (no eos_ids known), not output;
            # llguidance: the grammar is complete and nothing may follow this id.
            return [*out, choice] if compiled.backend == "llguidance" else out
        out.append(choice)
    return None
