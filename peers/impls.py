"""vLLM and SGLang as `toolwire check` implementations: a job per format, run by
`worker.py` in the peers' virtual environment.

`PeerImpl` gives the worker each case's request (tools, `tool_choice`,
`chat_template_kwargs`, prompt ids) and ids; the worker decides everything else from
the peer's own code (see `profiles.py`). The worker runs as `python -m peers.worker`
with the peers' interpreter (`.venv-bench`, or `$TOOLWIRE_PEERS_PYTHON`), this
repository on its path.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peers.profiles import Cite, PeerSpec, profile
from peers.vocab import tokenizer_file
from toolwire.check.cases import Case
from toolwire.check.impls import ImplRun, Target
from toolwire.check.properties import Outcome
from toolwire.errors import UsageError

__all__ = ["ROOT", "PeerImpl", "call_worker", "how_to_make", "peer_job", "peer_python"]

#: The repository root (the folder holding `peers/`).
ROOT = Path(__file__).resolve().parents[1]

_HOW = """the {impl} adapter runs in the peers' virtual environment, which was not found
({where}). Create it with

    make .venv-bench        # torch (CPU), vllm 0.33 and sglang 0.5.23 --no-deps, toolwire

or point TOOLWIRE_PEERS_PYTHON at a Python that has vllm, sglang and toolwire."""


def peer_python() -> Path | None:
    """The peers' interpreter: $TOOLWIRE_PEERS_PYTHON, or .venv-bench in the checkout."""
    env = os.environ.get("TOOLWIRE_PEERS_PYTHON")
    if env:
        return Path(env) if Path(env).is_file() else None
    candidates = [Path.cwd(), ROOT]
    return next(
        (
            c / ".venv-bench/bin/python"
            for c in candidates
            if (c / ".venv-bench/bin/python").is_file()
        ),
        None,
    )


def how_to_make(impl: str) -> str:
    """How to create the peers' virtual environment (when it is missing)."""
    where = os.environ.get("TOOLWIRE_PEERS_PYTHON") or ".venv-bench/bin/python"
    return _HOW.format(impl=impl, where=where)


def worker_timeout() -> float:
    """Seconds one worker job may take: $TOOLWIRE_CHECK_TIMEOUT, else 1200."""
    return float(os.environ.get("TOOLWIRE_CHECK_TIMEOUT") or 1200)


def call_worker(job: dict[str, Any], impl: str) -> dict[str, Any]:
    """Run one job in the peers' venv; `UsageError` explains how to make it if missing."""
    python = peer_python()
    if python is None:
        raise UsageError(how_to_make(impl))
    with tempfile.TemporaryDirectory(prefix="toolwire-peer-") as tmp:
        job_path, answer_path = Path(tmp) / "job.json", Path(tmp) / "answer.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        try:
            done = subprocess.run(
                [str(python), "-m", "peers.worker", str(job_path), str(answer_path)],
                capture_output=True,
                text=True,
                check=False,
                timeout=worker_timeout(),
                env={**os.environ, "PYTHONPATH": path},
            )
        except subprocess.TimeoutExpired:
            raise UsageError(
                f"the {impl} worker gave no answer within {worker_timeout():.0f} s "
                "($TOOLWIRE_CHECK_TIMEOUT); a parser that does not return is a finding"
            ) from None
        if done.returncode != 0 or not answer_path.is_file():
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise UsageError(f"the {impl} worker failed ({python}):\n{tail}")
        answer: dict[str, Any] = json.loads(answer_path.read_text(encoding="utf-8"))
    return answer


def peer_job(impl: str, spec: PeerSpec, target: Target, cases: Sequence[Case]) -> dict[str, Any]:
    """The worker's job for these cases (see `worker.py` for its shape)."""
    return {
        "impl": impl,
        "spec": {"tool": spec.tool, "reasoning": spec.reasoning, "harmony": spec.harmony},
        "tokenizer": str(tokenizer_file(target.setup.tokenizer, target.data)),
        "template": target.template,
        "env": {"TIKTOKEN_ENCODINGS_BASE": str(target.data / "tokenizers" / "gpt_oss")},
        "cases": [
            {
                "tools": case.tools,
                "tool_choice": case.request.tool_choice,
                "template_kwargs": case.request.template_kwargs,
                "prompt_ids": case.request.prompt_ids,
                "ids": case.ids,
                "stop": case.stop,
                "runs": [None, *case.chunkings],
            }
            for case in cases
        ],
    }


@dataclass(frozen=True)
class PeerImpl:
    """A peer's parsers in the peers' venv, driven as its server drives them."""

    name: str
    about: str
    #: The peer's server code the worker follows, for the report (a title, file:lines).
    follows: tuple[str, tuple[Cite, ...]] | None = None

    def spec(self, target: Target) -> PeerSpec | None:
        spec: PeerSpec | None = getattr(profile(target.fmt.name), self.name, None)
        return spec

    def supports(self, target: Target) -> str | None:
        if self.spec(target) is None:
            return f"{self.name} has no parser for this format"
        if peer_python() is None:
            raise UsageError(how_to_make(self.name))
        return None

    def run(self, target: Target, cases: Sequence[Case]) -> ImplRun:
        spec = self.spec(target)
        assert spec is not None, "supports() said it runs"
        answer = call_worker(peer_job(self.name, spec, target, cases), self.name)
        outcomes = [[Outcome.from_json(o) for o in runs] for runs in answer["outcomes"]]
        return ImplRun(outcomes, self.settings(spec, cases, answer), answer.get("versions", {}))

    def settings(self, spec: PeerSpec, cases: Sequence[Case], answer: dict[str, Any]) -> list[str]:
        used = answer.get("settings") or []
        skip: Counter[str] = Counter()
        force: Counter[str] = Counter()
        for case, seen in zip(cases, used, strict=True):
            if "skip_special_tokens" in seen:
                skip[f"{seen['skip_special_tokens']} (tool_choice {case.request.tool_choice})"] += 1
            if seen.get("force_reasoning") is not None:
                force[f"{seen['force_reasoning']} ({_switch(case)})"] += 1
        out = [
            f"tool parser `{spec.tool}`, reasoning parser `{spec.reasoning or '(none)'}`"
            + (", harmony" if spec.harmony else ""),
            "skip_special_tokens per request (from the peer's code): "
            + ", ".join(f"{k}: {n} cases" for k, n in sorted(skip.items())),
        ]
        if spec.skip_cite is not None:
            out.append(f"skip_special_tokens with tools: {spec.skip_cite} ({spec.skip_cite.why})")
        if force:
            out.append(
                "reasoning forced (SGLang `_get_reasoning_from_request`): "
                + ", ".join(f"{k}: {n} cases" for k, n in sorted(force.items()))
            )
        prompts = sum(1 for c in cases if c.request.prompt_ids)
        out.append(f"prompt ids passed: {prompts} of {len(cases)} cases")
        return out

    def driving(self) -> list[str]:
        if self.follows is None:
            return []
        title, cites = self.follows
        return [f"{title}:", "", *(f"- `{c}` — {c.why}" for c in cites), ""]


def _switch(case: Case) -> str:
    kwargs = case.request.template_kwargs
    return ", ".join(f"{k}={v}" for k, v in kwargs.items()) if kwargs else "no switch sent"
