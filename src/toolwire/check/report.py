"""The conformance report: a Markdown matrix, a JSON dump and a PNG chart.

The matrix has one row per (implementation, format) and one column per property;
a cell is `passed/applicable` cases (`—` when no case applies). Below it, each
failing cell is broken down by case kind, with one failing case shown. The chart
(`chart.py`) needs matplotlib: it is drawn in this process when matplotlib is
importable, else with the peers' Python, else skipped with a note.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter, defaultdict
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from toolwire.check import impls
from toolwire.check.properties import PROPERTIES
from toolwire.check.run import CaseResult, CheckResults

__all__ = ["markdown", "matrix", "write_report"]

Cell = tuple[int, int]  # (passed, applicable)


def matrix(results: CheckResults) -> dict[tuple[str, str], dict[str, Cell]]:
    """(impl, format) -> property -> (passed, applicable), in run order."""
    table: dict[tuple[str, str], dict[str, list[int]]] = {}
    for r in results.results:
        row = table.setdefault((r.impl, r.format), {p: [0, 0] for p in PROPERTIES})
        for prop, verdict in r.verdicts.items():
            if verdict is not None:
                row[prop][1] += 1
                row[prop][0] += int(verdict)
    return {k: {p: (v[0], v[1]) for p, v in row.items()} for k, row in table.items()}


def _cell(cell: Cell) -> str:
    passed, total = cell
    if total == 0:
        return "—"
    return f"{passed}/{total}" if passed == total else f"**{passed}/{total}**"


def _short(text: str, size: int = 160) -> str:
    text = text.replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= size else text[: size - 1] + "…"


def _example(r: CaseResult) -> str:
    exp = r.case.expected
    got = r.sample
    said = (
        f"error `{_short(got.error)}`"
        if got.error
        else (f"content `{_short(got.content)}`, calls `{_short(json.dumps(got.calls))}`")
    )
    want = (
        f"content `{_short(exp.content)}`, calls `{_short(json.dumps(exp.calls, default=str))}`"
        if exp is not None
        else "no expected message (fuzz)"
    )
    run = "non-streaming" if r.sizes is None else f"deltas of {_short(str(r.sizes), 60)}"
    return f"`{r.case.id}` ({len(r.case.ids)} ids, {run}): got {said}; expected {want}"


def markdown(results: CheckResults, command: str = "") -> str:
    """The whole report as Markdown."""
    lines = ["# Conformance", ""]
    if command:
        lines += ["Reproduce:", "", "```bash", command, "```", ""]
    first = (results.results[0].impl, results.results[0].format) if results.results else None
    kinds = Counter(r.case.kind for r in results.results if (r.impl, r.format) == first)
    lines += [
        "Cells: cases passed / cases the property applies to (bold: some failed). "
        "A case passes when every run holds the property: the non-streaming path "
        "and every chunking of its ids.",
        "",
        "| implementation | format | cases | " + " | ".join(PROPERTIES) + " |",
        "|---|---|---:|" + "---:|" * len(PROPERTIES),
    ]
    counts = Counter((r.impl, r.format) for r in results.results)
    for (impl, fmt), row in matrix(results).items():
        cells = " | ".join(_cell(row[p]) for p in PROPERTIES)
        lines.append(f"| {impl} | {fmt} | {counts[(impl, fmt)]} | {cells} |")
    if kinds:
        lines += [
            "",
            f"Case kinds per format (as for {first}): "
            + ", ".join(f"{k} {n}" for k, n in kinds.items()),
        ]
    if results.skipped:
        lines += ["", "Not run:", ""]
        lines += [f"- {i} / {f}: {why}" for (i, f), why in results.skipped.items()]
    lines += ["", "## Failures by case kind", ""]
    groups: dict[tuple[str, str, str], list[CaseResult]] = defaultdict(list)
    for r in results.results:
        for prop, verdict in r.verdicts.items():
            if verdict is False:
                groups[(r.impl, r.format, prop)].append(r)
    if not groups:
        lines.append("None.")
    for (impl, fmt, prop), failed in groups.items():
        by_kind = Counter(r.case.kind for r in failed)
        summary = ", ".join(f"{k} {n}" for k, n in by_kind.most_common())
        lines.append(f"- **{impl} / {fmt} / {prop}**: {summary}. E.g. {_example(failed[0])}")
    return "\n".join(lines) + "\n"


def _dump(results: CheckResults) -> dict[str, Any]:
    return {
        "matrix": [
            {"impl": i, "format": f, **{p: list(c) for p, c in row.items()}}
            for (i, f), row in matrix(results).items()
        ],
        "skipped": [{"impl": i, "format": f, "why": w} for (i, f), w in results.skipped.items()],
        "failures": [
            {
                "impl": r.impl,
                "format": r.format,
                "case": r.case.id,
                "failed": [p for p, v in r.verdicts.items() if v is False],
                "ids": r.case.ids,
                "run": r.sizes,
                "got": {
                    "content": r.sample.content,
                    "reasoning": r.sample.reasoning,
                    "calls": r.sample.calls,
                    "error": r.sample.error,
                },
            }
            for r in results.results
            if False in r.verdicts.values()
        ],
    }


def write_report(results: CheckResults, folder: Path, command: str = "") -> list[Path]:
    """Write conformance.md, conformance.json and (when possible) conformance.png."""
    folder.mkdir(parents=True, exist_ok=True)
    md, data, png = (folder / f"conformance.{ext}" for ext in ("md", "json", "png"))
    data.write_text(json.dumps(_dump(results), ensure_ascii=False, indent=1), encoding="utf-8")
    written = [md, data]
    note = ""
    if find_spec("matplotlib") is not None:
        from toolwire.check.chart import draw

        draw(data, png)
        written.append(png)
    elif (python := impls.peer_python()) is not None:
        cmd = [str(python), "-m", "toolwire.check.chart", str(data), str(png)]
        subprocess.run(cmd, check=False, capture_output=True)
        if png.is_file():
            written.append(png)
    if png not in written:
        note = "\n(No chart: install matplotlib, e.g. `pip install 'toolwire[check]'`.)\n"
    md.write_text(markdown(results, command) + note, encoding="utf-8")
    return written
