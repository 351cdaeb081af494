"""Shared test data: real tokenizers and BFCL corpora from `TOOLWIRE_TEST_DATA`.

The one place tests reach `../shared` (or wherever `TOOLWIRE_TEST_DATA` points).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from toolwire import Tokenizer, load_tokenizer

ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """The shared test data folder; fails loudly when it is missing."""
    path = Path(os.environ.get("TOOLWIRE_TEST_DATA", ROOT.parent / "shared"))
    if not (path / "tokenizers").is_dir():
        raise RuntimeError(
            f"test data not found at {path}; set TOOLWIRE_TEST_DATA to the shared folder"
        )
    return path


@cache
def tokenizer_for(family: str) -> Tokenizer:
    """A real tokenizer from the shared data, loaded once per test session."""
    return load_tokenizer(data_dir() / "tokenizers" / family)


@cache
def mistral_tokenizer(filename: str) -> Tokenizer:
    """A Mistral tokenizer file from the shared data, loaded through mistral-common."""
    return load_tokenizer(data_dir() / "tokenizers" / "mistral" / filename)


@pytest.fixture(scope="session")
def shared() -> Path:
    return data_dir()


@pytest.fixture(scope="session")
def load() -> Callable[[str], Tokenizer]:
    return tokenizer_for


# Property tests: a few hundred examples per property in CI; more with
# TOOLWIRE_EXAMPLES=5000 make test.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "toolwire",
    max_examples=int(os.environ.get("TOOLWIRE_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=os.environ.get("TOOLWIRE_RANDOM_SEED") is None,
)
settings.load_profile("toolwire")
