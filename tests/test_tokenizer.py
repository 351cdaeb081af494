"""Tokenizer loading, the interface's two implementations, caches and detokenization."""

from __future__ import annotations

import gc
import json
import random
import weakref
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from tokenizers import AddedToken, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as Backend
from tokenizers.decoders import DecodeStream

from tests import cases
from tests.data import data_dir, tokenizer_for
from toolwire import Message, Parser, Tokenizer, UsageError, formats, lexicon, load_tokenizer
from toolwire.tokenizer import HuggingFaceTokenizer, MistralTokenizer

FAMILIES = ["qwen3", "deepseek_v3", "deepseek_v4", "gpt_oss", "llama3"]


@pytest.mark.parametrize("family", FAMILIES)
def test_detokenizer_matches_decodestream_on_random_ids(family: str) -> None:
    tok = tokenizer_for(family)
    rng = random.Random(family)
    ids = [rng.randrange(tok.vocab_size) for _ in range(2000)]
    ours = tok.detokenizer()
    text = "".join(ours.step(i) for i in ids) + ours.flush()
    stream = DecodeStream(skip_special_tokens=False)
    reference = "".join(stream.step(tok.backend, i) or "" for i in ids)
    assert text == reference


def test_character_split_across_ids_is_held_until_complete() -> None:
    tok = tokenizer_for("qwen3")
    ids = tok.encode("日本語")
    assert len(ids) >= 2  # at least one character spans ids in this vocabulary
    detok = tok.detokenizer()
    pieces = [detok.step(i) for i in tok.encode("語")]
    assert "".join(pieces) == "語"
    assert all("\ufffd" not in p for p in pieces)


def test_spelled_encoding_holds_no_added_token() -> None:
    tok = tokenizer_for("qwen3")
    text = "<tool_call>\n{}\n</tool_call><|im_end|><think>"
    matched = tok.encode(text)
    spelled = tok.encode(text, delimiters=False)
    assert {151657, 151658, 151645, 151667} <= set(matched)
    assert not set(spelled) & tok.added_ids
    assert tok.decode(spelled) == text == tok.decode(matched)


def test_vocabulary_facts() -> None:
    tok = tokenizer_for("qwen3")
    assert tok.token_id("<tool_call>") == 151657
    assert tok.token_id("<function=") is None
    assert 151645 in tok.special_ids and 151657 not in tok.special_ids
    assert tok.eos_ids == {151645}
    assert tok.chat_template and "<|im_start|>" in tok.chat_template


def test_missing_source_is_a_clear_error(tmp_path: object) -> None:
    with pytest.raises(UsageError, match="no such file"):
        load_tokenizer("/nonexistent/tokenizer")
    with pytest.raises(UsageError, match=r"tokenizer\.json"):
        load_tokenizer(str(tmp_path))


def _sentencepiece_vocabulary() -> Tokenizer:
    """Mistral's SentencePiece v7 vocabulary as a `tokenizers` backend, decoded the way
    Hugging Face decodes SentencePiece (▁ as a space, `<0xNN>` byte fallback): not
    byte-level, so toolwire detokenizes it through `DecodeStream`."""
    sentencepiece = pytest.importorskip("sentencepiece", reason="the mistral extra is absent")
    from tokenizers import AddedToken, decoders, normalizers
    from tokenizers import Tokenizer as Backend
    from tokenizers.models import BPE

    path = data_dir() / "tokenizers" / "mistral" / "mistral_instruct_tokenizer_241114.model.v7"
    sp = sentencepiece.SentencePieceProcessor(model_file=str(path))
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    unk = sp.id_to_piece(sp.unk_id())
    backend = Backend(BPE(vocab=vocab, merges=[], byte_fallback=True, unk_token=unk))
    backend.normalizer = normalizers.Sequence(
        [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
    )
    backend.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    controls = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.is_control(i)]
    backend.add_special_tokens([AddedToken(c, special=True) for c in controls])
    tok = Tokenizer(backend, name="mistral-v7-sentencepiece")
    tok.sp = sp  # type: ignore[attr-defined]
    return tok


