"""Mistral vocabularies (tekken, SentencePiece): mistral-common's tokenizer behind `Tokenizer`.

Data flow::

    mistral-common's raw tokenizer (loaded by `toolwire.tokenizer.files`)
        -> MistralTokenizer
             .encode(text, delimiters=True)   control-token texts become their ids, as
                                              the model emits them; the text between
                                              them is encoded as mistral-common does
             .encode(text, delimiters=False)  mistral-common's own encoder, which never
                                              turns `[TOOL_CALLS]` text into the control
                                              id: spelled delimiters cannot be gated ones
             .detokenizer()                   id -> bytes table + incremental UTF-8

Every method is answered from mistral-common instead of a `tokenizers` backend (this
module never imports mistral-common: it receives the loaded object); `backend` raises
`UsageError`, so what needs a Hugging Face backend (XGrammar, prompt isolation) says
so instead of failing obscurely. Control tokens are the added and special tokens. Each
id maps to fixed bytes (tekken: its BPE bytes; SentencePiece: its piece with `▁` as a
space, `<0xNN>` as that byte), so decoding is the same table lookup plus incremental
UTF-8 as byte-level BPE (`TableDetokenizer`), and a character split across ids is held
until it completes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from toolwire.errors import UsageError
from toolwire.tokenizer.base import Detokenizer, Tokenizer
from toolwire.tokenizer.table import TableDetokenizer

__all__ = ["MistralTokenizer"]

_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


class MistralTokenizer(Tokenizer):
    """A mistral-common tokenizer behind toolwire's `Tokenizer` interface."""

    def __init__(self, raw: Any, *, name: str = "", chat_template: str | None = None) -> None:
        self._raw = raw
        specials = sorted(int(i) for i in raw.special_ids)
        # Control tokens' text -> id.
        added_tokens = {str(raw.id_to_piece(i)): i for i in specials}
        super().__init__(
            name=name,
            added_tokens=added_tokens,
            added_ids=frozenset(specials),
            special_ids=frozenset(specials),
            eos_ids=frozenset({int(raw.eos_id)}),
            chat_template=chat_template,
        )
        ordered = sorted(added_tokens, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(re.escape(t) for t in ordered) + ")")
        self._text_of = {i: t for t, i in added_tokens.items()}
        self._tables: tuple[dict[int, str], dict[int, bytes]] | None = None

    # -- vocabulary facts ------------------------------------------------------------

    @property
    def backend(self) -> Any:
        raise UsageError(f"{self.name}: a mistral-common tokenizer has no `tokenizers` backend")

    @property
    def config(self) -> Mapping[str, Any]:
        return {}

    @property
    def vocab_size(self) -> int:
        return int(self._raw.n_words)

    def token_text(self, token_id: int) -> str:
        special = self._text_of.get(token_id)
        if special is not None:
            return special
        return self._bytes()[1].get(token_id, b"").decode("utf-8", "replace")

    def token_string(self, key: str) -> str | None:
        ids = {"eos_token": self._raw.eos_id, "bos_token": self._raw.bos_id}
        return self._text_of.get(ids[key]) if key in ids else None

    # -- encode / decode -------------------------------------------------------------

    def encode(self, text: str, *, delimiters: bool = True) -> list[int]:
        """Encode without BOS/EOS; see the module docstring for `delimiters`."""
        if not delimiters:
            return list(self._raw.encode(text, bos=False, eos=False))
        out: list[int] = []
        for k, piece in enumerate(self._split.split(text)):
            if k % 2:
                out.append(self.added_tokens[piece])
            elif piece:
                out += self._raw.encode(piece, bos=False, eos=False)
        return out

    def decode(self, ids: list[int], *, skip_special_tokens: bool = False) -> str:
        _, raw = self._bytes()
        data = b"".join(
            b"" if skip_special_tokens and i in self.special_ids else raw.get(i, b"") for i in ids
        )
        return data.decode("utf-8", "replace")

    def plain_texts(self) -> Mapping[int, str] | None:
        return None

    def detokenizer(self) -> Detokenizer:
        text, raw = self._bytes()
        return TableDetokenizer(text, raw)

    def _bytes(self) -> tuple[dict[int, str], dict[int, bytes]]:
        """id -> complete text, and id -> bytes (control tokens: their text)."""
        if self._tables is None:
            raw: dict[int, bytes] = {}
            sentencepiece = not hasattr(self._raw, "id_to_byte_piece")
            for i in range(self.vocab_size):
                if i in self._text_of:
                    raw[i] = self._text_of[i].encode()
                elif sentencepiece:
                    piece = str(self._raw.id_to_piece(i))
                    byte = _BYTE_PIECE.match(piece)
                    raw[i] = (
                        bytes([int(byte.group(1), 16)])
                        if byte
                        else piece.replace("▁", " ").encode()
                    )
                else:
                    raw[i] = bytes(self._raw.id_to_byte_piece(i))
            text: dict[int, str] = {}
            for i, data in raw.items():
                try:
                    text[i] = data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
            self._tables = (text, raw)
        return self._tables
