"""Fixtures and the hypothesis profile; the helpers live in named modules
(`tests/data.py` for the shared data, `tests/vocabulary.py`, `tests/cases.py`, ...)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.data import data_dir, tokenizer_for
from toolwire import Tokenizer


@pytest.fixture(scope="session")
def shared() -> Path:
    return data_dir()


@pytest.fixture(scope="session")
def load() -> Callable[[str], Tokenizer]:
    return tokenizer_for


# Property tests: a few hundred examples per property in CI; more with
# TOOLWIRE_EXAMPLES=5000 make test.
settings.register_profile(
    "toolwire",
    max_examples=int(os.environ.get("TOOLWIRE_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=os.environ.get("TOOLWIRE_RANDOM_SEED") is None,
)
settings.load_profile("toolwire")

# `toolwire serve` started by tests keeps its stored responses in this run's own file,
# not in the user's cache directory (tests of the default path pass their own).
os.environ.setdefault(
    "TOOLWIRE_STORE", os.path.join(tempfile.mkdtemp(prefix="toolwire-test-"), "responses.sqlite3")
)
