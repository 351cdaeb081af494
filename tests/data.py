"""The shared test data: real tokenizers and BFCL corpora from `TOOLWIRE_TEST_DATA`.

The one place tests reach `../shared` (or wherever `TOOLWIRE_TEST_DATA` points).
Without it, a test that needs the data is skipped, the reason naming the folder; the
invariant suite then runs on the in-repository vocabulary (`tests/vocabulary.py`).
"""

from __future__ import annotations

import importlib
import os
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from peers import vocab
from toolwire import Tokenizer, load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
#: The environment variable naming the tier being run (tests/conftest.py), and the
#: value of the fast one, which runs without the shared data.
TIER, FAST_TIER = "TOOLWIRE_TIER", "fast"


def data_path() -> Path:
    """Where the shared data is expected (present or not)."""
    return Path(os.environ.get("TOOLWIRE_TEST_DATA", ROOT.parent / "shared"))


def has_data() -> bool:
    """Whether the shared data folder is there (never in the fast tier)."""
    return os.environ.get(TIER) != FAST_TIER and (data_path() / "tokenizers").is_dir()


def data_dir() -> Path:
    """The shared test data folder; skips the calling test (or module) without it."""
    path = data_path()
    if os.environ.get(TIER) == FAST_TIER:
        pytest.skip("needs the shared data: the fast tier runs without it", allow_module_level=True)
    if not has_data():
        pytest.skip(
            f"test data not found at {path}; set TOOLWIRE_TEST_DATA to the shared folder",
            allow_module_level=True,
        )
    return path


def has_mistral_common() -> bool:
    """Whether the `mistral` extra (mistral-common) can be imported."""
    try:
        import mistral_common  # noqa: F401
    except ImportError:
        return False
    return True


def needs_mistral_common() -> None:
    """Skip the calling test without mistral-common (Mistral's own tokenizer files)."""
    if not has_mistral_common():
        pytest.skip("mistral-common is not installed (pip install 'toolwire[mistral]')")


#: The packages of the optional extras (pyproject.toml) that tests import -> the extra.
EXTRAS: dict[str, str] = {
    "fastapi": "server",
    "uvicorn": "server",
    "httpx": "server",
    "prometheus_client": "server",
    "llama_cpp": "llama",
    "xgrammar": "grammar",
    "mistral_common": "mistral",
    "sentencepiece": "mistral",
    "matplotlib": "check",
}


def missing_extra(package: str) -> str:
    """The skip reason for a test that needs `package`, an optional extra's."""
    top = package.split(".", 1)[0]
    extra = EXTRAS[top]
    if os.environ.get(TIER) == FAST_TIER and top in sys.modules and sys.modules[top] is None:
        return f"{package}: the fast tier runs without the {extra!r} extra"
    return f"{package} is not installed (the {extra!r} extra: pip install 'toolwire[{extra}]')"


def needs(package: str) -> Any:
    """`package` (an optional extra's, `EXTRAS`) imported; skips the calling test
    without it, the reason naming the extra."""
    try:
        return importlib.import_module(package)
    except ImportError:
        pytest.skip(missing_extra(package), allow_module_level=True)


def tokenizer_for(family: str) -> Tokenizer:
    """A real tokenizer from the shared data, loaded once per test session.

    The same object `peers.vocab.tokenizer_for` gives the conformance setups and the
    derived vocabularies (`tests/derived.py`): one loaded tokenizer per vocabulary.
    """
    return vocab.tokenizer_for(family, data_dir())


@cache
def mistral_tokenizer(filename: str) -> Tokenizer:
    """A Mistral tokenizer file from the shared data, loaded through mistral-common."""
    path = data_dir() / "tokenizers" / "mistral" / filename
    needs_mistral_common()
    return load_tokenizer(path)
