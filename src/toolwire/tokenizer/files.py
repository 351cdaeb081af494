"""Loading a tokenizer from files: the one place toolwire reads a vocabulary from disk.

Data flow::

    folder | tokenizer file | hub id
        -> load_tokenizer()
             tokenizer.json(.gz) [+ tokenizer_config.json, *.jinja] -> HuggingFaceTokenizer
             tekken*.json(.gz) | *.model.vN (mistral-common)        -> MistralTokenizer
             anything missing, unreadable, corrupt or inconsistent  -> UsageError naming
                                                                       the file

The backends built here are toolwire's own, so they are configured here (the tokens
`tokenizer_config.json` declares added, padding and truncation off) before the
tokenizer wraps them, which then has nothing to copy.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tokenizers import Tokenizer as _Backend

from toolwire.errors import ToolwireError, UsageError
from toolwire.tokenizer.base import Tokenizer
from toolwire.tokenizer.hugging_face import HuggingFaceTokenizer, configure, template_from
from toolwire.tokenizer.mistral import MistralTokenizer

__all__ = ["is_mistral_file", "load_mistral", "load_tokenizer"]

_T = TypeVar("_T")
_SENTENCEPIECE = re.compile(r"\.model(\.v\d+m?\d*)?$")


def load_tokenizer(source: str | Path) -> Tokenizer:
    """Load a tokenizer from a folder, a tokenizer file, or a Hugging Face hub id.

    A folder holds `tokenizer.json` or `tokenizer.json.gz`, optionally
    `tokenizer_config.json` (added tokens and their special flags, eos, chat
    template) and a `chat_template.jinja` (or a single `*.jinja` file). Mistral's own
    files (`tekken*.json[.gz]`, `*.model.vN`), or a folder holding exactly one of them
    and no tokenizer.json, load through mistral-common (`MistralTokenizer`).

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


def is_mistral_file(path: Path) -> bool:
    """A tekken JSON (`tekken*.json`, gzipped or not) or a SentencePiece `.model.vN`."""
    name = path.name.removesuffix(".gz")
    return ("tekken" in name and name.endswith(".json")) or bool(_SENTENCEPIECE.search(name))


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


def _read_text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return fh.read()
    return path.read_text(encoding="utf-8")


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
    path = Path(source)
    if path.is_dir():
        for candidate in ("tokenizer.json", "tokenizer.json.gz"):
            if (path / candidate).is_file():
                backend = _file(path / candidate, _Backend.from_str)
                break
        else:
            mistral = sorted(p for p in path.iterdir() if is_mistral_file(p))
            if len(mistral) == 1:
                return _file_mistral(mistral[0])
            found = f" (Mistral files: {', '.join(p.name for p in mistral)}; pass one)"
            raise UsageError(
                f"{path}: no tokenizer.json or tokenizer.json.gz in this folder"
                + (found if mistral else "")
            )
        config: dict[str, Any] = {}
        if (path / "tokenizer_config.json").is_file():
            config = _file(path / "tokenizer_config.json", _config)
        template = None
        if not template_from(config):
            jinja = sorted(path.glob("chat_template.jinja")) or sorted(path.glob("*.jinja"))
            if len(jinja) == 1:
                template = _file(jinja[0], str)
        try:
            return _hugging_face(backend, config, chat_template=template, name=str(path))
        except ToolwireError:
            raise
        except Exception as exc:  # a config whose entries have the wrong shape
            where = path / "tokenizer_config.json"
            raise UsageError(f"{where}: inconsistent with the vocabulary ({_why(exc)})") from exc
    if path.is_file():
        if is_mistral_file(path):
            return _file_mistral(path)
        return _hugging_face(_file(path, _Backend.from_str), {}, name=str(path))
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
    return _hugging_face(backend, {}, name=text)


def _hugging_face(
    backend: _Backend, config: dict[str, Any], *, chat_template: str | None = None, name: str
) -> HuggingFaceTokenizer:
    configure(backend, config)  # the backend is ours: configured in place, never copied
    return HuggingFaceTokenizer(backend, config, chat_template=chat_template, name=name)


def _file_mistral(path: Path) -> Tokenizer:
    try:
        return load_mistral(path)
    except ToolwireError:
        raise
    except Exception as exc:
        raise UsageError(f"{path}: not a readable Mistral tokenizer file ({_why(exc)})") from exc
