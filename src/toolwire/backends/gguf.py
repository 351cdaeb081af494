"""A GGUF file's metadata, and the byte-level BPE tokenizer it carries.

Data flow::

    model.gguf --read_metadata()--> {key: value}          (header only; tensors are skipped)
               --tokenizer_from_gguf()--> toolwire.Tokenizer  (vocabulary, merges, added tokens)

llama.cpp runs the model on token ids; toolwire renders prompts and parses output with a
`tokenizers` object built from the same vocabulary, so both sides agree on every id. Only
byte-level BPE vocabularies (`tokenizer.ggml.model == "gpt2"`: SmolLM, Qwen, Llama 3) are
rebuilt; any other is a clear error that names `--tokenizer` as the way out.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as _Backend

from toolwire.errors import UsageError
from toolwire.tokenizer import HuggingFaceTokenizer, Tokenizer

__all__ = ["read_metadata", "tokenizer_from_gguf"]

_MAGIC = b"GGUF"
_SCALARS: dict[int, str] = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
# llama.cpp's token types: 3 is a control token (special), 4 a user-defined added token.
_CONTROL, _USER_DEFINED = 3, 4

# The pre-tokenizer regexes llama.cpp uses per `tokenizer.ggml.pre` (llama-vocab.cpp).
_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_SPLITS: dict[str, list[str]] = {
    "gpt-2": [_GPT2_SPLIT],
    "smollm": [r"\p{N}", _GPT2_SPLIT],
    "codeshell": [r"\p{N}", _GPT2_SPLIT],
}


def _read(fh: IO[bytes], fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = fh.read(size)
    if len(data) != size:
        raise UsageError(f"{getattr(fh, 'name', 'gguf')}: truncated GGUF header")
    return struct.unpack(fmt, data)[0]


def _string(fh: IO[bytes]) -> str:
    length = _read(fh, "<Q")
    return bytes(fh.read(length)).decode("utf-8", errors="replace")


def _value(fh: IO[bytes], kind: int) -> Any:
    if kind == _STRING:
        return _string(fh)
    if kind == _ARRAY:
        item_kind = _read(fh, "<I")
        count = _read(fh, "<Q")
        read: Callable[[], Any]
        if item_kind in _SCALARS:
            fmt = _SCALARS[item_kind]
            size = struct.calcsize(fmt)
            raw = fh.read(size * count)
            return list(struct.unpack(f"<{count}{fmt[1]}", raw))
        read = (lambda: _string(fh)) if item_kind == _STRING else (lambda: _value(fh, item_kind))
        return [read() for _ in range(count)]
    if kind in _SCALARS:
        return _read(fh, _SCALARS[kind])
    raise UsageError(f"unknown GGUF value type {kind}")


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The key/value metadata of a GGUF file (arrays as lists)."""
    with open(path, "rb") as fh:
        if fh.read(4) != _MAGIC:
            raise UsageError(f"{path}: not a GGUF file")
        version = _read(fh, "<I")
        if version < 2:
            raise UsageError(f"{path}: GGUF version {version} is not supported (need 2+)")
        _read(fh, "<Q")  # tensor count
        count = _read(fh, "<Q")
        out: dict[str, Any] = {}
        for _ in range(count):
            key = _string(fh)
            out[key] = _value(fh, _read(fh, "<I"))
        return out


def tokenizer_from_gguf(path: str | Path, metadata: dict[str, Any] | None = None) -> Tokenizer:
    """The model's own vocabulary as a `toolwire.Tokenizer` (byte-level BPE only)."""
    meta = metadata if metadata is not None else read_metadata(path)
    kind = meta.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise UsageError(
            f"{path}: the GGUF vocabulary is {kind!r}; only byte-level BPE ('gpt2') is "
            "rebuilt from the file. Pass --tokenizer with the model's tokenizer.json folder."
        )
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    types: list[int] = meta.get("tokenizer.ggml.token_type") or [1] * len(tokens)
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges", [])]
    vocab = {token: i for i, token in enumerate(tokens)}
    backend = _Backend(models.BPE(vocab, merges, fuse_unk=False, ignore_merges=False))
    pre = str(meta.get("tokenizer.ggml.pre", "gpt-2"))
    splits = _SPLITS.get(pre, _SPLITS["gpt-2"])
    steps: list[pre_tokenizers.PreTokenizer] = [
        pre_tokenizers.Split(Regex(r), behavior="isolated") for r in splits
    ]
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))
    backend.pre_tokenizer = pre_tokenizers.Sequence(steps)
    backend.decoder = decoders.ByteLevel()
    added = [
        AddedToken(tokens[i], special=types[i] == _CONTROL, normalized=False)
        for i in range(len(tokens))
        if types[i] in (_CONTROL, _USER_DEFINED)
    ]
    backend.add_special_tokens([t for t in added if t.special])
    backend.add_tokens([t for t in added if not t.special])
    config: dict[str, Any] = {}
    template = meta.get("tokenizer.chat_template")
    if isinstance(template, str):
        config["chat_template"] = template
    for key in ("eos", "bos"):
        index = meta.get(f"tokenizer.ggml.{key}_token_id")
        if isinstance(index, int) and 0 <= index < len(tokens):
            config[f"{key}_token"] = tokens[index]
    return HuggingFaceTokenizer(backend, config, name=str(path))
