"""A Jinja sandbox that bounds what a chat template can build, before it builds it.

A chat template is code. Jinja's sandbox keeps it from Python's internals and bounds
`range` (100,000 items), but not size: `{{ 'a' * 10**9 }}`, a loop doubling a string,
`'x'.ljust(10**9)` or `'{:>999999999}'.format(1)` allocate whatever they ask for
before anything can look at the result. Here every operation that can grow a value is
checked against a per-render `Budget` first, from its operands:

    operation                                   checked before it runs
    str/list `*` int, `+`, `%` formatting       the result's length; `%` widths
    int `**` int                                the result's size in bits
    `~` concatenation, macro and block output,  the running length while joining
    the whole output (`concat`)
    str methods: ljust rjust center zfill       the width; the number of tabs x size;
    expandtabs replace join format format_map   the replacements' growth; the parts;
                                                the format's widths
    list/dict growth: append insert extend      elements added in the whole render
    update setdefault
    filters: center indent join replace format  as the methods; `tojson`'s indent
    tojson; every other filter and call         its result's length, after it
    `range`                                     items iterated in the whole render

and every string a template builds counts toward a bound on the total characters
produced (`Budget.work`), so a loop that copies a long string over and over ends too.
Exceeding any bound raises `TooLarge`, which `template.render` turns into a
`PromptError`; the template cannot catch it. `lipsum` (a global that writes any amount
of text) is not offered.
"""

from __future__ import annotations

import contextvars
import math
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.sandbox import SandboxedEnvironment, safe_range

__all__ = ["MAX_RENDER_CHARS", "BoundedSandbox", "Budget", "TooLarge", "budget"]

#: The default bound on a rendered prompt's length, in characters. A 1M-token prompt
#: is about 4M characters of text; the bound leaves room for what templates add.
MAX_RENDER_CHARS = 16 * 2**20
#: Work allowed per render, as a multiple of the length bound; every operation costs
#: at least `_STEP` characters of it, so the number of operations is bounded too.
_WORK = 16
_STEP = 128
#: Largest integer a template may compute with `**`, in bits.
_MAX_BITS = 2**16


class TooLarge(Exception):
    """The template asked for more than its budget allows."""


