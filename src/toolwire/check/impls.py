"""Implementations under test: a registry of `Impl`s, each run per format on cases.

An `Impl` says whether it can run a format (`supports`) and runs a list of cases
(`run`), returning one `Outcome` list per case, runs in the order of `properties`:
the non-streaming run first, then one per chunking; and the settings it ran with,
for the report. Registered here:

* `toolwire` (held arguments, the default) and `toolwire-stream`
  (`stream_arguments=True`): a fresh `Parser` per run in this process, told the
  request's `tool_choice` and whether the rendered prompt ends in reasoning, as
  toolwire's server tells it.
* `vllm`, `sglang`: `worker.py` in the peers' virtual environment, given each case's
  request (tools, `tool_choice`, `chat_template_kwargs`, prompt ids) and ids; it
  decides everything else from the peer's own code (see `profiles.py`).

A further implementation (another serving path, another parser) is one `register`
call with an object that has `name`, `about`, `supports` and `run`.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tokenizers.decoders import DecodeStream

from toolwire.check.cases import Case
from toolwire.check.profiles import PeerSpec, Profile
from toolwire.check.properties import Outcome
from toolwire.check.vocab import tokenizer_file
from toolwire.errors import UsageError
from toolwire.events import Event
from toolwire.formats.spec import Format
from toolwire.message import Message
from toolwire.parser import Parser
from toolwire.tokenizer import Tokenizer

__all__ = [
    "IMPLS",
    "Impl",
    "ImplRun",
    "Target",
    "delta_texts",
    "peer_python",
    "register",
]

_HOW = """the {impl} adapter runs in the peers' virtual environment, which was not found
({where}). Create it with

    make .venv-bench        # torch (CPU), vllm 0.33 and sglang 0.5.23 --no-deps, toolwire

or point TOOLWIRE_PEERS_PYTHON at a Python that has vllm, sglang and toolwire."""


@dataclass(frozen=True)
class Target:
    """One format as the run sees it: format, tokenizer, profile, template, data."""

    fmt: Format
    tok: Tokenizer
    prof: Profile
    data: Path
    #: The chat template text the prompts were rendered with (None: none).
    template: str | None = None


@dataclass
class ImplRun:
    """An implementation's outcomes on a format's cases, and what it ran with."""

    outcomes: list[list[Outcome]]
    #: Settings as "key: value" lines for the report (deterministic).
    settings: list[str] = field(default_factory=list)
    #: Package versions it ran with.
    versions: dict[str, str] = field(default_factory=dict)


class Impl(Protocol):
    """An implementation the check can run."""

    @property
    def name(self) -> str:
        """The `--impl` value."""

    @property
    def about(self) -> str:
        """One line for the report: what runs and how."""

    def supports(self, target: Target) -> str | None:
        """None when it runs this format, else why not."""

    def run(self, target: Target, cases: Sequence[Case]) -> ImplRun:
        """Every run of every case."""


IMPLS: dict[str, Impl] = {}


def register(impl: Impl) -> Impl:
    """Add an implementation (its `name` is the `--impl` value)."""
    IMPLS[impl.name] = impl
    return impl


def _chunks(ids: list[int], sizes: list[int]) -> list[list[int]]:
    out, start = [], 0
    for size in sizes:
        out.append(ids[start : start + size])
        start += size
    return out


def delta_texts(tok: Tokenizer, deltas: list[list[int]]) -> list[str]:
    """Each delta's text from an incremental detokenizer, special tokens kept (for the
    parser benchmark, which feeds every peer the same texts)."""
    stream = DecodeStream(skip_special_tokens=False)
    backend = tok.backend
    return ["".join(stream.step(backend, i) or "" for i in delta) for delta in deltas]


# -- toolwire ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolwireImpl:
    """toolwire's `Parser`, one per run, as toolwire's server builds it per request."""

    name: str
    about: str
    stream_arguments: bool = False

    def supports(self, target: Target) -> str | None:
        return None

    def once(self, target: Target, case: Case, sizes: list[int]) -> Outcome:
        try:
            parser = Parser(
                target.fmt,
                target.tok,
                tools=case.tools,
                tool_choice=case.request.tool_choice,
                in_reasoning=case.request.in_reasoning,
                stream_arguments=self.stream_arguments,
            )
            events: list[Event] = []
            for chunk in _chunks(case.ids, sizes):
                events += parser.feed(chunk)
            events += parser.finish()
            msg = Message.from_events(events)
        except Exception as exc:  # any exception here is a toolwire bug: report it
            return Outcome(error=f"{type(exc).__name__}: {exc}"[:200])
        return Outcome(
            content=msg.content or "",
            reasoning=msg.reasoning or "",
            calls=tuple((c.name, c.arguments) for c in msg.tool_calls),
        )

    def run(self, target: Target, cases: Sequence[Case]) -> ImplRun:
        outcomes = [
            [self.once(target, case, [len(case.ids)])]
            + [self.once(target, case, sizes) for sizes in case.chunkings]
            for case in cases
        ]
        mode = "stream_arguments=True" if self.stream_arguments else "held arguments (default)"
        settings = [
            f"Parser({target.fmt.name!r}, tools, tool_choice, in_reasoning), {mode}",
            "in_reasoning: whether the rendered prompt ends inside reasoning",
            "all output ids fed, a final stop token included (as its server feeds them)",
        ]
        return ImplRun(outcomes, settings)


# -- the peers ------------------------------------------------------------------------


def peer_python() -> Path | None:
    """The peers' interpreter: $TOOLWIRE_PEERS_PYTHON, or .venv-bench in the checkout."""
    env = os.environ.get("TOOLWIRE_PEERS_PYTHON")
    if env:
        return Path(env) if Path(env).is_file() else None
    candidates = [Path.cwd(), Path(__file__).resolve().parents[3]]
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
        try:
            done = subprocess.run(
                [str(python), "-m", "toolwire.check.worker", str(job_path), str(answer_path)],
                capture_output=True,
                text=True,
                check=False,
                timeout=worker_timeout(),
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
        "tokenizer": str(tokenizer_file(target.prof.tokenizer, target.data)),
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

    def spec(self, target: Target) -> PeerSpec | None:
        spec: PeerSpec | None = getattr(target.prof, self.name, None)
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


def _switch(case: Case) -> str:
    kwargs = case.request.template_kwargs
    return ", ".join(f"{k}={v}" for k, v in kwargs.items()) if kwargs else "no switch sent"


register(ToolwireImpl("toolwire", "toolwire's Parser, held arguments (the default)"))
register(
    ToolwireImpl(
        "toolwire-stream", "toolwire's Parser with stream_arguments=True", stream_arguments=True
    )
)
register(PeerImpl("vllm", "vLLM's parsers through its server's streaming/non-streaming path"))
register(PeerImpl("sglang", "SGLang's parsers through its server's serving_chat methods"))
