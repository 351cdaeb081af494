"""Implementations under test: a registry of `Impl`s, each run per format on cases.

An `Impl` says whether it can run a format (`supports`) and runs a list of cases
(`run`), returning one `Outcome` list per case, runs in the order of `properties`:
the non-streaming run first (the whole output held), then one per chunking (the
output streamed in deltas of those sizes); and the settings it ran with, for the
report. What it is given is a `Target`: the format, its tokenizer and setup, the
chat template text and the data folder; each case carries its request (tools,
`tool_choice`, thinking switch, prompt ids) and output ids. Registered here:

* `toolwire` (held arguments, the default) and `toolwire-stream`
  (`stream_arguments=True`): a fresh `Parser` per run in this process, told the
  request's `tool_choice` and whether the rendered prompt ends in reasoning, as
  toolwire's server tells it.

A further implementation (another serving path, another parser) is one `register`
call with an object that has `name`, `about`, `supports`, `run` and `driving`, in a
module `toolwire check --impls-from MODULE` imports (the repository's `peers` package
registers vLLM's and SGLang's parsers that way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from toolwire.check.cases import Case
from toolwire.check.properties import Outcome
from toolwire.check.setup import Setup
from toolwire.events import Event
from toolwire.formats.spec import Format
from toolwire.message import Message
from toolwire.parser import Parser
from toolwire.tokenizer import Tokenizer

__all__ = ["IMPLS", "Impl", "ImplRun", "Target", "ToolwireImpl", "register"]


@dataclass(frozen=True)
class Target:
    """One format as the run sees it: format, tokenizer, setup, template, data."""

    fmt: Format
    tok: Tokenizer
    setup: Setup
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

    def driving(self) -> list[str]:
        """Markdown lines for the report: the code the runs follow (empty: nothing to cite)."""


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

    def driving(self) -> list[str]:
        return []


register(ToolwireImpl("toolwire", "toolwire's Parser, held arguments (the default)"))
register(
    ToolwireImpl(
        "toolwire-stream", "toolwire's Parser with stream_arguments=True", stream_arguments=True
    )
)
