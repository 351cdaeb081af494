"""Mistral vocabularies (tekken, SentencePiece) through the `mistral-common` package.

Data flow::

    tekken*.json(.gz) | *.model.v<N>
        -> load_mistral()                 (files are read here; optional extra `mistral`)
        -> MistralTokenizer               wraps mistral-common's raw tokenizer
             .encode(text, delimiters=True)   control-token texts become their ids, as
                                              the model emits them; the text between
                                              them is encoded as mistral-common does
             .encode(text, delimiters=False)  mistral-common's own encoder, which never
                                              turns `[TOOL_CALLS]` text into the control
                                              id: spelled delimiters cannot be gated ones
             .detokenizer()                   id -> bytes table + incremental UTF-8

`MistralTokenizer` is a `Tokenizer` (the parser, the CLI and the server take it
unchanged) with every public method answered from mistral-common instead of a
`tokenizers` backend; `backend` raises `UsageError`, so what needs a Hugging Face
backend (XGrammar, prompt isolation) says so instead of failing obscurely. Control
tokens are the added and special tokens. Each id maps to fixed bytes (tekken: its BPE
bytes; SentencePiece: its piece with `▁` as a space, `<0xNN>` as that byte), so
decoding is the same table lookup plus incremental UTF-8 as byte-level BPE, and a
character split across ids is held until it completes.
"""

from __future__ import annotations

import gzip
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolwire.errors import UsageError
from toolwire.tokenizer import Detokenizer, Tokenizer, _TableDetokenizer

__all__ = ["MistralTokenizer", "is_mistral_file", "load_mistral"]

_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_SENTENCEPIECE = re.compile(r"\.model(\.v\d+m?\d*)?$")


def is_mistral_file(path: Path) -> bool:
    """A tekken JSON (`tekken*.json`, gzipped or not) or a SentencePiece `.model.vN`."""
    name = path.name.removesuffix(".gz")
    return ("tekken" in name and name.endswith(".json")) or bool(_SENTENCEPIECE.search(name))


class MistralTokenizer(Tokenizer):
    """A mistral-common tokenizer behind toolwire's `Tokenizer` interface."""

    def __init__(self, raw: Any, *, name: str = "", chat_template: str | None = None) -> None:
        # Deliberately not Tokenizer.__init__: there is no `tokenizers` backend here;
        # every public method below is answered from mistral-common.
        self.name = name
        self._raw = raw
        specials = sorted(int(i) for i in raw.special_ids)
        #: Control tokens' text -> id.
        self.added_tokens: dict[str, int] = {str(raw.id_to_piece(i)): i for i in specials}
        self.special_ids: frozenset[int] = frozenset(specials)
        self.added_ids: frozenset[int] = self.special_ids
        self.chat_template: str | None = chat_template
        self.eos_ids: frozenset[int] = frozenset({int(raw.eos_id)})
        ordered = sorted(self.added_tokens, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(re.escape(t) for t in ordered) + ")")
        self._text_of = {i: t for t, i in self.added_tokens.items()}
        self._tables: tuple[dict[int, str], dict[int, bytes]] | None = None
        self.memo: dict[object, object] = {}

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
        return _TableDetokenizer(text, raw)

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


def load_mistral(path: Path) -> MistralTokenizer:
    """Load a tekken or SentencePiece file with mistral-common (`pip install toolwire[mistral]`)."""
    try:
        from mistral_common.tokens.tokenizers.mistral import MistralTokenizer as _Loader
    except ImportError as exc:
        raise UsageError(
            f"{path}: Mistral tokenizers need mistral-common (pip install 'toolwire[mistral]')"
        ) from exc
    if path.suffix != ".gz":
        return MistralTokenizer(
            _Loader.from_file(path).instruct_tokenizer.tokenizer, name=str(path)
        )
    with tempfile.TemporaryDirectory() as folder:  # mistral-common reads plain files only
        plain = Path(folder) / path.name.removesuffix(".gz")
        with gzip.open(path, "rb") as src, plain.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        raw = _Loader.from_file(plain).instruct_tokenizer.tokenizer
    return MistralTokenizer(raw, name=str(path))
