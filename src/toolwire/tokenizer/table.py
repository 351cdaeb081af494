"""Decoding by table: for vocabularies where every id stands for fixed bytes.

Byte-level BPE (Qwen, Llama 3, DeepSeek, gpt-oss), tekken and SentencePiece pieces
all map each id to a fixed byte string, so incremental decoding is a table lookup plus
Python's incremental UTF-8 decoder: a character split across ids is held until it
completes. Both tokenizer implementations build their tables and share this decoder.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping

__all__ = ["TableDetokenizer"]


class TableDetokenizer:
    """A table of complete strings, and a UTF-8 decoder for the rest: `raw` need hold
    only the bytes of the ids without an entry in `text` (the others' bytes are their
    text, encoded), so a vocabulary's bytes need not be kept twice."""

    __slots__ = ("_bytes", "_decoder", "_text", "pending")

    def __init__(self, text: Mapping[int, str], raw: Mapping[int, bytes]) -> None:
        self._text = text
        self._bytes = raw
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        #: True while an incomplete character is held.
        self.pending = False

    def step(self, token_id: int) -> str:
        if not self.pending:
            s = self._text.get(token_id)
            if s is not None:
                return s
        raw = self._bytes.get(token_id)
        if raw is None:
            s = self._text.get(token_id)
            if s is None and type(token_id) is not int:  # only unknown ids pay this check
                raise TypeError(f"token ids are integers, got {type(token_id).__name__}")
            raw = s.encode() if s is not None else b""
        out = self._decoder.decode(raw)
        self.pending = self._decoder.getstate()[0] != b""
        return out

    def flush(self) -> str:
        self.pending = False
        return self._decoder.decode(b"", final=True)