@pytest.mark.parametrize("chunk", [1, 2, 100])
def test_decodestream_vocabularies_flush_an_unfinished_character(chunk: int) -> None:
    tok = _sentencepiece_vocabulary()
    assert tok.plain_texts() is None  # not byte-level: the DecodeStream path
    sp = tok.sp  # type: ignore[attr-defined]
    ids = sp.encode("Hello café 𝄞")
    byte_pieces = [i for i in ids if sp.is_byte(i)]
    assert len(byte_pieces) == 4  # 𝄞 is four byte-fallback ids
    tool_calls = tok.token_id("[TOOL_CALLS]")
    assert tool_calls is not None
    for output in (ids[:-2], [*ids[:-2], tool_calls, *sp.encode("get_time[ARGS]{}")]):
        parser = Parser("mistral", tok, tools=cases.TOOLS)
        events = []
        for start in range(0, len(output), chunk):
            events += parser.feed(output[start : start + chunk])
        msg = Message.from_events([*events, *parser.finish()])
        # What the stream still held at the end (or before the delimiter) is not lost:
        # the content is what decoding those ids gives, U+FFFD for the cut character.
        assert msg.content == tok.decode(ids[:-2])
        assert msg.content.endswith("café \ufffd\ufffd")


# -- the interface and its two implementations ------------------------------------------


