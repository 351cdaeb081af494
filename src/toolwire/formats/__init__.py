"""The format registry: one small module per model family, all run by `Parser`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolwire.errors import UsageError
from toolwire.formats.spec import CallContext, CallSyntax, Format, Reject, RenderedCall

if TYPE_CHECKING:
    from toolwire.tokenizer import Tokenizer

__all__ = [
    "CallContext",
    "CallSyntax",
    "Format",
    "Reject",
    "RenderedCall",
    "get",
    "is_gated",
    "names",
    "register",
]

_REGISTRY: dict[str, Format] = {}
_builtins_loaded = False


def register(fmt: Format) -> Format:
    """Add a format to the registry (each format module calls this once; a custom
    format may be registered at any time, before or after the built-ins load)."""
    if fmt.name in _REGISTRY:
        raise UsageError(f"format {fmt.name!r} is registered twice")
    _REGISTRY[fmt.name] = fmt
    return fmt


def names() -> list[str]:
    """The registered format names, sorted."""
    _load()
    return sorted(_REGISTRY)


def get(name: str) -> Format:
    """The format called `name`; `UsageError` names the known ones otherwise."""
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(
            f"unknown format {name!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None


def is_gated(fmt: Format | str, tokenizer: Tokenizer | None) -> bool:
    """True when `fmt`'s call structure is decided by token id under `tokenizer`
    (what `Parser(fmt, tokenizer).gated` says, without building a parser)."""
    from toolwire.lexicon import is_gated as gated  # the lexicon imports this package

    return gated(get(fmt) if isinstance(fmt, str) else fmt, tokenizer)


def _load() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    from toolwire.formats import (  # noqa: F401
        deepseek_v3,
        deepseek_v4,
        deepseek_v31,
        deepseek_v32,
        gemma4,
        glm45,
        glm47,
        gpt_oss,
        hermes,
        kimi_k2,
        llama3_json,
        minimax_m2,
        mistral,
        pythonic,
        qwen3,
        qwen3_coder,
    )
