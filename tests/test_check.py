"""`toolwire check`: a small, fast subset of the conformance run, and its fairness rules.

The full run (more BFCL entries, the peers) is `make check`. Here every registered
format runs a few BFCL, adversarial and fuzz cases for toolwire; the judge is shown to
catch wrong outcomes; no case continues past a stop token; and, with the peers'
environment (`.venv-bench`; CI lacks it, so those tests skip), each peer profile is
checked against the installed peer's own code: the settings its server gives a
request, and every file:line the profiles cite.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import peers  # noqa: F401  (registers the peers and the formats' setups)
from peers.impls import call_worker, peer_python
from peers.profiles import PROFILES, SGLANG_DRIVING, VLLM_DRIVING, Cite
from peers.vocab import tokenizer_file
from tests.cases import tokenizer
from tests.data import ROOT, data_dir
from toolwire import formats
from toolwire.check import CheckOptions, run_check
from toolwire.check.cases import Case, Expected, check_stops, generate
from toolwire.check.corpus import CATEGORIES, bfcl_folder, load_bfcl
from toolwire.check.prompts import Prompter, stop_ids
from toolwire.check.properties import Outcome, judge, policy_outcome
from toolwire.check.report import markdown
from toolwire.check.setup import Setup, load_folder, setup_for
from toolwire.cli import main
from toolwire.errors import UsageError


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
    failures = [(r.format, r.case.id, r.failed()) for r in results.failures()]
    assert not failures, markdown(results)


def test_cli_writes_the_report(tmp_path: Path) -> None:
    code, md = _run(
        tmp_path, "--impl", "toolwire", "--impl", "toolwire-stream", "--format", "hermes",
        "--cases", "bfcl,echo", "--limit", "1",
    )  # fmt: skip
    assert code == 0, md
    assert "| toolwire | hermes |" in md and "| toolwire-stream | hermes |" in md
    assert "## Policies (described, not scored)" in md
    assert "None." in md  # no defect examples
    data = json.loads((tmp_path / "report" / "conformance.json").read_text())
    assert data["failures"] == []
    assert data["matrix"][0]["non-streaming"][1] > 0


def test_one_cell_reruns_alone() -> None:
    """`--case` (the report's reproduce line) reruns exactly that case, the same ids."""
    options = CheckOptions(
        data=data_dir(), formats=["qwen3"], groups=("bfcl", "echo"), limit=1, tokenizer=tokenizer
    )
    every = run_check(options).results
    picked = every[len(every) // 2]
    one = run_check(replace(options, cases=[picked.case.id])).results
    assert [r.case.id for r in one] == [picked.case.id]
    assert one[0].case.ids == picked.case.ids and one[0].runs == picked.runs


def test_the_report_is_deterministic() -> None:
    """Two runs of the same options write the same Markdown (regeneration is one command)."""
    options = CheckOptions(
        data=data_dir(), formats=["hermes", "gpt_oss"], groups=("bfcl", "echo", "fuzz"),
        limit=1, impls=("toolwire", "toolwire-stream"), tokenizer=tokenizer, jobs=2,
    )  # fmt: skip
    first = markdown(run_check(options))
    assert first == markdown(run_check(replace(options, jobs=1)))
    assert first.index("| toolwire | hermes |") < first.index("| toolwire | gpt_oss |")


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
    code = main(["check", "--data", str(data_dir()), "--impls-from", "peers", "--impl", "vllm",
                 "--format", "hermes", "--cases", "bfcl", "--limit", "1"])  # fmt: skip
    assert code == 2
    assert "make .venv-bench" in capsys.readouterr().err


def test_other_implementations_come_from_a_named_module(tmp_path: Path) -> None:
    """The package registers only toolwire's own; `--impls-from peers` (found from the
    working directory, as `make check` runs it) adds the peers."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env["TOOLWIRE_PEERS_PYTHON"] = str(tmp_path / "missing" / "python")
    run = ["check", "--data", str(data_dir()), "--impl", "vllm", "--format", "hermes"]

    def check(*args: str) -> subprocess.CompletedProcess[str]:
        code = f"import sys; from toolwire.cli import main; sys.exit(main({[*run, *args]!r}))"
        python = [sys.executable, "-P", "-c", code]  # -P: the working directory not on the path
        return subprocess.run(python, cwd=ROOT, env=env, capture_output=True, text=True)

    alone = check()
    assert alone.returncode == 2 and "--impls-from" in alone.stderr, alone.stderr
    assert "make .venv-bench" in check("--impls-from", "peers").stderr
    missing = check("--impls-from", "no_such_module")
    assert missing.returncode == 2 and "no_such_module" in missing.stderr


def test_a_peer_that_does_not_answer_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker past $TOOLWIRE_CHECK_TIMEOUT is stopped and named, not waited for."""
    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setenv("TOOLWIRE_PEERS_PYTHON", str(slow))
    monkeypatch.setenv("TOOLWIRE_CHECK_TIMEOUT", "0.5")
    with pytest.raises(UsageError, match="gave no answer within"):
        call_worker({"cases": []}, "sglang")


def test_a_format_without_a_registered_setup_uses_its_own_folder() -> None:
    """The package's default setup: the tokenizer folder of the format's name, nothing
    else; `peers` registers every format's profile (with its own loader)."""
    assert setup_for("qwen3") is PROFILES["qwen3"]
    assert setup_for("unregistered") == Setup("unregistered")
    with pytest.raises(UsageError, match="no tokenizer at"):
        load_folder("unregistered", data_dir())
    assert "<|im_end|>" in load_folder("qwen3", data_dir()).added_tokens


# -- stop tokens --------------------------------------------------------------------------


def test_the_check_refuses_a_case_past_a_stop_token() -> None:
    tok = tokenizer("hermes")
    stops = stop_ids(tok, PROFILES["hermes"])
    im_end = tok.added_tokens["<|im_end|>"]
    assert im_end in stops
    text = tok.encode("Hello there")
    ending = Case("x/0", "bfcl", "hermes", [*text, im_end], [], None)
    check_stops(ending, stops)  # a stop token may end the output
    past = Case("x/1", "bfcl", "hermes", [*text, im_end, *text], [], None)
    with pytest.raises(UsageError, match="continues past stop token"):
        check_stops(past, stops)


@pytest.mark.parametrize("fmt", formats.names())
def test_no_generated_case_continues_past_a_stop_token(fmt: str) -> None:
    """Every kind, every format: outputs end at the first stop token (fuzz included)."""
    tok = tokenizer(fmt)
    prof = PROFILES.get(fmt)
    if prof is None:
        pytest.skip(f"{fmt} has no profile")
    folder = bfcl_folder(None, data_dir())
    corpus = {c: load_bfcl(folder, c)[:3] for c in CATEGORIES}
    stops = stop_ids(tok, prof)
    prompter = Prompter(formats.get(fmt), tok, prof, data_dir())
    cases = generate(
        formats.get(fmt), tok, corpus, ("bfcl", "echo", "fuzz"), limit=2,
        prompter=prompter, stops=stops,
    )  # fmt: skip
    assert cases
    for case in cases:
        assert not any(i in stops for i in case.ids[:-1]), case.id
        assert case.stop == (case.ids[-1] in stops)
    fuzz = [c for c in cases if c.kind == "fuzz"]
    assert fuzz and all(len(c.ids) > 0 for c in fuzz)


def test_the_thinking_switch_is_sent_per_request() -> None:
    """A case with reasoning turns the template's switch on; the others turn it off."""
    tok = tokenizer("deepseek_v32")
    folder = bfcl_folder(None, data_dir())
    corpus = {c: load_bfcl(folder, c)[:3] for c in CATEGORIES}
    prof = PROFILES["deepseek_v32"]
    prompter = Prompter(formats.get("deepseek_v32"), tok, prof, data_dir())
    cases = generate(
        formats.get("deepseek_v32"), tok, corpus, ("bfcl",), limit=3,
        prompter=prompter, stops=stop_ids(tok, prof),
    )  # fmt: skip
    on = [c for c in cases if c.request.template_kwargs == {"thinking": True}]
    off = [c for c in cases if c.request.template_kwargs == {"thinking": False}]
    assert on and off and prompter.problem is None
    assert all(c.request.in_reasoning and c.expected and c.expected.reasoning for c in on)
    assert all(not c.request.in_reasoning for c in off)
    assert all(c.request.prompt_ids for c in cases)


# -- the judge ----------------------------------------------------------------------------


def test_judge_catches_wrong_outcomes() -> None:
    call = ("f", {"a": 1})
    case = Case(
        id="bfcl/x",
        kind="bfcl",
        format="hermes",
        ids=[1, 2, 3],
        tools=[],
        expected=Expected([call], "Hi"),
        allowed="Hi",
        chunkings=[[3], [1, 1, 1], [2, 1]],
    )
    good = Outcome(content="Hi", calls=(("f", '{"a": 1}'),))
    verdicts = judge(case, [good] * 4, ["<tool_call>"])
    assert all(v.ok for v in verdicts.values())
    lost = Outcome(content="Hi", calls=(("f", ""),))
    # Runs: 0 non-streaming, 1 single chunk, 2 one id per delta, 3 deltas of [2, 1].
    verdicts = judge(case, [good, good, good, lost], [])
    assert verdicts["non-streaming"].ok and verdicts["one-id"].ok
    assert verdicts["multi-id"].ok is False and verdicts["multi-id"].run == 3
    assert verdicts["chunk-invariant"].run == 3
    assert verdicts["conservation"].ok
    one_id = judge(case, [good, good, lost, good], [])
    assert one_id["one-id"].run == 2 and one_id["multi-id"].ok
    leaky = Outcome(content="Hi<|im_end|>", calls=good.calls)
    assert judge(case, [leaky] * 4, ["<|im_end|>"])["leak-free"].ok is False
    broken = Outcome(content="Hi", calls=(("f", '{"a": '),))
    assert judge(case, [broken] * 4, [])["json-args"].ok is False
    moved = Outcome(content="", reasoning="Hi", calls=good.calls)
    assert judge(case, [moved] * 4, [])["conservation"].run == 0
    assert judge(case, [Outcome(error="Boom")] * 4, [])["no-error"].ok is False


def test_policies_are_described_not_judged() -> None:
    case = Case(
        id="echo/x",
        kind="echo",
        format="hermes",
        ids=[1, 2, 3],
        tools=[],
        expected=Expected([], '<tool_call>{"name": "f"}</tool_call>'),
        echoed=[("f", {})],
        allowed='<tool_call>{"name": "f"}</tool_call>',
        chunkings=[[3]],
    )
    text = Outcome(content='<tool_call>{"name": "f"}</tool_call>')
    call = Outcome(calls=(("f", "{}"),))
    verdicts = judge(case, [call, call], ["<tool_call>"])
    assert verdicts["non-streaming"].ok is None and verdicts["conservation"].ok is None
    assert verdicts["chunk-invariant"].ok and verdicts["json-args"].ok
    assert policy_outcome(case, text) == "content"
    assert policy_outcome(case, call) == "call"
    assert policy_outcome(case, Outcome()) == "dropped"


# -- the peers, against their installed code (skipped without .venv-bench) ---------------


def _peers() -> Path:
    python = peer_python()
    if python is None:
        pytest.skip("no .venv-bench (the peers' environment): `make .venv-bench`")
    return python


def _site_packages(python: Path) -> Path:
    code = "import os, vllm; print(os.path.dirname(os.path.dirname(vllm.__file__)))"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return Path(done.stdout.strip())


def _cites() -> list[Cite]:
    cites = [*VLLM_DRIVING, *SGLANG_DRIVING]
    for prof in PROFILES.values():
        for spec in (prof.vllm, prof.sglang):
            if spec is not None and spec.skip_cite is not None:
                cites.append(spec.skip_cite)
    return list(dict.fromkeys(cites))


def test_every_cited_line_is_in_the_installed_peer() -> None:
    site = _site_packages(_peers())
    for cite in _cites():
        lines = (site / cite.path).read_text(encoding="utf-8").splitlines()
        assert cite.text in lines[cite.line - 1], f"{cite}: {lines[cite.line - 1]!r}"


def test_peer_profiles_match_their_servers_settings() -> None:
    """skip_special_tokens per profile is what each peer's server code sets."""
    _peers()
    data = data_dir()
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    items, labels = [], []
    for fmt, prof in PROFILES.items():
        if prof.tokenizer.startswith("mistral/"):
            continue  # mistral-common's tokenizer: no tokenizer.json for the peers
        path = str(tokenizer_file(prof.tokenizer, data))
        for impl in ("vllm", "sglang"):
            spec = getattr(prof, impl)
            if spec is None:
                continue
            template = data / "tokenizers" / prof.template if prof.template else None
            items.append(
                {
                    "impl": impl,
                    "spec": {"tool": spec.tool, "reasoning": spec.reasoning,
                             "harmony": spec.harmony},
                    "tokenizer": path,
                    "template": template.read_text() if template and template.is_file() else None,
                    "tools": tools,
                }
            )  # fmt: skip
            labels.append((fmt, impl, spec))
    env = {"TIKTOKEN_ENCODINGS_BASE": str(data / "tokenizers" / "gpt_oss")}
    answer = call_worker({"probe": items, "env": env}, "peer")
    assert len(answer["settings"]) == len(labels)
    for (fmt, impl, spec), seen in zip(labels, answer["settings"], strict=True):
        assert "error" not in seen, (fmt, impl, seen)
        assert seen["auto"] == spec.skip_special_tokens, (fmt, impl, seen)
    assert answer["versions"]["vllm"] == "0.33.0" and answer["versions"]["sglang"] == "0.5.23"


def test_peers_run_a_case_as_their_servers_do() -> None:
    """A small real run: both peers produce outcomes and report their settings."""
    _peers()
    options = CheckOptions(
        data=data_dir(), impls=("vllm", "sglang"), formats=["hermes"], groups=("bfcl",),
        limit=1,
    )  # fmt: skip
    results = run_check(options)
    assert {r.impl for r in results.results} == {"vllm", "sglang"}
    for (impl, _), settings in results.settings.items():
        assert any("skip_special_tokens" in s for s in settings), (impl, settings)
    assert results.versions.get("vllm") == "0.33.0"
    rng = random.Random(0)
    sample = rng.choice(results.results)
    assert len(sample.runs) == len(sample.case.chunkings) + 1


def test_check_takes_an_alias_and_reports_the_canonical_name() -> None:
    options = CheckOptions(
        data=data_dir(), formats=("qwen25",), impls=("toolwire",), groups=("echo",), limit=1
    )
    results = run_check(options)
    assert results.results and {r.format for r in results.results} == {"hermes"}


# -- a user's own model, and a run in which nothing runs -------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`toolwire check` in a fresh interpreter (no setups registered by `peers`)."""
    code = f"import sys; from toolwire.cli import main; sys.exit(main({['check', *args]!r}))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_a_run_in_which_nothing_runs_says_why_and_fails(tmp_path: Path) -> None:
    """No setup names a tokenizer for `hermes` (there is no tokenizers/hermes)."""
    report = tmp_path / "report"
    done = _cli("--impl", "toolwire", "--format", "hermes", "--data", str(data_dir()),
                "--report", str(report), "--limit", "1", "--cases", "bfcl")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "nothing was run" in done.stderr
    assert "toolwire hermes: no tokenizer" in done.stderr and "--tokenizer PATH" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (report / "conformance.json").exists()


def test_the_check_runs_on_a_users_tokenizer_folder(tmp_path: Path) -> None:
    folder = data_dir() / "tokenizers" / "qwen3"
    report = tmp_path / "report"
    # The format named, then detected from the folder (Qwen3's own template).
    for chosen in (["--format", "hermes"], []):
        done = _cli("--impl", "toolwire", "--tokenizer", str(folder), *chosen,
                    "--report", str(report), "--limit", "1", "--cases", "bfcl,echo")  # fmt: skip
        assert done.returncode == 0, done.stderr
        data = json.loads((report / "conformance.json").read_text(encoding="utf-8"))
        expected = chosen[-1] if chosen else "qwen3"
        assert [row["format"] for row in data["matrix"]] == [expected]
        assert data["matrix"][0]["non-streaming"][1] > 0
        assert f"--tokenizer {folder}" in done.stdout
        assert "chat template: the tokenizer’s own" in done.stdout
    missing = _cli("--tokenizer", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no such folder or file" in missing.stderr
