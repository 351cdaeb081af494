"""tests/beside.py: items of the beside modules run in a second pytest process and are
reported by the session as if run in it (outcomes, skip reasons, tracebacks, junit),
after the session's own items; a beside process that dies fails what it had not
reported; `TOOLWIRE_BESIDE=0` runs everything in the session.

Each test runs a pytest session in a subprocess on a small test tree whose conftest
wires the plugin as tests/conftest.py does, with `test_away.py` as its beside module.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.data import ROOT

CONFTEST = """
import pytest
from tests import beside

def pytest_configure(config):
    if beside.inside():
        config.pluginmanager.register(beside.Sender(config), "beside-sender")

def pytest_collection_modifyitems(config, items):
    beside.arrange(config, items, ["test_away.py"])

def pytest_collection_finish(session):
    beside.start(session)

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item):
    return True if beside.relay(item) else None

def pytest_sessionfinish(session):
    beside.close()
"""

# Each test appends "<name> <pid>" to pids.txt, so the test can tell where it ran.
HERE = """
import os, pathlib

def _ran(name):
    with open(pathlib.Path(__file__).with_name("pids.txt"), "a") as out:
        out.write(f"{name} {os.getpid()}\\n")

def test_here_first():
    _ran("here_first")

def test_here_second():
    _ran("here_second")
"""

AWAY = """
import os, pathlib, pytest

def _ran(name):
    with open(pathlib.Path(__file__).with_name("pids.txt"), "a") as out:
        out.write(f"{name} {os.getpid()}\\n")

@pytest.mark.parametrize("n", [1, 2])
def test_passes(n):
    _ran(f"passes[{n}]")

def test_skips():
    _ran("skips")
    pytest.skip("the reason for skipping")

def test_fails():
    _ran("fails")
    assert 1 + 1 == 3, "a failure with its message"

def test_dies():
    if os.environ.get("DIE"):
        os._exit(3)

def test_after_death():
    pass
"""


def _session(
    tmp_path: Path, here: str = HERE, **env: str
) -> tuple[subprocess.CompletedProcess[str], ET.Element]:
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST), encoding="utf-8")
    # Collected first by name, run first by the plugin: the beside items come last.
    (tmp_path / "test_away.py").write_text(textwrap.dedent(AWAY), encoding="utf-8")
    (tmp_path / "test_here.py").write_text(textwrap.dedent(here), encoding="utf-8")
    junit = tmp_path / "junit.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", f"--junitxml={junit}"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done, ET.parse(junit).getroot()


def _outcomes(root: ET.Element) -> list[tuple[str, str, str]]:
    """(test name, outcome, message) in junit order."""
    out = []
    for case in root.iter("testcase"):
        found = [child for child in case if child.tag in ("failure", "skipped", "error")]
        outcome = found[0].tag if found else "passed"
        message = (found[0].get("message", "") + (found[0].text or "")) if found else ""
        out.append((case.get("name", ""), outcome, message))
    return out


def _pids(tmp_path: Path) -> dict[str, int]:
    lines = (tmp_path / "pids.txt").read_text(encoding="utf-8").split("\n")
    return {name: int(pid) for name, pid in (line.split() for line in lines if line)}


def test_beside_items_run_in_another_process_and_are_reported_after_the_rest(
    tmp_path: Path,
) -> None:
    done, root = _session(tmp_path)
    assert done.returncode == 1, done.stdout[-3000:]
    outcomes = _outcomes(root)
    assert [name for name, _, _ in outcomes] == [
        "test_here_first",
        "test_here_second",
        "test_passes[1]",
        "test_passes[2]",
        "test_skips",
        "test_fails",
        "test_dies",
        "test_after_death",
    ]
    by_name = {name: (outcome, message) for name, outcome, message in outcomes}
    assert by_name["test_passes[1]"] == ("passed", "")
    assert by_name["test_skips"][0] == "skipped"
    assert "the reason for skipping" in by_name["test_skips"][1]
    assert by_name["test_fails"][0] == "failure"
    assert "a failure with its message" in by_name["test_fails"][1]
    assert "assert (1 + 1) == 3" in by_name["test_fails"][1]
    # The terminal summary counts the relayed items with the session's own.
    assert "1 failed, 6 passed, 1 skipped" in done.stdout
    assert "the reason for skipping" in done.stdout  # -rs shows the relayed reason
    pids = _pids(tmp_path)
    assert pids["here_first"] == pids["here_second"]
    assert pids["passes[1]"] == pids["skips"] == pids["fails"] != pids["here_first"]


def test_a_beside_process_that_dies_fails_what_it_had_not_reported(tmp_path: Path) -> None:
    done, root = _session(tmp_path, DIE="1")
    by_name = {name: (outcome, message) for name, outcome, message in _outcomes(root)}
    assert by_name["test_fails"][0] == "failure"  # reported before the process died
    assert by_name["test_passes[2]"] == ("passed", "")
    for name in ("test_dies", "test_after_death"):
        outcome, message = by_name[name]
        assert outcome == "failure", name
        assert "the beside process ended (exit code 3)" in message, message
    assert "3 failed, 4 passed, 1 skipped" in done.stdout


def test_everything_runs_in_the_session_when_beside_is_off(tmp_path: Path) -> None:
    done, root = _session(tmp_path, TOOLWIRE_BESIDE="0")
    assert done.returncode == 1
    names = [name for name, _, _ in _outcomes(root)]
    assert names[0] == "test_passes[1]"  # collection order: nothing moved
    assert len(set(_pids(tmp_path).values())) == 1


def test_a_session_of_beside_items_alone_runs_them_itself(tmp_path: Path) -> None:
    done, _ = _session(tmp_path, here="")
    assert done.returncode == 1
    assert len(set(_pids(tmp_path).values())) == 1
