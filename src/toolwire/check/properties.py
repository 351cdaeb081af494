"""What a case's outcomes show: defects (judged) and policies (described).

An `Outcome` is what an implementation returned for one run of a case: the
non-streaming path (run 0) or one chunking of its ids (runs 1...), as content,
reasoning, calls, or the error it raised. Text is compared without whitespace for
conservation and with whitespace runs collapsed elsewhere (implementations differ in
the blank lines they keep around structure; no property here is about whitespace).

Defects, a failure of which is a bug whatever an implementation's policy
(`DEFECTS`; judged on every case kind except where a policy decides the answer):

* `non-streaming`, `one-id`, `multi-id`: the calls are the expected ones (names, and
  arguments equal as JSON), in the non-streaming run, in the run fed one id per delta,
  and in every run whose deltas carry several ids (the single chunk, 8 ids per delta,
  random partitions and, for `chunking/` cases, every 2-split and sampled 3-splits).
  Policy cases are not judged here: their expected calls are one implementation's rule.
* `chunk-invariant`: every run gives the same normalized message (all kinds but
  `truncated`, where streaming a partial call is a policy).
* `leak-free`: no special token or delimiter text in content or reasoning beyond
  what the output legitimately shows (`Case.allowed`).
* `json-args`: every call's arguments are a JSON object (all kinds but `truncated`).
* `conservation`: content and reasoning are the expected text (nothing lost,
  duplicated or moved between them), on cases with no policy-governed text.
* `no-error`: no run raised.

A verdict names the first run that fails it (`Verdict.run`), so a report can show the
run that failed that very property. Policies (`cases.POLICIES`) are described per run
by `policy_outcome`: what became of the policy-governed markup (a call, content, or
dropped).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.check.cases import Case

__all__ = ["DEFECTS", "Outcome", "Verdict", "judge", "policy_outcome"]

DEFECTS = (
    "non-streaming",
    "one-id",
    "multi-id",
    "chunk-invariant",
    "leak-free",
    "json-args",
    "conservation",
    "no-error",
)


@dataclass(frozen=True)
class Outcome:
    """One run's result, in plain data (it crosses a process boundary as JSON)."""

    content: str = ""
    reasoning: str = ""
    #: (name, arguments string) per call, in order.
    calls: tuple[tuple[str, str], ...] = ()
    #: The exception the implementation raised, if any (type and message).
    error: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        return cls(
            content=data.get("content") or "",
            reasoning=data.get("reasoning") or "",
            calls=tuple((str(n), str(a)) for n, a in data.get("calls") or []),
            error=data.get("error"),
        )


@dataclass(frozen=True)
class Verdict:
    """A property's verdict on one case: None when it does not apply."""

    ok: bool | None
    #: The first failing run (0: non-streaming; k: `case.chunkings[k - 1]`).
    run: int | None = None


def _squash(text: str) -> str:
    return " ".join(text.split())


def _arguments(text: str) -> Any:
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return ("invalid", text)
    return value


def _normal(outcome: Outcome) -> str:
    calls = [(n, json.dumps(_arguments(a), sort_keys=True)) for n, a in outcome.calls]
    return json.dumps([_squash(outcome.content), _squash(outcome.reasoning), calls])


def _same_call(name: str, arguments: str, expected: tuple[str, Any]) -> bool:
    return name == expected[0] and _arguments(arguments) == expected[1]


def _first(runs: Iterable[int], bad: Any) -> Verdict:
    """Passed unless `bad(run)` holds for one of `runs` (None: no run applies)."""
    runs = list(runs)
    if not runs:
        return Verdict(None)
    failing = next((k for k in runs if bad(k)), None)
    return Verdict(failing is None, failing)


