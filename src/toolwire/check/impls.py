"""Implementations under test: toolwire in this process, the peers in their own venv.

`run_toolwire` feeds each run's deltas to a fresh `Parser` (the non-streaming run is
`toolwire.parse`, the same path). `run_peer` turns each run into what a server would
hand its parser (every delta's ids and their incremental detokenization with special
tokens kept, via `tokenizers`' `DecodeStream`) and runs `toolwire.check.worker` with
the peers' Python. Both return one `Outcome` list per case, runs in the same order:
the non-streaming run first, then one per chunking.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tokenizers.decoders import DecodeStream

from toolwire.check.cases import Case
from toolwire.check.profiles import PeerSpec
from toolwire.check.properties import Outcome
from toolwire.errors import UsageError
from toolwire.events import Event
from toolwire.formats.spec import Format
from toolwire.message import Message
from toolwire.parser import Parser
from toolwire.tokenizer import Tokenizer

__all__ = ["PEERS", "peer_python", "run_peer", "run_toolwire"]

PEERS = ("vllm", "sglang")

_HOW = """the {impl} adapter runs in the peers' virtual environment, which was not found
({where}). Create it with

    make .venv-bench        # torch (CPU), vllm 0.33 and sglang 0.5.23 --no-deps, toolwire

or point TOOLWIRE_PEERS_PYTHON at a Python that has vllm, sglang and toolwire."""


def _chunks(ids: list[int], sizes: list[int]) -> list[list[int]]:
    out, start = [], 0
    for size in sizes:
        out.append(ids[start : start + size])
        start += size
    return out


def _toolwire_once(
    fmt: Format, tok: Tokenizer, case: Case, sizes: list[int], **options: Any
) -> Outcome:
    try:
        parser = Parser(fmt, tok, tools=case.tools, **options)
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


def run_toolwire(
    fmt: Format, tok: Tokenizer, cases: list[Case], **options: Any
) -> list[list[Outcome]]:
    """Every run of every case through toolwire's `Parser`."""
    return [
        [_toolwire_once(fmt, tok, case, [len(case.ids)], **options)]
        + [_toolwire_once(fmt, tok, case, sizes, **options) for sizes in case.chunkings]
        for case in cases
    ]


def delta_texts(tok: Tokenizer, deltas: list[list[int]]) -> list[str]:
    """Each delta's text as a server's incremental detokenizer gives it (specials kept)."""
    stream = DecodeStream(skip_special_tokens=False)
    backend = tok.backend
    return ["".join(stream.step(backend, i) or "" for i in delta) for delta in deltas]


def peer_runs(tok: Tokenizer, case: Case) -> list[dict[str, Any]]:
    """The runs of a case as the worker takes them: batch first, then each chunking."""
    runs: list[dict[str, Any]] = [
        {"mode": "batch", "texts": [tok.decode(case.ids)], "ids": [case.ids]}
    ]
    for sizes in case.chunkings:
        deltas = _chunks(case.ids, sizes)
        runs.append({"mode": "stream", "texts": delta_texts(tok, deltas), "ids": deltas})
    return runs


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


def call_worker(job: dict[str, Any], impl: str) -> dict[str, Any]:
    """Run one job in the peers' venv; `UsageError` explains how to make it if missing."""
    python = peer_python()
    if python is None:
        raise UsageError(how_to_make(impl))
    with tempfile.TemporaryDirectory(prefix="toolwire-peer-") as tmp:
        job_path, answer_path = Path(tmp) / "job.json", Path(tmp) / "answer.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        done = subprocess.run(
            [str(python), "-m", "toolwire.check.worker", str(job_path), str(answer_path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not answer_path.is_file():
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise UsageError(f"the {impl} worker failed ({python}):\n{tail}")
        answer: dict[str, Any] = json.loads(answer_path.read_text(encoding="utf-8"))
    return answer


def run_peer(
    impl: str,
    spec: PeerSpec,
    fmt: Format,
    tok: Tokenizer,
    tokenizer_file: Path,
    cases: list[Case],
    env: dict[str, str],
) -> list[list[Outcome]]:
    """Every run of every case through a peer's parsers (in the peers' venv)."""
    job = {
        "impl": impl,
        "spec": asdict(spec),
        "tokenizer": str(tokenizer_file),
        "in_reasoning": fmt.starts_in_reasoning,
        "env": env,
        "cases": [{"tools": case.tools, "runs": peer_runs(tok, case)} for case in cases],
    }
    answer = call_worker(job, impl)
    return [[Outcome.from_json(o) for o in runs] for runs in answer["outcomes"]]
