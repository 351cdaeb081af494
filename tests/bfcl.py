"""BFCL v4 cases from the shared corpus: tools (as OpenAI tools) and ground-truth calls."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from tests.conftest import data_dir

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


def json_schema(schema: Any) -> Any:
    """BFCL's schema dialect as JSON Schema (dict/float/tuple/any)."""
    if isinstance(schema, list):
        return [json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: json_schema(v) for k, v in schema.items()}
    kind = out.get("type")
    if kind == "any":
        del out["type"]
    elif isinstance(kind, str):
        out["type"] = _TYPES.get(kind, kind)
    return out


@cache
def load(category: str) -> list[tuple[str, list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]]:
    """(id, tools, calls) per case; each argument takes its first acceptable value."""
    root = data_dir() / "corpora" / "bfcl"
    answers = {}
    for line in (root / "possible_answer" / f"BFCL_v4_{category}.json").read_text().splitlines():
        row = json.loads(line)
        answers[row["id"]] = row["ground_truth"]
    out = []
    for line in (root / f"BFCL_v4_{category}.json").read_text().splitlines():
        row = json.loads(line)
        tools = [
            {"type": "function", "function": {**f, "parameters": json_schema(f["parameters"])}}
            for f in row["function"]
        ]
        calls = []
        for entry in answers[row["id"]]:
            ((name, params),) = entry.items()
            args = {}
            for key, values in params.items():
                chosen = [v for v in values if v != ""]
                if chosen:
                    args[key] = chosen[0]
            calls.append((name, args))
        out.append((row["id"], tools, calls))
    return out
