"""A tiny synthetic vocabulary, built in code, so the invariant suite needs no data.

    the registered formats' delimiters (`Format.delimiters`)   -> added tokens
    a few turn markers                                         -> special added tokens
    a small corpus (prose, JSON, Python, the formats' renders) -> byte-level BPE merges

The base model is byte-level BPE (GPT-2's byte alphabet), so every string encodes and
decodes exactly, with `Tokenizer`'s byte-table detokenizer; the merges keep the ids of
the test vectors short (a few characters per id, as with real vocabularies), which
keeps the every-split tests cheap. Every registered format's delimiters are tokens, so
each format with a call delimiter is gated on it (`llama3_json` and `pythonic` have
none and stay text-gated); a format registered later is covered the same way.
Training is deterministic: the same formats give the same vocabulary.
"""

from __future__ import annotations

import re
from functools import cache

from tokenizers import AddedToken, decoders, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as Backend

from peers.vocab import DERIVED, NOT_SPECIAL
from toolwire import Tokenizer, formats

#: Special tokens that are no format's delimiter (turn markers, end of text): the
#: parser must drop them wherever they appear.
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>")
EOS = "<|endoftext|>"
#: At most this many ordinary ids learned beyond the 256 bytes (the corpus is small:
#: training stops at about 300).
MERGES = 768

_PROSE = """\
Let me check that for you. The user wants the weather in Paris, so I will call a tool.
Meanwhile, here is what I found: the result of the search, the time and the city.
Sure! I can help with that; first I need to look up a few things, then answer.
"""
_JSON = [
    '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "unit": "c"}}',
    '{"query": "a \\"quoted\\" <b>x</b>", "limit": 10, "exact": true, "filters": null}',
    '[{"name": "search", "parameters": {"tags": ["x", "y"], "value": 2.5, "ok": false}}]',
    "[get_weather(city='Paris', days=3), search(query=\"x\", limit=None, exact=True)]",
]


def _corpus() -> list[str]:
    """Text to learn merges from: prose, JSON and Python, and every format's output."""
    out = [*_PROSE.splitlines(), *_JSON]
    calls = [
        ("get_weather", {"city": "Paris", "days": 3}),
        ("search", {"query": "word text", "limit": 10, "exact": True, "tags": ["x"]}),
        ("get_time", {}),
    ]
    for name in formats.names():
        fmt = formats.get(name)
        out.append(fmt.render_output(reasoning="I will call a tool.", content="Sure.", calls=calls))
    # Without the delimiters: no ordinary token may spell one (spelled text must stay
    # apart from the added tokens, as in real vocabularies).
    cut = re.compile("|".join(re.escape(d) for d in sorted(delimiters(), key=len, reverse=True)))
    return [piece for text in out for piece in cut.split(text)]


def delimiters() -> list[str]:
    """Every registered format's delimiters, once each, in registry order, as the
    added tokens that spell them: a delimiter holding one of a family's own added
    tokens (`peers.vocab.DERIVED`: Kimi K3's `<|open|>`, MiniMax M3's namespace
    token, Inkling's block markers) is that token with text around it, as in the
    family's vocabulary; any other delimiter is one token."""
    pieces = sorted(
        {t for tokens, _, _ in DERIVED.values() for t in tokens if t}, key=len, reverse=True
    )
    split = re.compile("(" + "|".join(re.escape(t) for t in pieces) + ")")
    out: dict[str, None] = {}
    for name in formats.names():
        fmt = formats.get(name)
        for delimiter in (*fmt.delimiters, *fmt.keep):
            parts = [p for p in split.split(delimiter) if p]
            tokens = [p for p in parts if p in pieces]
            out.update(dict.fromkeys(tokens if tokens else [delimiter]))
    return [d for d in out if d]


def family_tokens() -> list[str]:
    """The families' other added tokens (`peers.vocab.DERIVED`), special ones dropped
    by the parser where they stand (Inkling's `<|message_model|>`)."""
    taken = set(delimiters())
    every = (t for tokens, _, _ in DERIVED.values() for t in tokens)
    return [t for t in dict.fromkeys(every) if t and t not in taken]


def backend() -> Backend:
    """The `tokenizers` model: byte-level BPE, trained here, with the added tokens."""
    model = Backend(models.BPE())
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    model.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=256 + MERGES,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    model.train_from_iterator(_corpus(), trainer=trainer)
    ordinary = model.get_vocab_size()
    model.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    # A family's own tokens are special as in its vocabulary (Inkling's block markers
    # are dropped where they do not act); whole delimiters are plain added tokens.
    family = {t for tokens, _, _ in DERIVED.values() for t in tokens} - {
        t for plain in NOT_SPECIAL.values() for t in plain
    }
    vocab = model.get_vocab()
    extra = [t for t in family_tokens() if t not in vocab]  # one the model spells stays
    wanted = [*delimiters(), *extra]
    model.add_tokens([AddedToken(d, special=d in family, normalized=False) for d in wanted])
    added = model.get_added_tokens_decoder()
    assert min(added) == ordinary and len(added) == len(SPECIAL) + len(wanted), (
        "an added token is also an ordinary token of the trained model"
    )
    return model


@cache
def synthetic_tokenizer() -> Tokenizer:
    """The synthetic vocabulary as a `toolwire.Tokenizer` (built once per session)."""
    return Tokenizer(backend(), {"eos_token": EOS}, name="synthetic")
