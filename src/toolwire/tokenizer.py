"""Tokenizers: the one place toolwire touches a vocabulary.

Data flow::

    folder | tokenizer file | hub id
        -> load_tokenizer()            (files are read here, never in the parser)
        -> Tokenizer                   wraps a `tokenizers.Tokenizer`
             .encode(text, delimiters=True)   added tokens matched, as a model emits them
             .encode(text, delimiters=False)  every character spelled from ordinary tokens
             .token_id(text)                  the id when `text` is one token, else None
             .detokenizer()                   incremental id -> text, one per stream

`Tokenizer` itself does no I/O: it is built from an in-memory `tokenizers.Tokenizer`
and an optional `tokenizer_config.json` mapping, so the sans-I/O parser can take one.

Incremental detokenization. For byte-level BPE vocabularies (Qwen, Llama 3, DeepSeek,
gpt-oss) every id maps to a fixed byte string, so the detokenizer is a table lookup
plus Python's incremental UTF-8 decoder (a character split across ids is held until
it completes). That is exact for these vocabularies, several times faster than
`tokenizers.decoders.DecodeStream`, and checked against it in the tests. Every other
vocabulary (SentencePiece with byte fallback, Metaspace) uses `DecodeStream` itself.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tokenizers import AddedToken
from tokenizers import Tokenizer as _Backend
from tokenizers.decoders import DecodeStream

from toolwire.errors import ToolwireError, UsageError

__all__ = ["Detokenizer", "Tokenizer", "load_tokenizer"]

_T = TypeVar("_T")


class Detokenizer(Protocol):
    """Incremental decoding of one output stream."""

    #: True while text is held back (an incomplete character); see `Tokenizer.plain_texts`.
    pending: bool

    def step(self, token_id: int) -> str:
        """Return the text this id completes ('' while a character is incomplete)."""
        ...

    def flush(self) -> str:
        """Return what is left at the end of the stream (an incomplete character)."""
        ...


@dataclass(frozen=True)
class _AddedInfo:
    content: str
    special: bool


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


class _TableDetokenizer:
    """Byte-level BPE: a table of complete strings, and a UTF-8 decoder for the rest."""

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


class _StreamDetokenizer:
    """Any other vocabulary: `tokenizers`' own DecodeStream (special tokens kept).

    DecodeStream returns nothing while the ids it holds end inside a character, and
    has no end of stream: `flush` decodes what it still holds, as `Tokenizer.decode`
    would (an incomplete character as U+FFFD), and starts a fresh stream that carries
    on from the last id that gave text (so a word after it keeps its leading space).
    """

    __slots__ = ("_backend", "_last", "_size", "_stream", "_unsaid", "pending")

    def __init__(self, backend: _Backend) -> None:
        self._backend = backend
        self._size = int(backend.get_vocab_size(with_added_tokens=True))
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


class Tokenizer:
    """A loaded vocabulary with the operations toolwire needs. Immutable after init."""

    def __init__(
        self,
        backend: _Backend,
        config: Mapping[str, Any] | None = None,
        *,
        chat_template: str | None = None,
        name: str = "",
    ) -> None:
        self.name = name
        self._backend = backend
        self._config: dict[str, Any] = dict(config or {})
        self._add_config_tokens()
        added = backend.get_added_tokens_decoder()
        self._added: dict[int, _AddedInfo] = {
            i: _AddedInfo(t.content, bool(t.special)) for i, t in added.items()
        }
        #: Every added token's text -> id (delimiters, turn markers, ...).
        self.added_tokens: dict[str, int] = {a.content: i for i, a in self._added.items()}
        #: Ids of added tokens flagged special.
        self.special_ids: frozenset[int] = frozenset(i for i, a in self._added.items() if a.special)
        #: Ids of every added token, special or not.
        self.added_ids: frozenset[int] = frozenset(self._added)
        self.chat_template: str | None = chat_template or _template_from(self._config)
        self.eos_ids: frozenset[int] = frozenset(self._eos_ids())
        self._spelled: _Backend | None = None
        self._table: tuple[dict[int, str], dict[int, bytes]] | None = None
        self._plain: dict[int, str] | None = None
        #: Tables derived from this vocabulary (format resolutions), built once each.
        self.memo: dict[object, object] = {}
        self._byte_level = _is_byte_level(backend)

    # -- vocabulary facts ---------------------------------------------------------

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
        return int(self._backend.get_vocab_size(with_added_tokens=True))

    def token_text(self, token_id: int) -> str:
        """The text of one id, as the model's output would show it."""
        info = self._added.get(token_id)
        if info is not None:
            return info.content
        return str(self._backend.decode([token_id], skip_special_tokens=False))

    def token_id(self, text: str) -> int | None:
        """The id of `text` when it is exactly one token of this vocabulary, else None."""
        if text in self.added_tokens:
            return self.added_tokens[text]
        ids = self.encode(text)
        if len(ids) == 1 and self.token_text(ids[0]) == text:
            return ids[0]
        return None

    def is_special(self, token_id: int) -> bool:
        return token_id in self.special_ids

    def token_string(self, key: str) -> str | None:
        """A named token of the config (`eos_token`, `bos_token`) as text."""
        value = self._config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        return value if isinstance(value, str) else None

    # -- encode / decode ----------------------------------------------------------

    def encode(self, text: str, *, delimiters: bool = True) -> list[int]:
        """Encode `text` without adding BOS/EOS.

        `delimiters=True` matches added tokens, as the model's own output carries them.
        `delimiters=False` spells every character from ordinary tokens, so the result
        holds no added-token id: what a model copying the text would produce.
        """
        backend = self._backend if delimiters else self._spelled_backend()
        return list(backend.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int], *, skip_special_tokens: bool = False) -> str:
        return str(self._backend.decode(ids, skip_special_tokens=skip_special_tokens))

    def plain_texts(self) -> Mapping[int, str] | None:
        """Ordinary (not added) ids whose text is complete on its own -> that text.

        A detokenizer that is not `pending` would return exactly this text for such an
        id, so hot loops may look it up directly. None for non-byte-level vocabularies.
        """
        if not self._byte_level:
            return None
        if self._plain is None:
            text, _ = self._byte_table()
            self._plain = {i: s for i, s in text.items() if i not in self._added}
        return self._plain

    def detokenizer(self) -> Detokenizer:
        """A fresh incremental detokenizer for one output stream."""
        if self._byte_level:
            text, raw = self._byte_table()
            return _TableDetokenizer(text, raw)
        return _StreamDetokenizer(self._backend)

    # -- internals ----------------------------------------------------------------

    def _spelled_backend(self) -> _Backend:
        if self._spelled is None:
            data = json.loads(self._backend.to_str())
            data["added_tokens"] = []
            self._spelled = _Backend.from_str(json.dumps(data))
        return self._spelled

    def _byte_table(self) -> tuple[dict[int, str], dict[int, bytes]]:
        if self._table is None:
            decode_byte = {c: b for b, c in _bytes_to_unicode().items()}
            text: dict[int, str] = {}
            raw: dict[int, bytes] = {}
            for piece, i in self._backend.get_vocab(with_added_tokens=False).items():
                try:
                    data = bytes(decode_byte[c] for c in piece)
                except KeyError:
                    data = piece.encode()
                raw[i] = data
                with contextlib.suppress(UnicodeDecodeError):
                    text[i] = data.decode("utf-8")
            for i, info in self._added.items():
                text[i] = info.content
                raw[i] = info.content.encode()
            self._table = (text, raw)
        return self._table

    def _add_config_tokens(self) -> None:
        """Add tokens that `tokenizer_config.json` declares and the vocabulary lacks."""
        declared = self._config.get("added_tokens_decoder") or {}
        have = self._backend.get_added_tokens_decoder()
        missing = []
        for key, spec in sorted(declared.items(), key=lambda kv: int(kv[0])):
            i = int(key)
            if i in have or not isinstance(spec, dict) or "content" not in spec:
                continue
            missing.append((i, spec))
        for i, spec in missing:
            size = self._backend.get_vocab_size(with_added_tokens=True)
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
                self._backend.add_special_tokens([token])
            else:
                self._backend.add_tokens([token])

    def _eos_ids(self) -> list[int]:
        out = []
        eos = self.token_string("eos_token")
        if eos is not None and eos in self.added_tokens:
            out.append(self.added_tokens[eos])
        return out


