"""What each API's body may hold: every top-level field it acts on, accepts or refuses.

One table per API (`Surface`, in the API's `request.py`), read by its request reader::

    body --refuse()--> a refused field set to a value it cannot honour: 400 naming it
         --unknown()--> the fields no table names: logged and counted by the turn
                        (`toolwire_unknown_fields_total{route, field}`), never silent
    every Surface --markdown()--> docs/server.md's field table (make docs; a test compares them)

A field *acts* when the server does what it asks; it is *accepted* when the server takes
it and its meaning needs nothing here (documented in its note: `metadata` is kept no
further, `cache_control` marks what the engine's prefix cache holds anyway); it is
*refused* (a 400 naming it) when it asks for what this server cannot do. A refused
field may still take the values that ask for nothing (`background: false`): `allowed`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from toolwire.server.core.errors import FieldError

__all__ = ["Field", "Surface", "accepts", "acts", "markdown", "refuse", "refuses", "unknown"]

Status: TypeAlias = Literal["acts", "accepts", "refuses"]


@dataclass(frozen=True)
class Field:
    """One top-level field of an API's request body."""

    status: Status
    #: What the server does with it (or why it refuses it), for docs/server.md.
    note: str
    #: For a refused field: the values that are accepted all the same (null always is).
    allowed: tuple[Any, ...] = ()


#: An API's fields, by name, in the order docs/server.md lists them.
Surface: TypeAlias = Mapping[str, Field]


def acts(note: str) -> Field:
    return Field("acts", note)


def accepts(note: str) -> Field:
    return Field("accepts", note)


def refuses(note: str, *allowed: Any) -> Field:
    return Field("refuses", note, allowed)


def _same(value: Any, allowed: Any) -> bool:
    # type-exact: `False` is not `0`, `[]` is not `{}`
    return type(value) is type(allowed) and bool(value == allowed)


def refuse(body: Mapping[str, Any], surface: Surface) -> None:
    """A 400 for the first refused field `body` sets to a value it cannot honour."""
    for name, field in surface.items():
        if field.status != "refuses" or body.get(name) is None:
            continue
        value = body[name]
        if not any(_same(value, ok) for ok in field.allowed):
            raise FieldError((name,), f"is not supported: {field.note}")


def unknown(body: Mapping[str, Any], surface: Surface) -> tuple[str, ...]:
    """The top-level fields of `body` that `surface` does not name."""
    return tuple(name for name in body if name not in surface)


_WORDS = {"acts": "acts", "accepts": "accepted", "refuses": "**refused**"}


def markdown(surfaces: Iterable[tuple[str, Surface]]) -> str:
    """One Markdown table per API: field, what happens to it, how."""
    out: list[str] = []
    for title, surface in surfaces:
        out += [f"**{title}**", "", "| field | | what the server does |", "|---|---|---|"]
        for name, field in surface.items():
            out.append(f"| `{name}` | {_WORDS[field.status]} | {field.note} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
