"""The call-syntax protocol: what the parser asks of the object that reads one call's body.

A format (`toolwire.formats.spec.Format`) builds one `CallSyntax` per call from a
`CallContext`; the parser feeds it the body text between the call's delimiters and
drains the argument JSON it makes final. Formats depend on this module; it depends on
nothing in `toolwire.formats`::

    Format.syntax(CallContext) -> CallSyntax
    CallSyntax.feed(text) -> consumed   .name  .call_id  .done
    CallSyntax.arguments() -> new argument text   (append-only)
    CallSyntax.close()   -> None, or raise Reject (the parser releases the body)
    PlainStep.plain(text) -> feed + arguments in one step, for text inside a value
                             that it cannot end (optional; None: not such text)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from toolwire.tools import Tools

__all__ = ["CallContext", "CallSyntax", "Chained", "PlainStep", "Reject"]


class Reject(Exception):
    """Raised by a `CallSyntax` when the body cannot be a call; the parser releases it."""


@dataclass(frozen=True)
class CallContext:
    """What a call's syntax may know: the declared tools and the marks' structural forms."""

    tools: Tools
    #: Each inner mark's text -> the string standing for it in the text the syntax sees.
    marks: Mapping[str, str]
    #: The tool's name when the format gives it before the body (a harmony header).
    name: str | None = None


class CallSyntax(Protocol):
    """Parses one call's body incrementally. Pure: text in, name and arguments out.

    Feeding the body in any split must give the same name, id and argument text.
    """

    #: The tool's name once known, else None.
    name: str | None
    #: The model's own call id where the format carries one, else None.
    call_id: str | None
    #: For formats without a closing delimiter: True once the body has ended.
    done: bool

    def feed(self, text: str) -> int:
        """Consume body text; return how much was consumed (less only once `done`)."""
        ...

    def arguments(self) -> str:
        """Argument JSON text that became final since the last call (append-only)."""
        ...

    def close(self) -> None:
        """The body ended. Raise `Reject` unless name and arguments are complete."""
        ...


@runtime_checkable
class Chained(Protocol):
    """A self-ending syntax whose body may end in a list separator (`[f(), g()]`)."""

    #: Once `done`: True when the body consumed a separator, so another body follows
    #: at once (it is opened without any delimiter, like the first).
    follows: bool


@runtime_checkable
class PlainStep(Protocol):
    """A syntax with a short step for the commonest streamed text: more of a value
    that this text cannot end (a long string argument), optional."""

    def plain(self, text: str) -> str | None:
        """Exactly `feed(text)` then `arguments()`, for body text that holds no
        delimiter, when this text can only continue the current value; None (nothing
        consumed) otherwise."""
        ...
