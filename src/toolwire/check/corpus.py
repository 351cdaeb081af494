"""BFCL calls: declared tools and ground-truth calls, from any BFCL-format folder.

A BFCL folder holds `BFCL_v<N>_<category>.json` (JSON lines: `id`, `question`,
`function`) and `possible_answer/` files of the same names (`id`, `ground_truth`:
`[{name: {arg: [acceptable values...]}}]`, `""` meaning "may be omitted"). Sources, in
order: a folder the caller names; the `bfcl-eval` package's data when installed;
`<data>/corpora/bfcl`. Each argument takes its first acceptable value; BFCL's schema
dialect (dict, float, tuple, any) is mapped to JSON Schema.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolwire.errors import UsageError
from toolwire.formats.spec import RenderedCall

__all__ = ["CATEGORIES", "BfclCase", "bfcl_folder", "json_schema", "load_bfcl"]

#: Categories with ground-truth calls (irrelevance has none).
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


@dataclass(frozen=True)
class BfclCase:
    """One BFCL entry: its id, tools (OpenAI shape) and calls (name, arguments)."""

    id: str
    tools: list[dict[str, Any]]
    calls: list[RenderedCall]


def json_schema(schema: Any) -> Any:
    """BFCL's schema dialect as JSON Schema."""
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


def bfcl_folder(explicit: Path | None, data: Path) -> Path:
    """Where BFCL files are read from (see the module docstring for the order)."""
    if explicit is not None:
        return explicit
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is not None and spec.submodule_search_locations:
        package = Path(next(iter(spec.submodule_search_locations))) / "data"
        if (package / "possible_answer").is_dir():
            return package
    return data / "corpora" / "bfcl"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def load_bfcl(folder: Path, category: str) -> list[BfclCase]:
    """The cases of one category; `UsageError` when the folder lacks it."""
    found = sorted(folder.glob(f"BFCL_v*_{category}.json"))
    if not found:
        raise UsageError(f"{folder}: no BFCL_v*_{category}.json (point --bfcl at BFCL data)")
    questions = found[-1]
    answers_path = folder / "possible_answer" / questions.name
    answers = {row["id"]: row["ground_truth"] for row in _lines(answers_path)}
    out = []
    for row in _lines(questions):
        if row["id"] not in answers:
            continue
        tools = [
            {"type": "function", "function": {**f, "parameters": json_schema(f["parameters"])}}
            for f in row["function"]
        ]
        calls: list[RenderedCall] = []
        for entry in answers[row["id"]]:
            ((name, params),) = entry.items()
            args = {}
            for key, values in params.items():
                chosen = [v for v in values if v != ""]
                if chosen:
                    args[key] = chosen[0]
            calls.append((name, args))
        out.append(BfclCase(row["id"], tools, calls))
    return out
