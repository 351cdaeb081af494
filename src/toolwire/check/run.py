"""The conformance run: cases per format, each implementation's outcomes, verdicts.

Data flow::

    formats x profiles --vocab--> tokenizer --cases.generate--> cases
    cases --impls.run_toolwire / impls.run_peer--> outcomes per run
    outcomes --properties.judge--> verdicts --report--> Markdown matrix, PNG, JSON

`run_check` does no printing; the CLI prints and picks the exit code (non-zero when
toolwire itself fails any case).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from toolwire import formats
from toolwire.check import impls
from toolwire.check.cases import GROUPS, Case, generate
from toolwire.check.corpus import CATEGORIES, BfclCase, bfcl_folder, load_bfcl
from toolwire.check.profiles import profile
from toolwire.check.properties import Outcome, judge
from toolwire.check.vocab import tokenizer_file, tokenizer_for
from toolwire.errors import UsageError
from toolwire.tokenizer import Tokenizer

__all__ = ["IMPLS", "CaseResult", "CheckOptions", "CheckResults", "run_check"]

IMPLS = ("toolwire", *impls.PEERS)


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
    #: format name -> tokenizer, overriding the profiles (a test suite's own cache).
    tokenizer: Callable[[str], Tokenizer] | None = None


@dataclass(frozen=True)
class CaseResult:
    """One case's verdicts for one implementation, with a failing run to show."""

    impl: str
    format: str
    case: Case
    verdicts: dict[str, bool | None]
    #: The first run that differs from the expected message (or the first run).
    sample: Outcome
    #: That run's delta sizes (None: the non-streaming run).
    sizes: list[int] | None = None


@dataclass
class CheckResults:
    results: list[CaseResult] = field(default_factory=list)
    #: (impl, format) -> why it was not run.
    skipped: dict[tuple[str, str], str] = field(default_factory=dict)

    def failures(self, impl: str = "toolwire") -> list[CaseResult]:
        return [r for r in self.results if r.impl == impl and False in r.verdicts.values()]


def _sample(
    case: Case, outcomes: list[Outcome], verdicts: dict[str, bool | None]
) -> tuple[Outcome, list[int] | None]:
    """The most telling run: one that raised, else one differing from the first."""
    runs: list[list[int] | None] = [None, *case.chunkings]
    for outcome, sizes in zip(outcomes, runs, strict=True):
        if outcome.error is not None:
            return outcome, sizes
    if verdicts.get("chunk-invariant") is False:
        first = outcomes[0]
        for outcome, sizes in zip(outcomes, runs, strict=True):
            if outcome != first:
                return outcome, sizes
    return outcomes[0], None


def run_check(options: CheckOptions, progress: Callable[[str], None] | None = None) -> CheckResults:
    """Run every selected implementation on every selected format's cases."""
    say = progress or (lambda _: None)
    unknown = [g for g in options.groups if g not in GROUPS]
    if unknown:
        raise UsageError(f"unknown case groups {unknown}; known: {', '.join(GROUPS)}")
    bad = [i for i in options.impls if i not in IMPLS]
    if bad:
        raise UsageError(f"unknown implementations {bad}; known: {', '.join(IMPLS)}")
    names = list(options.formats) or formats.names()
    folder = bfcl_folder(options.bfcl, options.data)
    corpus: dict[str, list[BfclCase]] = {c: load_bfcl(folder, c) for c in CATEGORIES}
    out = CheckResults()
    env = {"TIKTOKEN_ENCODINGS_BASE": str(options.data / "tokenizers" / "gpt_oss")}
    for name in names:
        fmt = formats.get(name)
        prof = profile(name)
        try:
            if options.tokenizer is not None:
                tok = options.tokenizer(name)
            else:
                tok = tokenizer_for(prof.tokenizer, options.data)
        except (UsageError, OSError) as exc:
            for impl in options.impls:
                out.skipped[(impl, name)] = f"no tokenizer: {exc}"
            continue
        cases = generate(fmt, tok, corpus, options.groups, limit=options.limit, seed=options.seed)
        markers = [*tok.added_tokens, *fmt.delimiters]
        for impl in options.impls:
            say(f"{impl} {name}: {len(cases)} cases")
            if impl == "toolwire":
                outcomes = impls.run_toolwire(fmt, tok, cases)
            else:
                spec = getattr(prof, impl)
                if spec is None:
                    out.skipped[(impl, name)] = f"{impl} has no parser for this format"
                    continue
                if impls.peer_python() is None:
                    raise UsageError(impls.how_to_make(impl))
                try:
                    path = tokenizer_file(prof.tokenizer, options.data)
                    outcomes = impls.run_peer(impl, spec, fmt, tok, path, cases, env)
                except Exception as exc:  # a peer that cannot run this format: say why
                    out.skipped[(impl, name)] = str(exc).strip().splitlines()[-1][:200]
                    continue
            for case, runs in zip(cases, outcomes, strict=True):
                verdicts = judge(case, runs, markers)
                sample, sizes = _sample(case, runs, verdicts)
                out.results.append(CaseResult(impl, name, case, verdicts, sample, sizes))
    return out