def judge(case: Case, outcomes: Sequence[Outcome], markers: Iterable[str]) -> dict[str, Verdict]:
    """Each defect property's verdict for one case over all its runs."""
    sizes: list[list[int] | None] = [None, *case.chunkings]
    assert len(outcomes) == len(sizes), "one outcome per run"
    runs = range(len(outcomes))
    streams = [k for k in runs if sizes[k] is not None]
    one_id = [k for k in streams if max(sizes[k] or [1]) == 1]
    multi_id = [k for k in streams if max(sizes[k] or [1]) > 1]
    failed = [o.error is not None for o in outcomes]
    policy = case.policy
    out: dict[str, Verdict] = {"no-error": _first(runs, lambda k: failed[k])}
    expected = case.expected
    if expected is not None and policy is None:

        def wrong(k: int) -> bool:
            calls = outcomes[k].calls
            return failed[k] or not (
                len(calls) == len(expected.calls)
                and all(
                    _same_call(n, a, e) for (n, a), e in zip(calls, expected.calls, strict=True)
                )
            )

        out["non-streaming"] = _first([0], wrong)
        out["one-id"] = _first(one_id, wrong)
        out["multi-id"] = _first(multi_id, wrong)

        def bare(text: str) -> str:
            for mark in case.markup:
                text = text.replace(mark, "")
            return "".join(text.split())

        content, reasoning = bare(expected.content), bare(expected.reasoning)
        out["conservation"] = _first(
            runs,
            lambda k: (
                failed[k]
                or bare(outcomes[k].content) != content
                or bare(outcomes[k].reasoning) != reasoning
            ),
        )
    else:
        for prop in ("non-streaming", "one-id", "multi-id", "conservation"):
            out[prop] = Verdict(None)
    if case.kind == "truncated":
        out["chunk-invariant"] = out["json-args"] = Verdict(None)
    else:
        forms = [_normal(o) for o in outcomes]
        out["chunk-invariant"] = _first(runs, lambda k: failed[k] or forms[k] != forms[0])
        out["json-args"] = _first(
            runs, lambda k: any(not isinstance(_arguments(a), dict) for _, a in outcomes[k].calls)
        )
    watched = sorted({m for m in markers if m})
    allowed = case.allowed

    def leaks(k: int) -> bool:
        text = outcomes[k].content + "\n" + outcomes[k].reasoning
        return any(text.count(m) > allowed.count(m) for m in watched)

    out["leak-free"] = _first(runs, leaks)
    return {p: out[p] for p in DEFECTS}


def policy_outcome(case: Case, outcome: Outcome) -> str:
    """What one run did with the case's policy-governed markup (a short label)."""
    if outcome.error is not None:
        return "error"
    expected = case.expected
    genuine = len(expected.calls) if expected is not None else 0
    text = outcome.content + outcome.reasoning
    if case.kind == "nested" and expected is not None:
        kept = len(outcome.calls) == 1 and _same_call(*outcome.calls[0], expected.calls[0])
        return "argument text" if kept else "read as markup"
    if case.kind in ("echo", "mixed"):
        extra = len(outcome.calls) > genuine
        return "call" if extra else ("content" if _quoted(case) in _squash(text) else "dropped")
    if outcome.calls:
        return "call"
    name = _policy_name(case)
    return "content" if name and name in text else "dropped"


def _quoted(case: Case) -> str:
    """A piece of the echoed markup that survives as text when it is kept."""
    name = case.echoed[-1][0] if case.echoed else ""
    return name


def _policy_name(case: Case) -> str:
    """The name of the call the policy is about (appears in its markup)."""
    expected = case.expected
    if expected is None:
        return ""
    if case.kind == "undeclared":
        marker = "undeclared_"
        at = expected.content.find(marker)
        if at >= 0:
            end = at + len(marker)
            while end < len(expected.content) and (
                expected.content[end].isalnum() or expected.content[end] == "_"
            ):
                end += 1
            return expected.content[at:end]
    for tool in case.tools:
        name = str(tool.get("function", {}).get("name", ""))
        if name and name in expected.content:
            return name
    return ""