def _is_byte_level(backend: _Backend) -> bool:
    """True when the decoder is plain byte-level BPE (each id is a fixed byte string)."""
    decoder = backend.decoder
    if decoder is None:
        return False
    state = json.loads(decoder.__getstate__())
    return bool(state.get("type") == "ByteLevel")


def _template_from(config: Mapping[str, Any]) -> str | None:
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


def _read_text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return fh.read()
    return path.read_text(encoding="utf-8")


def load_tokenizer(source: str | Path) -> Tokenizer:
    """Load a tokenizer from a folder, a tokenizer file, or a Hugging Face hub id.

    A folder holds `tokenizer.json` or `tokenizer.json.gz`, optionally
    `tokenizer_config.json` (added tokens and their special flags, eos, chat
    template) and a `chat_template.jinja` (or a single `*.jinja` file). Mistral's own
    files (`tekken*.json[.gz]`, `*.model.vN`), or a folder holding exactly one of them
    and no tokenizer.json, load through mistral-common (`toolwire.mistral_tokenizer`).

    Anything that cannot be loaded (missing, unreadable, corrupt or inconsistent
    files) raises `UsageError` naming the file.
    """
    if not isinstance(source, str | Path):
        raise UsageError(f"load_tokenizer takes a path or a hub id, got {type(source).__name__}")
    try:
        return _load(source)
    except ToolwireError:
        raise
    except Exception as exc:  # a file's content the libraries reject, however they say so
        raise UsageError(f"{source}: cannot load a tokenizer ({_why(exc)})") from exc


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _file(path: Path, parse: Callable[[str], _T]) -> _T:
    """Read and parse one file; whatever fails (I/O, gzip, UTF-8, JSON, the tokenizers
    library's own bare `Exception`) is a `UsageError` naming the file."""
    try:
        return parse(_read_text(path))
    except ToolwireError:
        raise
    except Exception as exc:
        raise UsageError(f"{path}: not a readable tokenizer file ({_why(exc)})") from exc