@dataclass
class Budget:
    """What one render may build (see the module docstring)."""

    #: Longest string (and the output) in characters.
    chars: int = MAX_RENDER_CHARS

    def __post_init__(self) -> None:
        #: Longest list an operation may build.
        self.items = max(self.chars // 8, 1024)
        #: Characters the render may produce in all.
        self.work = self.chars * _WORK
        #: List and dict elements the render may add in all.
        self.growth = max(self.chars // 64, 1024)
        #: Items `range` may yield in all.
        self.iterations = max(self.chars // 16, 100_000)

    def text(self, size: int, what: str) -> None:
        if size > self.chars:
            raise TooLarge(
                f"the chat template would build {what} of {size:,} characters, more than "
                f"the {self.chars:,} a rendered prompt may have"
            )

    def charge(self, size: int) -> None:
        self.work -= max(size, _STEP)
        if self.work < 0:
            raise TooLarge(
                f"the chat template did more than {self.chars * _WORK // _STEP:,} "
                f"operations or produced more than {self.chars * _WORK:,} characters in all"
            )

    def list(self, size: int, what: str) -> None:
        if size > self.items:
            raise TooLarge(
                f"the chat template would build {what} of {size:,} items, more than {self.items:,}"
            )

    def grow(self, size: int) -> None:
        self.growth -= size
        if self.growth < 0:
            raise TooLarge(
                f"the chat template added more than {max(self.chars // 64, 1024):,} list items"
            )

    def iterate(self, size: int) -> None:
        self.iterations -= size
        if self.iterations < 0:
            raise TooLarge("the chat template iterates over too many ranges")


_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "toolwire_render_budget", default=None
)


@contextmanager
def budget(chars: int = MAX_RENDER_CHARS) -> Iterator[Budget]:
    """A fresh budget for the renders in the block."""
    token = _BUDGET.set(Budget(chars))
    try:
        yield _BUDGET.get() or Budget(chars)
    finally:
        _BUDGET.reset(token)


def _current() -> Budget:
    found = _BUDGET.get()
    return Budget() if found is None else found  # outside `budget()`: default bounds


def _check_result(value: Any, what: str) -> Any:
    b = _current()
    if isinstance(value, str):
        b.text(len(value), what)
        b.charge(len(value))
        return value
    if isinstance(value, list | tuple | dict):
        b.list(len(value), what)
    b.charge(0)
    return value


# -- operators ------------------------------------------------------------------------

_FORMAT_NUMBER = re.compile(r"\d+")


def _format_widths(fmt: str, args: Iterable[Any]) -> None:
    """Refuse a format string (`%` or `str.format`) whose widths exceed the budget."""
    b = _current()
    for number in _FORMAT_NUMBER.findall(fmt):
        if len(number) > 12 or int(number) > b.chars:
            b.text(b.chars + 1 if len(number) > 12 else int(number), "a formatted field")
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool) and arg > b.chars:
            b.text(arg, "a formatted field")


def _check_binop(operator: str, left: Any, right: Any) -> None:
    b = _current()
    if operator == "*":
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(count, int):
                size = len(seq) * max(count, 0)
                if isinstance(seq, str):
                    b.text(size, "a repeated string")
                else:
                    b.list(size, "a repeated list")
    elif operator == "+":
        if isinstance(left, str) and isinstance(right, str):
            b.text(len(left) + len(right), "a joined string")
        elif isinstance(left, list | tuple) and isinstance(right, list | tuple):
            b.list(len(left) + len(right), "a joined list")
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0:
            bits = right * math.log2(abs(left))
            if bits > _MAX_BITS:
                raise TooLarge(f"the chat template would compute a {bits:,.0f}-bit number")
    elif operator == "%" and isinstance(left, str):
        values = right if isinstance(right, tuple) else (right,)
        _format_widths(left, values)
        b.text(len(left) + sum(len(str(v)) for v in values), "a formatted string")


# -- method calls ---------------------------------------------------------------------


def _width_of(args: tuple[Any, ...], kwargs: dict[str, Any], key: str) -> int:
    width = args[0] if args else kwargs.get(key, 0)
    return width if isinstance(width, int) else 0


def _replaced_size(text: str, old: Any, new: Any, count: Any = -1) -> int:
    if not isinstance(old, str) or not isinstance(new, str) or len(new) <= len(old):
        return len(text)
    found = text.count(old)
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + found * (len(new) - len(old))


def _joined_size(separator: str, parts: list[Any]) -> int:
    return len(separator) * max(len(parts) - 1, 0) + sum(len(str(p)) for p in parts)


def _check_str_method(
    text: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    """Check a str method call before it runs; returns its (possibly materialized) args."""
    b = _current()
    if name in ("ljust", "rjust", "center", "zfill"):
        b.text(_width_of(args, kwargs, "width"), f"a string padded by {name}")
    elif name == "expandtabs":
        size = _width_of(args, kwargs, "tabsize") or 8
        b.text(len(text) + text.count("\t") * size, "a string with tabs expanded")
    elif name == "replace":
        b.text(_replaced_size(text, *args[:3]), "a string with replacements")
    elif name == "join" and args:
        parts = list(args[0])
        b.list(len(parts), "a list of parts")
        b.text(_joined_size(text, parts), "a joined string")
        return (parts, *args[1:])
    elif name in ("format", "format_map"):
        _format_widths(text, [*args, *kwargs.values()])
    return args


def _check_container_method(owner: Any, name: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    b = _current()
    if name in ("append", "insert", "setdefault"):
        b.grow(1)
    elif name in ("extend", "update") and args:
        items = args[0]
        if not isinstance(items, dict):
            items = list(items)
        b.list(len(owner) + len(items), "a grown list")
        b.grow(len(items))
        return (items, *args[1:])
    return args


# -- filters --------------------------------------------------------------------------


def _bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` with its arguments checked first (where it can grow) and its result
    after; Jinja's pass-context markers are kept (`wraps` copies them)."""

    @wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        # filters marked pass_environment/eval_context get that first: skip it
        offset = 1 if getattr(function, "jinja_pass_arg", None) is not None else 0
        rest = args[offset:]
        if rest:
            args = (*args[:offset], *_check_filter(name, rest[0], rest[1:], kwargs))
        return _check_result(function(*args, **kwargs), f"the result of |{name}")

    return checked


def _check_filter(
    name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    b = _current()
    text = value if isinstance(value, str) else None
    if name == "center" and text is not None:
        b.text(_width_of(args, kwargs, "width") or 80, "a centered string")
    elif name == "indent" and text is not None:
        width = args[0] if args else kwargs.get("width", 4)
        size = width if isinstance(width, int) else len(str(width))
        b.text(len(text) + (text.count("\n") + 1) * size, "an indented string")
    elif name == "replace" and text is not None:
        b.text(_replaced_size(text, *args[:3]), "a string with replacements")
    elif name == "format" and text is not None:
        _format_widths(text, [*args, *kwargs.values()])
    elif name == "join" and not isinstance(value, str | dict):
        parts = list(value)
        separator = args[0] if args else kwargs.get("d", "")
        b.list(len(parts), "a list of parts")
        b.text(_joined_size(str(separator), parts), "a joined string")
        return (parts, *args)
    elif name == "tojson":
        indent = kwargs.get("indent", args[1] if len(args) > 1 else None)
        if isinstance(indent, int) and indent > 64:
            raise TooLarge(f"tojson indent={indent} is more than 64")
    elif text is not None and name in ("list", "batch", "slice", "unique", "sort"):
        b.list(len(text), f"a list of characters (|{name})")
    return (value, *args)


# -- the environment ------------------------------------------------------------------


class _BoundedCodeGenerator(CodeGenerator):
    """Compiles `a ~ b` to the environment's bounded `concat`."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _range(*args: int) -> range:
    found = safe_range(*args)
    _current().iterate(len(found))
    return found


class BoundedSandbox(SandboxedEnvironment):
    """Jinja's sandbox with every growth bounded by the current `Budget`."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "+", "**", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["range"] = _range
        self.globals.pop("lipsum", None)

    def bound_filters(self) -> None:
        """Wrap every registered filter (call once the filters are all set)."""
        for name, function in list(self.filters.items()):
            self.filters[name] = _bounded_filter(name, function)

    def concat(self, pieces: Iterable[Any]) -> str:
        """`"".join` that stops as soon as the joined length exceeds the budget."""
        b = _current()
        out = []
        size = 0
        for piece in pieces:
            text = piece if isinstance(piece, str) else str(piece)
            size += len(text)
            if size > b.chars:
                b.text(size, "output")
            out.append(text)
        b.charge(size)
        return "".join(out)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        return _check_result(self.binop_table[operator](left, right), f"a `{operator}` result")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        owner = getattr(__obj, "__self__", None)
        name = getattr(__obj, "__name__", "")
        wrapped = getattr(__obj, "__wrapped__", None)  # Jinja's wrapper of str.format
        if wrapped is not None and isinstance(getattr(wrapped, "__self__", None), str):
            owner, name = wrapped.__self__, getattr(wrapped, "__name__", name)
        if isinstance(owner, str):
            args = _check_str_method(owner, name, args, kwargs)
        elif isinstance(owner, list | dict):
            args = _check_container_method(owner, name, args)
        result = SandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs)
        return _check_result(result, f"the result of {name or 'a call'}()")
