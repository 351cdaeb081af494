"""The properties a parser's outcomes must hold, judged one case at a time.

An `Outcome` is what an implementation returned for one run of a case (one chunking,
or the non-streaming path): content, reasoning, calls, or the error it raised. Text is
compared without whitespace for conservation and with whitespace runs collapsed
elsewhere (implementations differ in the blank lines they keep around structure, and
toolwire treats whitespace next to structure as markup; no property here is about
whitespace). Properties:

* `correct`: the calls are the expected ones (names, and arguments equal as JSON).
* `chunk-invariant`: every run gives the same normalized message.
* `echo-safe`: markup spelled from sub-word ids never becomes a call.
* `leak-free`: no special token or delimiter text in content or reasoning beyond
  what the output legitimately shows (`Case.allowed`).
* `json-args`: every call's arguments are a JSON object.
* `conservation`: content and reasoning are the expected text: nothing lost,
  duplicated, or moved between them (a call released as content keeps all its text;
  a section wrapper around it is consumed markup either way, `Case.markup`).
* `no-error`: no run raised.

A property that does not apply to a case (no expected message for fuzz cases, no
echoed markup) is None; a case passes a property when every run holds it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.check.cases import Case

__all__ = ["PROPERTIES", "Outcome", "judge"]

PROPERTIES = (
    "correct",
    "chunk-invariant",
    "echo-safe",
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


def _squash(text: str) -> str:
    return " ".join(text.split())


def _arguments(text: str) -> Any:
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return ("invalid", text)
    return value


def _normal(outcome: Outcome) -> tuple[str, str, list[tuple[str, str]]]:
    calls = [(n, json.dumps(_arguments(a), sort_keys=True)) for n, a in outcome.calls]
    return _squash(outcome.content), _squash(outcome.reasoning), calls


def _same_call(name: str, arguments: str, expected: tuple[str, Any]) -> bool:
    return name == expected[0] and _arguments(arguments) == expected[1]


def _markers(case: Case, markers: Iterable[str]) -> list[str]:
    return sorted({m for m in markers if m})


def judge(
    case: Case, outcomes: Sequence[Outcome], markers: Iterable[str]
) -> dict[str, bool | None]:
    """Each property's verdict for one case over all its runs (None: not applicable)."""
    errors = [o for o in outcomes if o.error is not None]
    ok = list({o: None for o in outcomes if o.error is None})  # identical runs judged once
    verdict: dict[str, bool | None] = {"no-error": not errors}
    forms = {json.dumps(_normal(o)) for o in ok}
    verdict["chunk-invariant"] = len(forms) <= 1 and not errors
    verdict["json-args"] = not errors and all(
        isinstance(_arguments(a), dict) for o in ok for _, a in o.calls
    )
    allowed = case.allowed
    watched = _markers(case, markers)
    verdict["leak-free"] = not errors and all(
        (o.content + "\n" + o.reasoning).count(m) <= allowed.count(m) for o in ok for m in watched
    )
    expected = case.expected
    if expected is None:
        verdict["correct"] = verdict["conservation"] = None
    else:
        verdict["correct"] = not errors and all(
            len(o.calls) == len(expected.calls)
            and all(_same_call(n, a, e) for (n, a), e in zip(o.calls, expected.calls, strict=True))
            for o in ok
        )

        def bare(text: str) -> str:
            for mark in case.markup:
                text = text.replace(mark, "")
            return "".join(text.split())

        content, reasoning = bare(expected.content), bare(expected.reasoning)
        verdict["conservation"] = not errors and all(
            bare(o.content) == content and bare(o.reasoning) == reasoning for o in ok
        )
    if case.echoed:
        genuine = len(expected.calls) if expected is not None else 0
        verdict["echo-safe"] = not errors and all(
            len(o.calls) <= genuine
            and not any(_same_call(n, a, e) for n, a in o.calls[genuine:] for e in case.echoed)
            for o in ok
        )
    else:
        verdict["echo-safe"] = None
    return {p: verdict[p] for p in PROPERTIES}
