"""The suite stands alone: without the shared data and without mistral-common.

Each test runs pytest in a subprocess with `TOOLWIRE_TEST_DATA` pointing at a folder
that does not exist and mistral-common made unimportable (`tests/no_mistral_common.py`),
as a fresh checkout with only the required dependencies runs it:

* every module collects (a test needing the data is skipped, the reason naming it);
* the invariant suite runs, and passes, on the in-repository synthetic vocabulary
  (`tests/vocabulary.py`), every format included, at a small example count. The
  every-two-splits test, which takes no example count (it is two thirds of the time
  here), runs on the real vocabularies in the session and on this one in
  `make test-fast`.

The three runs start together when the module begins (each test reads its own): they
need no shared state, and side by side they take about the longest one's time.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.data import ROOT

#: Property-test examples in the subprocess.
EXAMPLES = "10"
#: What the skip reasons for missing data or a missing extra say (tests/data.py).
MISSING = re.compile(r"not found|not installed|extra is absent")


#: The runs: their pytest arguments, by the test that reads each.
RUNS = {
    "collect": ("--collect-only", "-q", "-rs"),  # -qq with the configured -q
    "invariants": ("tests/test_invariants.py", "-rs", "-k", "not every_two_split"),
    "fast": ("--fast", "--collect-only", "-q"),
}


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    """pytest in a subprocess: no shared data, no mistral-common, this interpreter's path."""
    env = {
        **os.environ,
        "TOOLWIRE_TEST_DATA": str(tmp_path / "nowhere"),
        "TOOLWIRE_EXAMPLES": EXAMPLES,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    command = [sys.executable, "-m", "pytest", "-p", "tests.no_mistral_common"]
    command += ["-p", "no:cacheprovider", *args]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


class Run:
    """One pytest subprocess, started now and read when a test needs its result."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._process = process
        self._done: tuple[int, str, str] | None = None

    def result(self) -> tuple[int, str, str]:
        """(return code, stdout, stderr), once the run has ended."""
        if self._done is None:
            try:
                out, err = self._process.communicate(timeout=900)
            except subprocess.TimeoutExpired:
                self._process.kill()
                out, err = self._process.communicate()
            self._done = (self._process.returncode, out, err)
        return self._done


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    where = tmp_path_factory.mktemp("standalone")
    started = {name: Run(_start(where, *args)) for name, args in RUNS.items()}
    yield started
    for run in started.values():
        run.result()  # every process waited for, even when a test failed early


def _counts(summary: str) -> dict[str, int]:
    """pytest's closing line ("12 passed, 3 skipped in ...") as {outcome: count}."""
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}


def test_every_module_collects_without_the_data_or_mistral_common(runs: dict[str, Run]) -> None:
    code, stdout, stderr = runs["collect"].result()
    out = stdout + stderr
    assert code == 0, out[-4000:]
    assert not re.search(r"^ERROR|errors? during collection", out, re.M), out[-4000:]
    counts = {m: int(n) for m, n in re.findall(r"^(tests/\S+\.py): (\d+)$", stdout, re.M)}
    every = {f"tests/{path.name}" for path in (ROOT / "tests").glob("test_*.py")}
    # A module may skip itself whole only for the missing data (its tests are built
    # from it), and says so; every other module collects its tests.
    whole = sum(int(n) for n in re.findall(r"^SKIPPED \[(\d+)\] .*test data not found", out, re.M))
    assert set(counts) <= every and len(every - set(counts)) == whole, (every - set(counts), out)
    assert counts["tests/test_invariants.py"] > 1000, counts


def test_the_invariants_pass_on_the_synthetic_vocabulary(runs: dict[str, Run]) -> None:
    code, stdout, stderr = runs["invariants"].result()
    out = stdout + stderr
    assert code == 0, out[-4000:]
    counts = _counts(out.strip().splitlines()[-1])
    assert counts.get("passed", 0) > 1000 and not counts.get("failed"), counts
    # Skips only where a format lacks what a test needs, never for missing data or extras.
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert not [s for s in skips if MISSING.search(s)], skips


def test_the_fast_tier_holds_no_integration_module(runs: dict[str, Run]) -> None:
    """`pytest --fast` collects unit tests only, and every module the tier table names
    exists (a renamed module would silently join the fast tier)."""
    from tests.conftest import INTEGRATION

    every = {path.name for path in (ROOT / "tests").glob("test_*.py")}
    assert set(INTEGRATION) <= every, set(INTEGRATION) - every
    code, stdout, stderr = runs["fast"].result()
    out = stdout + stderr
    assert code == 0, out[-4000:]
    counts = {m: int(n) for m, n in re.findall(r"^tests/(\S+\.py): (\d+)$", stdout, re.M)}
    assert counts and not set(counts) & set(INTEGRATION), counts
    assert counts["test_invariants.py"] > 1000, counts
