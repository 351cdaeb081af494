"""BFCL v4 cases from the shared corpus, read by `toolwire.check.corpus`."""

from __future__ import annotations

from functools import cache
from typing import Any

from tests.data import data_dir
from toolwire.check.corpus import CATEGORIES, json_schema, load_bfcl

__all__ = ["CATEGORIES", "json_schema", "load"]


@cache
def load(category: str) -> list[tuple[str, list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]]:
    """(id, tools, calls) per case; each argument takes its first acceptable value."""
    return [
        (case.id, case.tools, [(name, dict(args)) for name, args in case.calls])
        for case in load_bfcl(data_dir() / "corpora" / "bfcl", category)
    ]