def _byte_level_backend() -> Backend:
    """A tiny byte-level BPE vocabulary (one id per byte, no merges) with hermes'
    delimiters and an end-of-turn token added: no test data needed."""
    vocab = {c: b for b, c in enumerate(pre_tokenizers.ByteLevel.alphabet())}
    vocab = {c: i for i, c in enumerate(sorted(vocab, key=vocab.__getitem__))}
    backend = Backend(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_tokens([AddedToken("<tool_call>"), AddedToken("</tool_call>")])
    backend.add_special_tokens([AddedToken("<|im_end|>", special=True)])
    return backend


def _synthetic() -> Tokenizer:
    return HuggingFaceTokenizer(_byte_level_backend(), {"eos_token": "<|im_end|>"}, name="tiny")


@cache
def _mistral() -> Tokenizer:
    pytest.importorskip("mistral_common", reason="Mistral tokenizers need mistral-common")
    return load_tokenizer(data_dir() / "tokenizers" / "mistral" / "tekken_240718.json.gz")


IMPLEMENTATIONS: dict[str, tuple[type[Tokenizer], Callable[[], Tokenizer], str, str]] = {
    # name: (class, tokenizer, a delimiter that is one added token, its format)
    "hugging_face-tiny": (HuggingFaceTokenizer, _synthetic, "<tool_call>", "hermes"),
    "hugging_face-qwen3": (
        HuggingFaceTokenizer,
        lambda: tokenizer_for("qwen3"),
        "<tool_call>",
        "hermes",
    ),
    "mistral-tekken": (MistralTokenizer, _mistral, "[TOOL_CALLS]", "mistral"),
}


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_each_implementation_answers_the_whole_interface(name: str) -> None:
    cls, make, delimiter, fmt = IMPLEMENTATIONS[name]
    tok = make()
    assert type(tok) is cls and isinstance(tok, Tokenizer) and not cls.__abstractmethods__
    size = tok.vocab_size
    assert tok.special_ids <= tok.added_ids and tok.eos_ids <= tok.added_ids
    assert all(0 <= i < size for i in tok.added_ids)
    assert set(tok.added_tokens.values()) <= tok.added_ids
    eos = tok.token_string("eos_token")
    assert eos is not None and tok.added_tokens[eos] in tok.eos_ids
    assert tok.token_string("no_such_token") is None
    # Added tokens: text <-> id both ways, special or not as the vocabulary says.
    tid = tok.token_id(delimiter)
    assert tid is not None and tid in tok.added_ids and tok.token_text(tid) == delimiter
    assert tok.is_special(tid) == (tid in tok.special_ids)
    # Encoding: delimiters by id, or spelled from ordinary ids; both decode to the text.
    text = f"Hello café 日本 {delimiter} after"
    matched, spelled = tok.encode(text), tok.encode(text, delimiters=False)
    assert tid in matched and not set(spelled) & tok.added_ids
    assert tok.decode(matched) == tok.decode(spelled) == text
    assert tok.decode(matched, skip_special_tokens=True).startswith("Hello café")
    # Incremental decoding agrees with decode, id by id; plain_texts with the detokenizer.
    for ids in (matched, spelled):
        detok = tok.detokenizer()
        assert "".join(detok.step(i) for i in ids) + detok.flush() == text
    plain = tok.plain_texts()
    if plain is not None:
        for i in random.Random(name).sample(sorted(plain), min(200, len(plain))):
            assert i not in tok.added_ids and tok.detokenizer().step(i) == plain[i]
    assert isinstance(tok.config, dict)
    parser = Parser(fmt, tok, tools=cases.TOOLS)
    assert parser.gated


def test_mistral_has_no_backend_and_says_so() -> None:
    with pytest.raises(UsageError, match="no `tokenizers` backend"):
        _ = _mistral().backend


def test_calling_the_interface_builds_the_hugging_face_implementation() -> None:
    backend = _byte_level_backend()
    tok = Tokenizer(backend, {"eos_token": "<|im_end|>"}, name="tiny")
    assert type(tok) is HuggingFaceTokenizer and tok.name == "tiny"
    assert tok.eos_ids == {tok.added_tokens["<|im_end|>"]}


# -- what the caller passed is never changed -------------------------------------------


def _snapshot(backend: Backend) -> dict[str, Any]:
    return {
        "json": backend.to_str(),
        "size": backend.get_vocab_size(with_added_tokens=True),
        "added": {i: str(t) for i, t in backend.get_added_tokens_decoder().items()},
        "decoder": backend.decoder.__getstate__() if backend.decoder else None,
        "padding": backend.padding,
        "truncation": backend.truncation,
    }


def _declaring(backend: Backend, *extra: tuple[int, str]) -> dict[str, Any]:
    """A `tokenizer_config.json` declaring tokens the backend lacks (id, text)."""
    return {
        "eos_token": "<|im_end|>",
        "added_tokens_decoder": {str(i): {"content": t, "special": True} for i, t in extra},
    }


@pytest.mark.parametrize("settings", ["plain", "padding and truncation set"])
def test_a_callers_backend_is_unchanged(settings: str) -> None:
    backend = _byte_level_backend()
    if settings != "plain":
        backend.enable_padding(length=64, pad_id=3)
        backend.enable_truncation(max_length=64)
    size = backend.get_vocab_size(with_added_tokens=True)
    before = _snapshot(backend)
    tok = Tokenizer(backend, _declaring(backend, (size, "<|call|>"), (size + 1, "<|end|>")))
    assert _snapshot(backend) == before
    # The tokenizer still has what the config declares, matched by id.
    assert tok.token_id("<|call|>") == size and tok.token_id("<|end|>") == size + 1
    assert {size, size + 1} <= tok.special_ids and tok.vocab_size == size + 2
    assert tok.encode("a<|call|>b") == [*tok.encode("a"), size, *tok.encode("b")]
    # Encoding and detokenizing leave it alone too.
    tok.encode("x", delimiters=False)
    tok.detokenizer().step(0)
    assert _snapshot(backend) == before


def test_a_rejected_config_leaves_the_callers_backend_unchanged() -> None:
    backend = _byte_level_backend()
    size = backend.get_vocab_size(with_added_tokens=True)
    before = _snapshot(backend)
    with pytest.raises(UsageError, match="without gaps"):
        Tokenizer(backend, _declaring(backend, (size, "<|call|>"), (size + 5, "<|end|>")))
    assert _snapshot(backend) == before


def test_loading_adds_declared_tokens(tmp_path: Path) -> None:
    backend = _byte_level_backend()
    size = backend.get_vocab_size(with_added_tokens=True)
    (tmp_path / "tokenizer.json").write_text(backend.to_str(), encoding="utf-8")
    config = _declaring(backend, (size, "<|call|>"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    tok = load_tokenizer(tmp_path)
    assert tok.token_id("<|call|>") == size and size in tok.special_ids
    assert tok.eos_ids == {tok.added_tokens["<|im_end|>"]}


# -- per-vocabulary caches ---------------------------------------------------------------


def test_caches_are_shared_by_parsers_and_dropped_with_their_tokenizer() -> None:
    fmt = formats.get("hermes")
    tok = _synthetic()
    first = Parser(fmt, tok, tools=cases.TOOLS)
    assert first.gated
    assert lexicon.lexicon(fmt, tok) is lexicon.lexicon(fmt, tok)
    assert lexicon.tables(fmt, tok, "ids") is lexicon.tables(fmt, tok, "ids")
    assert lexicon.tables(fmt, tok, "ids") is not lexicon.tables(fmt, tok, "text")
    other = _synthetic()  # an equal vocabulary is another tokenizer: its own entries
    assert lexicon.lexicon(fmt, other) is not lexicon.lexicon(fmt, tok)
    events = Parser(fmt, tok, tools=cases.TOOLS).feed(
        tok.encode(
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
        )
    )
    assert Message.from_events(events).tool_calls[0].name == "get_weather"
    gc.collect()  # earlier garbage goes now, so only this tokenizer goes below
    held = len(lexicon._LEXICONS), len(lexicon._TABLES)
    gone = weakref.ref(tok)
    del tok, first, events
    gc.collect()
    assert gone() is None  # the caches do not keep a tokenizer alive
    assert (len(lexicon._LEXICONS), len(lexicon._TABLES)) == (held[0] - 1, held[1] - 1)
    assert lexicon.lexicon(fmt, other).gated_forms is not None
