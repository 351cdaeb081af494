"""Tokenizer loading and incremental detokenization on real vocabularies."""

from __future__ import annotations

import random

import pytest
from tokenizers.decoders import DecodeStream

from tests import cases
from tests.conftest import data_dir, tokenizer_for
from toolwire import Message, Parser, Tokenizer, UsageError, load_tokenizer

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
    import sentencepiece
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
