"""Tokenizer loading and incremental detokenization on real vocabularies."""

from __future__ import annotations

import random

import pytest
from tokenizers.decoders import DecodeStream

from tests.conftest import tokenizer_for
from toolwire import UsageError, load_tokenizer

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
