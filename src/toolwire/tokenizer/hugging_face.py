"""Hugging Face vocabularies: a `tokenizers.Tokenizer` behind toolwire's `Tokenizer`.

Data flow::

    tokenizers.Tokenizer (+ tokenizer_config.json mapping, chat template)
        -> HuggingFaceTokenizer
             .encode(text, delimiters=True)   added tokens matched, as a model emits them
             .encode(text, delimiters=False)  every character spelled from ordinary tokens
                                              (a copy of the backend without added tokens)
             .detokenizer()                   incremental id -> text, one per stream

No I/O (files are read by `toolwire.tokenizer.files`), and no change to what the
caller passed. The backend must hold the tokens `tokenizer_config.json` declares, and
neither pad nor truncate (an encoding is the text's ids, exactly): a caller's backend
that differs is copied and the copy configured (`configure`); the loader configures
its own backend before wrapping it, so loading copies nothing.

Incremental detokenization. For byte-level BPE vocabularies (Qwen, Llama 3, DeepSeek,
gpt-oss) every id maps to a fixed byte string, so the detokenizer is a table lookup
plus incremental UTF-8 (`TableDetokenizer`). That is exact for these vocabularies,
several times faster than `tokenizers.decoders.DecodeStream`, and checked against it in
the tests. Every other vocabulary (SentencePiece with byte fallback, Metaspace) uses
`DecodeStream` itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tokenizers import AddedToken
from tokenizers import Tokenizer as _Backend
from tokenizers.decoders import DecodeStream

from toolwire.errors import UsageError
from toolwire.tokenizer.base import Detokenizer, Tokenizer
from toolwire.tokenizer.table import TableDetokenizer

__all__ = ["HuggingFaceTokenizer", "configure", "template_from"]


class _StreamDetokenizer:
    """Any other vocabulary: `tokenizers`' own DecodeStream (special tokens kept).

    DecodeStream returns nothing while the ids it holds end inside a character, and
    has no end of stream: `flush` decodes what it still holds, as `Tokenizer.decode`
    would (an incomplete character as U+FFFD), and starts a fresh stream that carries
    on from the last id that gave text (so a word after it keeps its leading space).
    """

    __slots__ = ("_backend", "_last", "_size", "_stream", "_unsaid", "pending")

    def __init__(self, backend: _Backend, size: int) -> None:
        self._backend = backend
        self._size = size
        self._stream = DecodeStream(skip_special_tokens=False)
        self._last: list[int] = []  # the last id that gave text
        self._unsaid: list[int] = []  # ids stepped since then
        self.pending = True  # DecodeStream keeps its own context: no table shortcut

    def step(self, token_id: int) -> str:
        if not 0 <= token_id < self._size:  # no text, as with the byte table
            return ""
        out = self._stream.step(self._backend, token_id)
        if out:
            self._last, self._unsaid = [token_id], []
            return str(out)
        self._unsaid.append(token_id)
        return ""

    def flush(self) -> str:
        if not self._unsaid:
            return ""
        unsaid, self._unsaid = self._unsaid, []
        decode = self._backend.decode
        before = decode(self._last, skip_special_tokens=False)
        after = decode(self._last + unsaid, skip_special_tokens=False)
        text = (
            after[len(before) :]
            if after.startswith(before)
            else decode(unsaid, skip_special_tokens=False)
        )
        self._stream = DecodeStream(skip_special_tokens=False)
        for token_id in self._last:  # context for the next id's spacing; its text is said
            self._stream.step(self._backend, token_id)
        return text


class HuggingFaceTokenizer(Tokenizer, default=True):
    """A `tokenizers.Tokenizer` and its `tokenizer_config.json` mapping."""

    def __init__(
        self,
        backend: _Backend,
        config: Mapping[str, Any] | None = None,
        *,
        chat_template: str | None = None,
        name: str = "",
    ) -> None:
        config = dict(config or {})
        if not _configured(backend, config):
            backend = _Backend.from_str(backend.to_str())  # the caller's backend stays as given
            configure(backend, config)
        self._backend = backend
        self._config: dict[str, Any] = config
        self._added: dict[int, tuple[str, bool]] = {
            i: (t.content, bool(t.special)) for i, t in backend.get_added_tokens_decoder().items()
        }
        added_tokens = {text: i for i, (text, _) in self._added.items()}
        eos = self.token_string("eos_token")
        super().__init__(
            name=name,
            added_tokens=added_tokens,
            added_ids=frozenset(self._added),
            special_ids=frozenset(i for i, (_, special) in self._added.items() if special),
            eos_ids=frozenset([added_tokens[eos]] if eos in added_tokens else []),
            chat_template=chat_template or template_from(config),
        )
        self._spelled: _Backend | None = None
        self._table: tuple[dict[int, str], dict[int, bytes]] | None = None
        # Read once, as the added tokens above are (half a millisecond on a 150k
        # vocabulary, and every request's pipeline asks).
        self._vocab_size = int(backend.get_vocab_size(with_added_tokens=True))
        self._byte_level = _is_byte_level(backend)

    # -- vocabulary facts -------------------------------------------------------------

    @property
    def backend(self) -> _Backend:
        """The wrapped `tokenizers.Tokenizer`."""
        return self._backend

    @property
    def config(self) -> Mapping[str, Any]:
        """The `tokenizer_config.json` mapping this tokenizer was loaded with."""
        return self._config

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def token_text(self, token_id: int) -> str:
        added = self._added.get(token_id)
        if added is not None:
            return added[0]
        return str(self._backend.decode([token_id], skip_special_tokens=False))

    def token_string(self, key: str) -> str | None:
        """A named token of the config (`eos_token`, `bos_token`) as text."""
        value = self._config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        return value if isinstance(value, str) else None

    # -- encode / decode --------------------------------------------------------------

    def encode(self, text: str, *, delimiters: bool = True) -> list[int]:
        backend = self._backend if delimiters else self._spelled_backend()
        return list(backend.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int], *, skip_special_tokens: bool = False) -> str:
        return str(self._backend.decode(ids, skip_special_tokens=skip_special_tokens))

    def plain_texts(self) -> Mapping[int, str] | None:
        """None for vocabularies that are not byte-level (`DecodeStream` decodes them)."""
        if not self._byte_level:
            return None
        text, _ = self._byte_table()
        return text

    def detokenizer(self) -> Detokenizer:
        if self._byte_level:
            text, raw = self._byte_table()
            return TableDetokenizer(text, raw)
        return _StreamDetokenizer(self._backend, self._vocab_size)

    # -- internals --------------------------------------------------------------------

    def _spelled_backend(self) -> _Backend:
        """The backend without its added tokens: the same model (shared, not copied:
        a vocabulary's merges are tens of MB) and the same pipeline around it."""
        if self._spelled is None:
            spelled = _Backend(self._backend.model)
            spelled.normalizer = self._backend.normalizer
            spelled.pre_tokenizer = self._backend.pre_tokenizer
            spelled.post_processor = self._backend.post_processor
            spelled.decoder = self._backend.decoder
            self._spelled = spelled
        return self._spelled

    def _byte_table(self) -> tuple[dict[int, str], dict[int, bytes]]:
        """The ordinary ids' complete texts (what `plain_texts` gives), and the bytes of
        the rest: pieces of a character, and the added tokens (`TableDetokenizer`
        decodes those from their bytes). Each id's bytes are held once."""
        if self._table is None:
            # A piece of byte-level characters only is its bytes (each character one
            # byte, as latin-1 spells it); any other piece is its own UTF-8 text.
            mapped = {c: chr(b) for b, c in _bytes_to_unicode().items()}
            to_bytes = str.maketrans(mapped)
            byte_level = frozenset(mapped)
            text: dict[int, str] = {}
            raw: dict[int, bytes] = {}
            for piece, i in self._backend.get_vocab(with_added_tokens=False).items():
                if i in self._added:
                    continue
                if byte_level.issuperset(piece):
                    data = piece.translate(to_bytes).encode("latin-1")
                else:
                    data = piece.encode()
                try:
                    text[i] = data.decode("utf-8")
                except UnicodeDecodeError:  # part of a character: only its bytes
                    raw[i] = data
            for i, (content, _) in self._added.items():
                raw[i] = content.encode()
            self._table = (text, raw)
        return self._table


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte <-> printable character map used by byte-level BPE."""
    bs = list(range(ord("!"), ord("~") + 1))
    bs += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


def _is_byte_level(backend: _Backend) -> bool:
    """True when the decoder is plain byte-level BPE (each id is a fixed byte string)."""
    decoder = backend.decoder
    if decoder is None:
        return False
    state = json.loads(decoder.__getstate__())
    return bool(state.get("type") == "ByteLevel")


def template_from(config: Mapping[str, Any]) -> str | None:
    """The chat template a `tokenizer_config.json` mapping carries (its default one)."""
    template = config.get("chat_template")
    if isinstance(template, str):
        return template
    if isinstance(template, list):
        for entry in template:
            if isinstance(entry, dict) and entry.get("name") == "default":
                return str(entry.get("template"))
        if template and isinstance(template[0], dict):
            return str(template[0].get("template"))
    return None


def _declared(config: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """The tokens `tokenizer_config.json` declares (`added_tokens_decoder`), by id."""
    declared = config.get("added_tokens_decoder") or {}
    entries = sorted(declared.items(), key=lambda kv: int(kv[0]))
    return [(int(k), spec) for k, spec in entries if isinstance(spec, dict) and "content" in spec]


def _lacking(
    backend: _Backend, config: Mapping[str, Any]
) -> tuple[list[tuple[int, dict[str, Any]]], set[str]]:
    """The declared tokens whose id `backend` lacks, and the text of those it has."""
    have = backend.get_added_tokens_decoder()
    lacking = [(i, spec) for i, spec in _declared(config) if i not in have]
    return lacking, {token.content for token in have.values()}


def _configured(backend: _Backend, config: Mapping[str, Any]) -> bool:
    """True when `configure` would change nothing."""
    if backend.padding is not None or backend.truncation is not None:
        return False
    if not config.get("added_tokens_decoder"):
        return True
    lacking, added = _lacking(backend, config)
    size = backend.get_vocab_size(with_added_tokens=True)
    # A token declared at the next id but added already under another is one
    # `configure` would add in vain (`add_tokens` keeps the first).
    return all(i == size and spec["content"] in added for i, spec in lacking)


def configure(backend: _Backend, config: Mapping[str, Any]) -> None:
    """Make `backend` what `HuggingFaceTokenizer` needs: no padding, no truncation, and
    the tokens `tokenizer_config.json` declares added where it lacks them.

    Changes `backend`: called only on a backend toolwire made (the loader's, or a copy).
    """
    if backend.padding is not None:
        backend.no_padding()
    if backend.truncation is not None:
        backend.no_truncation()
    for i, spec in _lacking(backend, config)[0]:
        size = backend.get_vocab_size(with_added_tokens=True)
        if i != size:
            raise UsageError(
                f"tokenizer_config.json declares token {spec['content']!r} as id {i}, "
                f"but the vocabulary would give it id {size}; ids must follow the "
                "vocabulary without gaps"
            )
        token = AddedToken(
            spec["content"],
            special=bool(spec.get("special", False)),
            normalized=bool(spec.get("normalized", False)),
            lstrip=bool(spec.get("lstrip", False)),
            rstrip=bool(spec.get("rstrip", False)),
            single_word=bool(spec.get("single_word", False)),
        )
        if token.special:
            backend.add_special_tokens([token])
        else:
            backend.add_tokens([token])
