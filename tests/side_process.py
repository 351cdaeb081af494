"""Checks run in a second interpreter beside the test session, each outcome reported by
the session's own test item.

The grammar agreement tests check every format on two constraint backends, and the two
halves share nothing but their code; each is CPU-bound in XGrammar's C++ or
llguidance's Rust. The session runs one half itself and hands the other to a second
interpreter that runs the same checks in the same order, so that on two cores the
module takes about its longer half's time rather than the sum::

    session                                   side process (python -m tests.side_process)
    Side(jobs) ------- the jobs, as JSON ----> for key, "module:function", args in jobs:
                                                   function(*args)
    side.report(key) <- one line per job ----- {"key", "outcome", "detail"}, in job order
      passes, skips with the reason, or
      fails with the side's traceback

A job's function runs as in a test: `pytest.skip` in it is a skip, any other exception a
failure. A side process that dies fails every item still waiting, with its output.

A test module takes part by defining `side_jobs(items)` (its selected items -> jobs).
`start(session)` runs when collection ends (tests/conftest.py), so that the side
process also runs beside the modules before its own; `of(module)` is its Side, and
`close_all()` ends them with the session.
"""

from __future__ import annotations

import importlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Sequence
from typing import Any

import pytest

from tests.data import ROOT

#: How long an item waits for its job's outcome (the side process runs every job before
#: it in order).
WAIT = 1200.0
#: What the side process prefixes its outcome lines with (a check may print).
MARK = "side-outcome "

Job = tuple[str, str, Sequence[Any]]


class Side:
    """The side process running `jobs` ((key, "module:function", args), in order)."""

    def __init__(self, jobs: Sequence[Job]) -> None:
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed by close()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.side_process"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps([list(job) for job in jobs]))
        self._process.stdin.close()
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._outcomes: dict[str, dict[str, str]] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            if line.startswith(MARK):
                self._lines.put(line[len(MARK) :])
        self._lines.put(None)

    def report(self, key: str) -> None:
        """Return if job `key` passed; skip or fail as it did otherwise."""
        while key not in self._outcomes:
            try:
                line = self._lines.get(timeout=WAIT)
            except queue.Empty:
                pytest.fail(f"the side process gave no outcome in {WAIT:.0f} s", pytrace=False)
            if line is None:
                self._lines.put(None)  # every later waiter sees the end too
                code = self._process.wait(timeout=30)
                said = f"the side process ended (exit code {code}) before {key}"
                pytest.fail(f"{said}:\n{self.output()}", pytrace=False)
            outcome = json.loads(line)
            self._outcomes[outcome["key"]] = outcome
        done = self._outcomes[key]
        if done["outcome"] == "skipped":
            pytest.skip(done["detail"])
        if done["outcome"] == "failed":
            pytest.fail(f"in the side process:\n{done['detail']}", pytrace=False)

    def output(self) -> str:
        """The end of what the side process wrote to stderr."""
        self._log.seek(0)
        return self._log.read()[-4000:]

    def close(self) -> None:
        """Stop the side process (at once: the session no longer waits for outcomes)."""
        self._process.kill()
        self._process.wait()
        self._log.close()


#: The running side processes, by the name of the test module they serve.
_SIDES: dict[str, Side] = {}


def start(session: pytest.Session) -> None:
    """A side process for each module of the session's selected items that defines
    `side_jobs` and gives it any job (none for a collection-only run)."""
    if session.config.option.collectonly:
        return
    by_module: dict[str, tuple[Any, list[pytest.Function]]] = {}
    for item in session.items:
        if isinstance(item, pytest.Function) and hasattr(item.module, "side_jobs"):
            by_module.setdefault(item.module.__name__, (item.module, []))[1].append(item)
    for name, (module, items) in by_module.items():
        jobs = module.side_jobs(items)
        if jobs:
            _SIDES[name] = Side(jobs)


def of(module: str) -> Side:
    """The side process serving test module `module`."""
    side = _SIDES.get(module)
    if side is None:
        pytest.fail(f"no side process for {module} (started when collection ends)", pytrace=False)
    return side


def close_all() -> None:
    """Stop every side process (the session is over)."""
    while _SIDES:
        _SIDES.popitem()[1].close()


def main() -> None:
    jobs = json.load(sys.stdin)
    for key, target, args in jobs:
        module, _, name = target.partition(":")
        try:
            getattr(importlib.import_module(module), name)(*args)
            outcome = {"key": key, "outcome": "passed", "detail": ""}
        except pytest.skip.Exception as exc:
            outcome = {"key": key, "outcome": "skipped", "detail": str(exc.msg)}
        except BaseException:  # SystemExit too: the check's failure
            outcome = {"key": key, "outcome": "failed", "detail": traceback.format_exc()[-4000:]}
        print(MARK + json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main()
