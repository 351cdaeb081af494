"""The format registry: one small module per model family, all run by `Parser`."""

from __future__ import annotations

from toolwire.errors import UsageError
from toolwire.formats.spec import CallContext, CallSyntax, Format, Reject, RenderedCall

__all__ = ["CallContext", "CallSyntax", "Format", "Reject", "RenderedCall", "get", "names"]

_REGISTRY: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add a format to the registry (each format module calls this once)."""
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


def _load() -> None:
    if _REGISTRY:
        return
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
