"""The answer of format detection (`toolwire.formats.detect`)."""

from __future__ import annotations

from dataclasses import dataclass

from toolwire.formats.spec import Format

__all__ = ["DEFERS", "REVISIONS", "Detection"]

#: format -> the format of its family it revises and whose calls it reads, with the
#: same tokens: where only a vocabulary is known (no template), the revision is the
#: answer. DeepSeek V4 writes V3.2's DSML invocations in a `tool_calls` wrapper and
#: reads V3.2's calls (an invocation outside its wrapper is provisional).
REVISIONS: dict[str, str] = {"deepseek_v4": "deepseek_v32"}

#: format -> the format it yields to where only a vocabulary is known and both fit it:
#: they share one vocabulary and only a template tells them apart. DeepSeek V4.1
#: writes V4's DSML with spaced tags through the same `｜DSML｜` token; the published
#: V4 tokenizer (with no template) is V4's.
DEFERS: dict[str, str] = {"deepseek_v41": "deepseek_v4"}


@dataclass(frozen=True)
class Detection:
    """Which format a tokenizer's chat template and vocabulary point to, and why."""

    #: The format, or None when the evidence names none, or more than one.
    format: Format | None
    #: What was found, one fact a line (delimiters written, tokens held, calls read).
    evidence: tuple[str, ...]
    #: Why this format won, or why none did.
    reason: str

    @property
    def name(self) -> str | None:
        """The format's name, or None."""
        return None if self.format is None else self.format.name
