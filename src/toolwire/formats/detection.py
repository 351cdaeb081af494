"""The answer of format detection (`toolwire.formats.detect`)."""

from __future__ import annotations

from dataclasses import dataclass

from toolwire.formats.spec import Format

__all__ = ["Detection"]


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
