"""`toolwire check` on toolwire: a small, fast subset of the conformance run.

The full run (more BFCL entries, the peers) is `make check`. Here every registered
format runs a few BFCL, adversarial and fuzz cases, one format the exhaustive
chunking sweep, and the judge is shown to catch wrong outcomes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cases import tokenizer
from tests.conftest import data_dir
from toolwire import formats
from toolwire.check import CheckOptions, run_check
from toolwire.check.cases import Case, Expected
from toolwire.check.properties import Outcome, judge
from toolwire.check.report import markdown
from toolwire.cli import main


def _run(tmp_path: Path, *args: str) -> tuple[int, str]:
    report = tmp_path / "report"
    code = main(["check", "--data", str(data_dir()), "--report", str(report), *args])
    return code, (report / "conformance.md").read_text(encoding="utf-8")


def test_every_format_passes_a_small_subset() -> None:
    options = CheckOptions(
        data=data_dir(), groups=("bfcl", "echo", "fuzz"), limit=1, tokenizer=tokenizer
    )
    results = run_check(options)
    assert {r.format for r in results.results} == set(formats.names())
    failures = [(r.format, r.case.id, r.verdicts, r.sample) for r in results.failures()]
    assert not failures, markdown(results)


def test_cli_writes_the_report(tmp_path: Path) -> None:
    code, md = _run(tmp_path, "--format", "hermes", "--cases", "bfcl,echo", "--limit", "1")
    assert code == 0, md
    assert "| toolwire | hermes |" in md
    assert "None." in md  # no failures listed
    data = json.loads((tmp_path / "report" / "conformance.json").read_text())
    assert data["failures"] == []
    assert data["matrix"][0]["correct"][1] > 0


def test_chunking_sweep() -> None:
    options = CheckOptions(
        data=data_dir(), formats=["qwen3_coder"], groups=("chunking",), limit=1,
        tokenizer=tokenizer,
    )  # fmt: skip
    results = run_check(options)
    assert results.results and not results.failures(), markdown(results)


def test_peers_explain_their_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOOLWIRE_PEERS_PYTHON", str(tmp_path / "missing" / "python"))
    code = main(["check", "--data", str(data_dir()), "--impl", "vllm", "--format", "hermes",
                 "--cases", "bfcl", "--limit", "1"])  # fmt: skip
    assert code == 2
    assert "make .venv-bench" in capsys.readouterr().err


def test_judge_catches_wrong_outcomes() -> None:
    case = Case(
        id="echo/x",
        kind="echo",
        format="hermes",
        ids=[1, 2, 3],
        tools=[],
        expected=Expected([], "<tool_call>{}</tool_call>"),
        echoed=[("f", {})],
        allowed="<tool_call>{}</tool_call>",
        chunkings=[[3], [1, 1, 1]],
    )
    good = Outcome(content="<tool_call>{}</tool_call>")
    assert all(v is not False for v in judge(case, [good] * 3, ["<tool_call>"]).values())
    echoed = Outcome(calls=(("f", "{}"),))
    verdict = judge(case, [good, echoed, good], ["<tool_call>", "<|im_end|>"])
    assert verdict["echo-safe"] is False
    assert verdict["chunk-invariant"] is False
    assert verdict["correct"] is False
    assert verdict["conservation"] is False
    leaky = Outcome(content="<tool_call>{}</tool_call><|im_end|>")
    assert judge(case, [leaky] * 3, ["<|im_end|>"])["leak-free"] is False
    broken = Outcome(calls=(("f", '{"a": '),))
    assert judge(case, [broken] * 3, [])["json-args"] is False
    assert judge(case, [Outcome(error="Boom")] * 3, [])["no-error"] is False
