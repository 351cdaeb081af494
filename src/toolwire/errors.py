"""The errors toolwire raises.

Two families, as in h11: a caller's mistake (`UsageError`, always raised) and bad
input from the other side (`MalformedOutput` for model output, raised only when the
caller asked for `strict=True`; `PromptError` for a request that cannot be rendered
safely). Any other exception escaping toolwire is a bug.
"""

from __future__ import annotations

__all__ = ["MalformedOutput", "PromptError", "ToolwireError", "UsageError"]


class ToolwireError(Exception):
    """Base class of every error toolwire raises on purpose."""


class UsageError(ToolwireError, ValueError):
    """The caller used the API wrongly: unknown format, bad `tools`, wrong state, ids
    that are not integers, or a tokenizer file that cannot be loaded (named)."""


class MalformedOutput(ToolwireError):
    """The model's output holds a tool call that cannot be completed.

    Raised only by a parser built with `strict=True`; otherwise the text of the call
    becomes content and nothing is lost.
    """

    def __init__(self, message: str, *, text: str = "") -> None:
        super().__init__(message)
        #: The raw text of the call that could not be completed.
        self.text = text


class PromptError(ToolwireError, ValueError):
    """A chat request cannot be rendered into prompt ids safely (fails closed)."""