def _config(text: str) -> dict[str, Any]:
    config = json.loads(text)
    if not isinstance(config, dict):
        raise ValueError("the file does not hold a JSON object")
    return config


def _load(source: str | Path) -> Tokenizer:
    from toolwire.mistral_tokenizer import is_mistral_file, load_mistral

    path = Path(source)
    if path.is_dir():
        for candidate in ("tokenizer.json", "tokenizer.json.gz"):
            if (path / candidate).is_file():
                backend = _file(path / candidate, _Backend.from_str)
                break
        else:
            mistral = sorted(p for p in path.iterdir() if is_mistral_file(p))
            if len(mistral) == 1:
                return _file_mistral(mistral[0], load_mistral)
            found = f" (Mistral files: {', '.join(p.name for p in mistral)}; pass one)"
            raise UsageError(
                f"{path}: no tokenizer.json or tokenizer.json.gz in this folder"
                + (found if mistral else "")
            )
        config: dict[str, Any] = {}
        if (path / "tokenizer_config.json").is_file():
            config = _file(path / "tokenizer_config.json", _config)
        template = None
        if not _template_from(config):
            jinja = sorted(path.glob("chat_template.jinja")) or sorted(path.glob("*.jinja"))
            if len(jinja) == 1:
                template = _file(jinja[0], str)
        try:
            return Tokenizer(backend, config, chat_template=template, name=str(path))
        except ToolwireError:
            raise
        except Exception as exc:  # a config whose entries have the wrong shape
            where = path / "tokenizer_config.json"
            raise UsageError(f"{where}: inconsistent with the vocabulary ({_why(exc)})") from exc
    if path.is_file():
        if is_mistral_file(path):
            return _file_mistral(path, load_mistral)
        return Tokenizer(_file(path, _Backend.from_str), name=str(path))
    text = str(source)
    if text.count("/") != 1 or text.startswith((".", "/")):
        raise UsageError(f"{text}: no such file or folder, and not a hub id (owner/name)")
    try:
        backend = _Backend.from_pretrained(text)
    except Exception as exc:  # the hub client raises many types; all mean "not loaded"
        raise UsageError(
            f"{text}: could not load the tokenizer from the Hugging Face hub ({exc}). "
            "Offline, pass a local folder holding tokenizer.json instead."
        ) from exc
    return Tokenizer(backend, name=text)


def _file_mistral(path: Path, load: Callable[[Path], Tokenizer]) -> Tokenizer:
    try:
        return load(path)
    except ToolwireError:
        raise
    except Exception as exc:
        raise UsageError(f"{path}: not a readable Mistral tokenizer file ({_why(exc)})") from exc
