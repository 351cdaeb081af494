"""llguidance, when installed (the `grammar` extra): its tokenizer per vocabulary, checks.

    ll_tokenizer(tok, stop_ids)   llguidance's `LLTokenizer` of the served vocabulary,
                                  every added token special; built once per
                                  (vocabulary, stop ids) and cached: seconds for a
                                  150k vocabulary, so engines build it at start-up,
                                  off the request path
    upstream_specials(tok)        the added ids llguidance's own Hugging Face reading
                                  (what vLLM and SGLang build) takes as special
    check_lark(text)              llguidance's error for a Lark grammar, or None
    serialized(text)              the grammar as llguidance's JSON (`{"grammars": ...}`)

Special tokens are what keeps delimiter ids out of values: llguidance's lexemes are
bytes and special tokens are not (`grammar.lark`). Its Hugging Face reading takes an
added token as special when the vocabulary says so or when it looks like `<...>`,
so DeepSeek's `｜DSML｜` or MiniMax M3's `]<]minimax[>[` (added, not special) would be
ordinary tokens a text lexeme may write. `ll_tokenizer` marks every added token
special; an upstream's tokenizer is what it is (`upstream_specials`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from functools import lru_cache
from typing import Any

from toolwire.tokenizer import Tokenizer

__all__ = [
    "available",
    "check_lark",
    "ll_tokenizer",
    "llguidance_module",
    "serialized",
    "upstream_specials",
]


@lru_cache(maxsize=1)
def _llguidance() -> Any:
    try:
        return importlib.import_module("llguidance")
    except ImportError:
        return None


def llguidance_module() -> Any:
    """The `llguidance` module, or None when it is not installed."""
    return _llguidance()


def available() -> bool:
    """True when llguidance can be imported."""
    return _llguidance() is not None


def serialized(lark: str) -> str:
    """A Lark grammar as llguidance's grammar JSON (what `LLMatcher` takes)."""
    llg = _require()
    return str(llg.LLMatcher.grammar_from_lark(lark))


def check_lark(lark: str) -> str | None:
    """llguidance's error for this Lark grammar, or None when it is valid (or
    llguidance is not installed). Cached by the text."""
    if _llguidance() is None:
        return None
    return _check(lark)


@lru_cache(maxsize=512)
def _check(lark: str) -> str | None:
    llg = _llguidance()
    error = llg.LLMatcher.validate_grammar(llg.LLMatcher.grammar_from_lark(lark))
    return str(error)[:500] if error else None


#: Token masks llguidance precomputes besides its own (JSON strings, whitespace): text
#: without `<`, which every text value and free text holds nearly all of (a value ends
#: at a `<...` delimiter). Masks inside such text cost a tenth with it.
SLICES = ("[^<]+",)

#: Built once per (tokenizer, what): dropped with the tokenizer.
_BUILT: weakref.WeakKeyDictionary[Tokenizer, dict[Hashable, Any]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
_BUILDING: dict[tuple[int, Hashable], threading.Event] = {}
#: The last few LLTokenizers by vocabulary content: engines re-read the same GGUF or
#: folder into new Tokenizer objects; each vocabulary is built once.
_BY_VOCABULARY: OrderedDict[tuple[str, int, tuple[int, ...]], Any] = OrderedDict()
_VOCABULARIES = 4


def _once(tokenizer: Tokenizer, what: Hashable, build: Callable[[], Any]) -> Any:
    """`build()` for (tokenizer, what), once: later callers get the cached result, and a
    caller asking while another thread builds it waits for that build."""
    key = (id(tokenizer), what)
    while True:
        with _LOCK:
            built = _BUILT.get(tokenizer, {})
            if what in built:
                return built[what]
            event = _BUILDING.get(key)
            if event is None:
                _BUILDING[key] = event = threading.Event()
                break
        event.wait()
    try:
        value = build()
        with _LOCK:
            _BUILT.setdefault(tokenizer, {})[what] = value
        return value
    finally:
        with _LOCK:
            _BUILDING.pop(key, None)
        event.set()


def ll_tokenizer(tokenizer: Tokenizer, stop_ids: Iterable[int] | None = None) -> Any:
    """llguidance's tokenizer for `tokenizer`'s vocabulary, every added token special,
    with `stop_ids` (default: the tokenizer's end-of-sequence ids) as its EOS tokens.
    Built once and cached. Raises ImportError without llguidance, ValueError for a
    tokenizer without a Hugging Face backend."""
    llg = _require()
    stops = tuple(sorted(set(tokenizer.eos_ids if stop_ids is None else stop_ids)))

    def build() -> Any:
        text = _tokenizer_json(tokenizer)
        key = (hashlib.sha256(text.encode()).hexdigest(), tokenizer.vocab_size, stops)
        with _LOCK:
            shared = _BY_VOCABULARY.get(key)
        if shared is not None:  # the same vocabulary under another Tokenizer object
            return shared
        built = llg.LLTokenizer(
            _all_added_special(text),
            n_vocab=tokenizer.vocab_size,
            eos_token=list(stops) or None,
            slices=[*llg.LLTokenizer.general_slices(), *SLICES],
        )
        with _LOCK:
            _BY_VOCABULARY[key] = built
            while len(_BY_VOCABULARY) > _VOCABULARIES:
                _BY_VOCABULARY.popitem(last=False)
        return built

    return _once(tokenizer, ("tokenizer", stops), build)


def upstream_specials(tokenizer: Tokenizer) -> frozenset[int]:
    """The added ids that llguidance, reading `tokenizer`'s `tokenizer.json` as vLLM and
    SGLang do, takes as special tokens. Cached per tokenizer (seconds to build)."""
    llg = _require()

    def build() -> frozenset[int]:
        reading = llg.LLTokenizer(_tokenizer_json(tokenizer), n_vocab=tokenizer.vocab_size)
        return frozenset(i for i in tokenizer.added_ids if reading.is_special_token(i))

    found: frozenset[int] = _once(tokenizer, "upstream specials", build)
    return found


_ADDED = re.compile(r'"added_tokens"\s*:\s*')


def _all_added_special(text: str) -> str:
    """`tokenizer.json` with every added token marked special (so no text lexeme can
    write its id). Only the `added_tokens` array is decoded and re-encoded: the whole
    document (a 150k vocabulary and its merges) would take a second each way."""
    found = _ADDED.search(text)
    if found is None:
        return text
    added, end = json.JSONDecoder().raw_decode(text, found.end())
    if not isinstance(added, list):
        return text
    for token in added:
        if isinstance(token, dict):
            token["special"] = True
    return text[: found.end()] + json.dumps(added) + text[end:]


def _tokenizer_json(tokenizer: Tokenizer) -> str:
    backend = getattr(tokenizer, "backend", None)
    if backend is None or not hasattr(backend, "to_str"):
        raise ValueError("llguidance needs a Hugging Face tokenizer (tokenizer.json)")
    return str(backend.to_str())


def _require() -> Any:
    llg = _llguidance()
    if llg is None:
        raise ImportError("llguidance is not installed (pip install 'toolwire[grammar]')")
    return llg
