"""The conformance report: Markdown (defects, policies, examples), JSON and a PNG chart.

The Markdown is deterministic for a given run (no timings, no paths, rows in run
order, examples picked by a fixed rule), so regenerating it on unchanged code gives
the same file. Sections:

* how each implementation was driven: the requests per format (template, thinking
  switch, stop tokens), each implementation's settings as it reported them, and the
  code each one's driving steps follow, as it cites it (`Impl.driving`);
* defects: one row per (implementation, format), one column per `DEFECTS` property,
  a cell `passed/applicable` cases (bold when some failed);
* policies: what each implementation does with echoed markup, undeclared tools,
  truncated calls and `tool_choice` none (described, not scored);
* case kinds, with the rule each kind's expected message encodes;
* one example per failing defect cell: the run that failed that very property, and
  the command that reproduces the cell.

The chart (`chart.py`) needs matplotlib (the `check` extra): without it the chart is
skipped with a note.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter, defaultdict
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from toolwire.check import impls
from toolwire.check.cases import KINDS, POLICIES
from toolwire.check.properties import DEFECTS
from toolwire.check.run import CaseResult, CheckResults

__all__ = ["markdown", "matrix", "write_report"]

Cell = tuple[int, int]  # (passed, applicable)

_ABOUT = {
    "non-streaming": "calls right in the non-streaming response",
    "one-id": "calls right when each delta carries one id",
    "multi-id": "calls right in every run whose deltas carry several ids",
    "chunk-invariant": "every run gives the same message",
    "leak-free": "no special token or delimiter text in content/reasoning",
    "json-args": "arguments are a JSON object",
    "conservation": "content and reasoning are the expected text",
    "no-error": "no run raised",
}


def matrix(results: CheckResults) -> dict[tuple[str, str], dict[str, Cell]]:
    """(impl, format) -> defect property -> (passed, applicable), in run order."""
    table: dict[tuple[str, str], dict[str, list[int]]] = {}
    for r in results.results:
        row = table.setdefault((r.impl, r.format), {p: [0, 0] for p in DEFECTS})
        for prop, verdict in r.verdicts.items():
            if verdict.ok is not None:
                row[prop][1] += 1
                row[prop][0] += int(verdict.ok)
    return {k: {p: (v[0], v[1]) for p, v in row.items()} for k, row in table.items()}


def policies(results: CheckResults) -> dict[tuple[str, str], dict[str, str]]:
    """(impl, format) -> policy -> what the implementation did, counted over cases."""
    seen: dict[tuple[str, str], dict[str, Counter[str]]] = {}
    for r in results.results:
        row = seen.setdefault((r.impl, r.format), {p: Counter() for p in POLICIES})
        if r.policy is None or r.case.policy is None:
            continue
        batch, streams = r.policy[0], sorted(set(r.policy[1:]))
        stream = streams[0] if len(streams) == 1 else "varies by chunking"
        label = batch if stream == batch else f"{batch} (non-streaming), {stream} (streaming)"
        row[r.case.policy][label] += 1
    return {
        key: {
            p: "; ".join(f"{label}: {n}" for label, n in sorted(c.items())) or "—"
            for p, c in row.items()
        }
        for key, row in seen.items()
    }


def _cell(cell: Cell) -> str:
    passed, total = cell
    if total == 0:
        return "—"
    return f"{passed}/{total}" if passed == total else f"**{passed}/{total}**"


def _short(text: str, size: int = 160) -> str:
    text = text.replace("\n", "\\n").replace("|", "\\|").replace("`", "'")
    return text if len(text) <= size else text[: size - 1] + "…"


def _said(r: CaseResult, run: int) -> str:
    got = r.runs[run]
    if got.error:
        return f"error `{_short(got.error)}`"
    parts = [f"content `{_short(got.content)}`"]
    if got.reasoning:
        parts.append(f"reasoning `{_short(got.reasoning, 80)}`")
    parts.append(f"calls `{_short(json.dumps(got.calls, ensure_ascii=False))}`")
    return ", ".join(parts)


def _run_name(r: CaseResult, run: int) -> str:
    sizes = r.sizes(run)
    return "non-streaming" if sizes is None else f"streaming, deltas of {_short(str(sizes), 60)}"


def reproduce(r: CaseResult, command: Sequence[str]) -> str:
    """The command that reruns one case for one implementation (same limit and seed)."""
    words = [*command, "--impl", r.impl, "--format", r.format, "--case", r.case.id]
    return shlex.join(words)


def _example(r: CaseResult, prop: str, command: Sequence[str]) -> list[str]:
    run = r.verdicts[prop].run or 0
    exp = r.case.expected
    want = (
        f"content `{_short(exp.content)}`, "
        f"calls `{_short(json.dumps(exp.calls, default=str, ensure_ascii=False))}`"
        if exp is not None
        else "no expected message (fuzz)"
    )
    lines = [
        f"  - `{r.case.id}` ({len(r.case.ids)} ids), {_run_name(r, run)}: "
        f"got {_said(r, run)}; expected {want}"
    ]
    if prop == "chunk-invariant" and run != 0:
        lines.append(f"  - the non-streaming run of the same case gave {_said(r, 0)}")
    lines.append(f"  - reproduce: `{reproduce(r, command)}` (the run above is in its report)")
    return lines


def markdown(results: CheckResults, command: Sequence[str] = ("toolwire", "check")) -> str:
    """The whole report as Markdown."""
    base = _base(command)
    lines = ["# Conformance", ""]
    lines += [
        "Generated by `toolwire check` (`make check`); do not edit by hand. Reproduce:",
        "",
        "```bash",
        shlex.join(command),
        "```",
        "",
    ]
    if results.versions:
        lines += [
            "Peer versions: "
            + ", ".join(f"{k} {v}" for k, v in sorted(results.versions.items()))
            + ". Everything ran on CPU; only the parsers and their server-side steps run, "
            "fed the ids (and their incremental detokenization) a server would feed them.",
            "",
        ]
    lines += _setup(results)
    lines += _defects(results)
    lines += _policies(results)
    lines += _kinds(results)
    lines += _examples(results, base)
    return "\n".join(lines).rstrip() + "\n"


def _base(command: Sequence[str]) -> list[str]:
    """The command without the options a one-case rerun replaces."""
    out: list[str] = []
    skip = False
    for word in command:
        if skip:
            if word.startswith("--"):
                skip = False
            else:
                continue
        if word in ("--impl", "--format", "--report", "--case"):
            skip = True
            continue
        out.append(word)
    return out


def _setup(results: CheckResults) -> list[str]:
    lines = ["## How each implementation was driven", ""]
    lines += [f"- `{i.name}`: {i.about}" for i in impls.IMPLS.values()]
    lines += [
        "",
        "Every case is a request (tools, `tool_choice`, the thinking switch) and the output "
        "ids a model produced for it; every implementation is given the same request. "
        "The prompt is the chat template rendered for that request; a case with reasoning "
        "turns the switch on, any other case turns it off. Generation ends at a stop token: "
        "the check refuses a case whose output continues past one.",
        "",
        "| format | request |",
        "|---|---|",
    ]
    for fmt, req in results.requests.items():
        lines.append(f"| {fmt} | {'; '.join(req)} |")
    lines += ["", "| implementation | format | settings |", "|---|---|---|"]
    for (impl, fmt), settings in results.settings.items():
        lines.append(f"| {impl} | {fmt} | {'; '.join(settings)} |")
    lines.append("")
    names = {r.impl for r in results.results}
    for ran in impls.IMPLS.values():
        if ran.name in names:
            lines += ran.driving()
    if results.skipped:
        lines += ["Not run:", ""]
        lines += [f"- {i} / {f}: {why}" for (i, f), why in results.skipped.items()]
        lines.append("")
    return lines


def _defects(results: CheckResults) -> list[str]:
    lines = [
        "## Defects",
        "",
        "A cell is *cases passed / cases the property applies to* (bold: some failed). "
        "A case passes when every run it applies to holds the property. Policy cases "
        "(next section) count only for `chunk-invariant`, `leak-free`, `json-args` and "
        "`no-error` (not the truncated ones for the first and third: streaming a partial "
        "call is a policy).",
        "",
    ]
    lines += [f"- `{p}`: {_ABOUT[p]}" for p in DEFECTS]
    lines += [
        "",
        "| implementation | format | cases | " + " | ".join(DEFECTS) + " |",
        "|---|---|---:|" + "---:|" * len(DEFECTS),
    ]
    counts = Counter((r.impl, r.format) for r in results.results)
    for (impl, fmt), row in matrix(results).items():
        cells = " | ".join(_cell(row[p]) for p in DEFECTS)
        lines.append(f"| {impl} | {fmt} | {counts[(impl, fmt)]} | {cells} |")
    return [*lines, ""]


def _policies(results: CheckResults) -> list[str]:
    lines = [
        "## Policies (described, not scored)",
        "",
        "What each implementation does with the markup a policy governs, counted over "
        "cases: `call` (returned as a tool call), `content` (its text returned as "
        "content), `dropped` (neither); for nested spelled delimiters, `argument text` "
        "(kept inside the argument) or `read as markup`. When streaming and non-streaming "
        "differ, both are named.",
        "",
        "| implementation | format | " + " | ".join(POLICIES) + " |",
        "|---|---|" + "---|" * len(POLICIES),
    ]
    for (impl, fmt), row in policies(results).items():
        lines.append(f"| {impl} | {fmt} | " + " | ".join(row[p] for p in POLICIES) + " |")
    return [*lines, ""]


def _kinds(results: CheckResults) -> list[str]:
    first = (results.results[0].impl, results.results[0].format) if results.results else None
    counts = Counter(r.case.kind for r in results.results if (r.impl, r.format) == first)
    lines = [
        "## Case kinds",
        "",
        f"Counts are for {first[1] if first else '—'} (other formats differ slightly). "
        "A kind whose expected message encodes one implementation's rule says whose.",
        "",
        "| kind | cases | output | expected message encodes |",
        "|---|---:|---|---|",
    ]
    for kind, (what, rule) in KINDS.items():
        lines.append(f"| {kind} | {counts.get(kind, 0)} | {what} | {rule or 'no policy'} |")
    return [*lines, ""]


def _examples(results: CheckResults, command: Sequence[str]) -> list[str]:
    lines = ["## Failures, one example per failing defect cell", ""]
    groups: dict[tuple[str, str, str], list[CaseResult]] = defaultdict(list)
    for r in results.results:
        for prop in r.failed():
            groups[(r.impl, r.format, prop)].append(r)
    if not groups:
        lines.append("None.")
    for (impl, fmt, prop), failed in groups.items():
        by_kind = Counter(r.case.kind for r in failed)
        summary = ", ".join(f"{k} {n}" for k, n in by_kind.most_common())
        lines.append(f"- **{impl} / {fmt} / {prop}** ({summary}):")
        lines += _example(failed[0], prop, command)
    return lines


def _dump(results: CheckResults) -> dict[str, Any]:
    return {
        "versions": results.versions,
        "matrix": [
            {"impl": i, "format": f, **{p: list(c) for p, c in row.items()}}
            for (i, f), row in matrix(results).items()
        ],
        "policies": [{"impl": i, "format": f, **row} for (i, f), row in policies(results).items()],
        "skipped": [{"impl": i, "format": f, "why": w} for (i, f), w in results.skipped.items()],
        "failures": [
            {
                "impl": r.impl,
                "format": r.format,
                "case": r.case.id,
                "failed": {p: r.verdicts[p].run for p in r.failed()},
                "ids": r.case.ids,
                "request": {
                    "tool_choice": r.case.request.tool_choice,
                    "template_kwargs": r.case.request.template_kwargs,
                    "prompt_ids": len(r.case.request.prompt_ids),
                },
                "runs": [
                    {
                        "sizes": r.sizes(k),
                        "content": o.content,
                        "reasoning": o.reasoning,
                        "calls": o.calls,
                        "error": o.error,
                    }
                    for k, o in enumerate(r.runs)
                    if k in {v.run for v in r.verdicts.values()} or k == 0
                ],
            }
            for r in results.results
            if r.failed()
        ],
    }


def write_report(
    results: CheckResults, folder: Path, command: Sequence[str] = ("toolwire", "check")
) -> list[Path]:
    """Write conformance.md, conformance.json and (when possible) conformance.png."""
    folder.mkdir(parents=True, exist_ok=True)
    md, data, png = (folder / f"conformance.{ext}" for ext in ("md", "json", "png"))
    data.write_text(json.dumps(_dump(results), ensure_ascii=False, indent=1), encoding="utf-8")
    written = [md, data]
    note = ""
    if results.results and find_spec("matplotlib") is not None:
        from toolwire.check.chart import draw

        draw(data, png)
        written.append(png)
    if png in written:
        note = "\n![defects per implementation and format](conformance.png)\n"
    elif not results.results:
        note = "\n(No chart: nothing was run.)\n"
    else:
        note = "\n(No chart: install matplotlib, e.g. `pip install 'toolwire[check]'`.)\n"
    md.write_text(markdown(results, command) + note, encoding="utf-8")
    return written
