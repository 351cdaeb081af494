"""The conformance run: cases per format, each implementation's outcomes, verdicts.

Data flow::

    formats x setups --load--> tokenizer --prompts--> requests, stop ids
    --cases.generate--> cases (check_stops refuses any past a stop token)
    cases --impls.IMPLS[name].run--> outcomes per run
    outcomes --properties.judge / policy_outcome--> defects, policies --report--> Markdown

`run_check` does no printing; the CLI prints and picks the exit code (non-zero when
toolwire itself fails a defect property on any case).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from toolwire import formats
from toolwire.check import impls
from toolwire.check.cases import GROUPS, Case, check_stops, generate
from toolwire.check.corpus import CATEGORIES, BfclCase, bfcl_folder, load_bfcl
from toolwire.check.prompts import Prompter, stop_ids
from toolwire.check.properties import Outcome, Verdict, judge, policy_outcome
from toolwire.check.setup import load, setup_for
from toolwire.errors import ToolwireError, UsageError
from toolwire.tokenizer import Tokenizer, load_tokenizer

__all__ = ["CaseResult", "CheckOptions", "CheckResults", "run_check"]


@dataclass(frozen=True)
class CheckOptions:
    """What to run. `limit`: BFCL entries per category (the echo group uses half)."""

    data: Path
    impls: Sequence[str] = ("toolwire",)
    formats: Sequence[str] = ()
    groups: Sequence[str] = GROUPS
    bfcl: Path | None = None
    limit: int = 40
    seed: int = 0
    #: Only these case ids (all when empty): to reproduce one cell.
    cases: Sequence[str] = ()
    #: Formats run at once (their peers' workers are separate processes).
    jobs: int = 1
    #: format name -> tokenizer, overriding the setups' (a test suite's own cache).
    tokenizer: Callable[[str], Tokenizer] | None = None
    #: A tokenizer folder or file (a user's model) for every format, with its own
    #: chat template, in place of the setups' tokenizers and templates.
    tokenizer_path: Path | None = None


@dataclass(frozen=True)
class CaseResult:
    """One case's verdicts for one implementation, with every run's outcome."""

    impl: str
    format: str
    case: Case
    verdicts: dict[str, Verdict]
    runs: list[Outcome]
    #: What each run did with the policy-governed markup (policy cases only).
    policy: list[str] | None = None

    def failed(self) -> list[str]:
        return [p for p, v in self.verdicts.items() if v.ok is False]

    def sizes(self, run: int) -> list[int] | None:
        """The delta sizes of a run (None: the non-streaming run)."""
        return None if run == 0 else self.case.chunkings[run - 1]


@dataclass
class CheckResults:
    results: list[CaseResult] = field(default_factory=list)
    #: (impl, format) -> why it was not run.
    skipped: dict[tuple[str, str], str] = field(default_factory=dict)
    #: (impl, format) -> the settings it ran with.
    settings: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    #: format -> how its requests were made (template, switch, stop tokens).
    requests: dict[str, list[str]] = field(default_factory=dict)
    #: Package versions the peers ran with.
    versions: dict[str, str] = field(default_factory=dict)

    def failures(self, impl: str = "toolwire") -> list[CaseResult]:
        return [r for r in self.results if r.impl == impl and r.failed()]


def run_check(options: CheckOptions, progress: Callable[[str], None] | None = None) -> CheckResults:
    """Run every selected implementation on every selected format's cases."""
    say = progress or (lambda _: None)
    unknown = [g for g in options.groups if g not in GROUPS]
    if unknown:
        raise UsageError(f"unknown case groups {unknown}; known: {', '.join(GROUPS)}")
    bad = [i for i in options.impls if i not in impls.IMPLS]
    if bad:
        raise UsageError(f"unknown implementations {bad}; known: {', '.join(impls.IMPLS)}")
    # Unknown names fail here, before any work (and any thread); an alias becomes
    # its canonical name.
    names = [formats.get(n).name for n in options.formats] or formats.names()
    folder = bfcl_folder(options.bfcl, options.data)
    corpus: dict[str, list[BfclCase]] = {c: load_bfcl(folder, c) for c in CATEGORIES}
    out = CheckResults()
    jobs = max(1, options.jobs)
    # Formats are independent; the peers' work runs in their own processes, so a few
    # formats at once use the machine better. Results are merged in format order.
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        parts = list(pool.map(lambda name: _format(name, options, corpus, say), names))
    for part in parts:
        out.results += part.results
        out.skipped.update(part.skipped)
        out.settings.update(part.settings)
        out.requests.update(part.requests)
        out.versions.update(part.versions)
    return out


def _format(
    name: str,
    options: CheckOptions,
    corpus: dict[str, list[BfclCase]],
    say: Callable[[str], None],
) -> CheckResults:
    """Every selected implementation on one format's cases."""
    out = CheckResults()
    fmt = formats.get(name)
    prof = setup_for(name)
    if options.tokenizer_path is not None:
        prof = replace(prof, tokenizer=str(options.tokenizer_path), template=None)
    try:
        if options.tokenizer_path is not None:
            tok = load_tokenizer(options.tokenizer_path)
        elif options.tokenizer is not None:
            tok = options.tokenizer(name)
        else:
            tok = load(prof.tokenizer, options.data)
    except (ToolwireError, OSError) as exc:
        for skipped in options.impls:
            out.skipped[(skipped, name)] = f"no tokenizer: {exc}"
        return out
    prompter = Prompter(fmt, tok, prof, options.data)
    stops = stop_ids(tok, prof)
    cases = generate(
        fmt,
        tok,
        corpus,
        options.groups,
        limit=options.limit,
        seed=options.seed,
        prompter=prompter,
        stops=stops,
    )
    if options.cases:
        cases = [c for c in cases if c.id in options.cases]
    for case in cases:
        check_stops(case, stops)
    out.requests[name] = _requests(prof.template, prof.thinking, prompter, tok, stops)
    markers = [*tok.added_tokens, *fmt.delimiters]
    target = impls.Target(fmt, tok, prof, options.data, prompter.template)
    for impl_name in options.impls:
        impl = impls.IMPLS[impl_name]
        why = impl.supports(target)
        if why is not None:
            out.skipped[(impl_name, name)] = why
            continue
        say(f"{impl_name} {name}: {len(cases)} cases")
        try:
            ran = impl.run(target, cases)
        except UsageError as exc:  # a peer that cannot run this format: say why
            out.skipped[(impl_name, name)] = str(exc).strip().splitlines()[-1][:200]
            continue
        out.settings[(impl_name, name)] = ran.settings
        out.versions.update(ran.versions)
        for case, runs in zip(cases, ran.outcomes, strict=True):
            verdicts = judge(case, runs, markers)
            policy = [policy_outcome(case, o) for o in runs] if case.policy else None
            out.results.append(CaseResult(impl_name, name, case, verdicts, runs, policy))
    say(f"done {name}")
    return out


def _requests(
    template: str | None,
    switch: str | None,
    prompter: Prompter,
    tok: Tokenizer,
    stops: frozenset[int],
) -> list[str]:
    names = sorted(tok.decode([i]) for i in stops)
    lines = [
        f"chat template: {template or 'the tokenizer’s own'}"
        + (f" ({prompter.problem}: no prompt ids)" if prompter.problem else ""),
        f"thinking switch: `{switch}` (True when the case has reasoning, else False)"
        if switch
        else "thinking switch: none (the template decides)",
        "stop tokens: " + ", ".join(f"`{n}`" for n in names),
    ]
    return lines
