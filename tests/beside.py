"""Test items run by a second pytest process beside the session, their reports relayed
into the session as if they had run in it.

The suite's largest groups that keep a core busy (the embedded engine's long prompts,
the grammar agreement on both backends, the parser's property tests) share no state
with the rest. On two cores the session hands them to a pytest process of their own,
started when collection ends, and runs every other item meanwhile; the relayed items
come last, so the session waits for a report only when it has nothing else to run::

    session                                          beside (python -m pytest MODULES)
    collection ends: the beside items moved to
    the end; the process started ---------------> collects MODULES, keeps the node ids
                                                    the session selected (a file), runs
                                                    them as usual
    pytest_runtest_protocol(a beside item):         pytest_runtest_logreport(report):
      waits for the item's reports <-- a JSON line -- pytest_report_to_serializable
      ihook.pytest_runtest_logreport(each)             (a pipe of its own)
      (setup, call, teardown: terminal, junit
      and the summary see them as local)

A report is pytest's own, serialized by its own hook (what pytest-xdist sends), so a
skip keeps its reason and a failure its traceback. A beside process that dies fails
every item it had not reported, with the end of its output.

Which modules run beside is `BESIDE` in tests/conftest.py. Nothing runs beside when the
session selected nothing else (there would be nothing to overlap with) or with
`TOOLWIRE_BESIDE=0` (every item in the session, e.g. to debug one with --pdb).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _pytest.reports import TestReport

#: Set in the beside process: the file descriptor its reports are written to.
FD = "TOOLWIRE_BESIDE_FD"
#: Set in the beside process: the file listing the node ids it runs.
ITEMS = "TOOLWIRE_BESIDE_ITEMS"
#: How long the session waits for one item's reports (the beside process runs every
#: item before it in order).
WAIT = 1200.0


#: Read once: the sender pops `FD`, so that a pytest a beside item starts is no sender.
_INSIDE = FD in os.environ


def inside() -> bool:
    """Whether this process is a beside process."""
    return _INSIDE


class Beside:
    """The beside process running `items` (their modules collected, the rest deselected)."""

    def __init__(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        self._config = config
        self._ids = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)  # noqa: SIM115
        self._ids.write("\n".join(item.nodeid for item in items))
        self._ids.close()
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed by close()
        modules = sorted({str(item.path) for item in items})
        read, write = os.pipe()
        # The session's own root and configuration, so that node ids are the same.
        options = ["--rootdir", str(config.rootpath)]
        if config.inipath is not None:
            options += ["-c", str(config.inipath)]
        if config.getoption("fast", default=False):
            options.append("--fast")
        env = {
            **os.environ,
            FD: str(write),
            ITEMS: self._ids.name,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }
        self._process = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *options, *modules],
            cwd=config.invocation_params.dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            pass_fds=(write,),
        )
        os.close(write)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reports: dict[str, list[TestReport]] = {}
        self._ended = False
        threading.Thread(target=self._read, args=(read,), daemon=True).start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, encoding="utf-8") as stream:
            for line in stream:
                self._lines.put(line)
        self._lines.put(None)

    def reports(self, item: pytest.Item) -> Iterator[TestReport]:
        """`item`'s reports (setup, call, teardown) as the beside process made them."""
        while not self._done(item.nodeid):
            if self._ended:
                yield from _failed(item, self._died())
                return
            try:
                line = self._lines.get(timeout=WAIT)
            except queue.Empty:
                yield from _failed(item, f"the beside process gave no report in {WAIT:.0f} s")
                return
            if line is None:
                self._ended = True
                continue
            data = json.loads(line)
            report = self._config.hook.pytest_report_from_serializable(
                config=self._config, data=data
            )
            if isinstance(report.longrepr, list):  # a skip's (path, line, reason), via JSON
                report.longrepr = tuple(report.longrepr)
            self._reports.setdefault(report.nodeid, []).append(report)
        yield from self._reports.pop(item.nodeid)

    def _done(self, nodeid: str) -> bool:
        return any(r.when == "teardown" for r in self._reports.get(nodeid, ()))

    def _died(self) -> str:
        code = self._process.wait(timeout=60)
        self._log.seek(0)
        return f"the beside process ended (exit code {code}):\n{self._log.read()[-4000:]}"

    def close(self) -> None:
        """Stop the beside process (at once: the session no longer waits for it)."""
        self._process.kill()
        self._process.wait()
        self._log.close()
        os.unlink(self._ids.name)


def _failed(item: pytest.Item, why: str) -> Iterator[TestReport]:
    for when, outcome in (("setup", "passed"), ("call", "failed"), ("teardown", "passed")):
        longrepr = why if outcome == "failed" else None
        yield TestReport(item.nodeid, item.location, {}, outcome, longrepr, when)


#: The session's beside process, while it runs.
_RUNNING: list[Beside] = []


def arrange(config: pytest.Config, items: list[pytest.Item], modules: list[str]) -> None:
    """In the session: move the items of `modules` to the end (they run beside).
    In the beside process: keep only the items the session handed over, module by
    module in the order of `modules` (the first one starts at once)."""
    order = {name: i for i, name in enumerate(modules)}
    if inside():
        with open(os.environ[ITEMS], encoding="utf-8") as listed:
            wanted = set(listed.read().splitlines())
        dropped = [item for item in items if item.nodeid not in wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        kept = [item for item in items if item.nodeid in wanted]
        items[:] = sorted(kept, key=lambda item: order[item.path.name])  # stable
        return
    if os.environ.get("TOOLWIRE_BESIDE") == "0":
        return
    here = [item for item in items if item.path.name not in order]
    away = sorted(
        (item for item in items if item.path.name in order),
        key=lambda item: order[item.path.name],
    )
    if here and away:
        items[:] = here + away
        for item in away:
            item.stash[_AWAY] = True


_AWAY = pytest.StashKey[bool]()


def start(session: pytest.Session) -> None:
    """Start the beside process for the items `arrange` moved (none in a
    collection-only run)."""
    away = [item for item in session.items if item.stash.get(_AWAY, False)]
    if away and not session.config.option.collectonly:
        _RUNNING.append(Beside(session.config, away))


def relay(item: pytest.Item) -> bool:
    """Report `item` from the beside process, if it runs there."""
    if not item.stash.get(_AWAY, False) or not _RUNNING:
        return False
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in _RUNNING[0].reports(item):
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


class Sender:
    """In the beside process, a plugin that writes every report to the session."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._stream = os.fdopen(int(os.environ.pop(FD)), "w", buffering=1, encoding="utf-8")

    def pytest_runtest_logreport(self, report: TestReport) -> None:
        hook = self._config.hook
        data: dict[str, Any] = hook.pytest_report_to_serializable(
            config=self._config, report=report
        )
        self._stream.write(json.dumps(data) + "\n")


def close() -> None:
    """End the beside process (the session is over)."""
    while _RUNNING:
        _RUNNING.pop().close()
