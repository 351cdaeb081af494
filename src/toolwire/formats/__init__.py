"""The format registry: one small module per model family, all run by `Parser`.

Names: every format has one canonical name (`names()`); `aliases()` maps the other
names users know (model names such as `glm5`, peers' parser names such as `qwen25`)
to it. `get` accepts either, ignoring case and the separators `-`, `_`, `.` and
spaces (`GLM-5.1` is `glm51`). A name is taken once: registering a format whose name,
or one of whose aliases, spells like a taken name or alias is a `UsageError`.

`detect(tokenizer)` picks a format from a chat template and a vocabulary
(`toolwire.detect`, which renders templates and so sits above this package).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from toolwire.errors import UsageError
from toolwire.formats.aliases import BUILTIN, spelling
from toolwire.formats.detection import Detection
from toolwire.formats.spec import CallContext, CallSyntax, Format, Reject, RenderedCall

if TYPE_CHECKING:
    import os

    from toolwire.tokenizer import Tokenizer

__all__ = [
    "CallContext",
    "CallSyntax",
    "Detection",
    "Format",
    "Reject",
    "RenderedCall",
    "aliases",
    "detect",
    "get",
    "is_gated",
    "names",
    "register",
]

_REGISTRY: dict[str, Format] = {}
#: Every alias -> its canonical name (the built-in ones are known before any format loads).
_ALIASES: dict[str, str] = dict(BUILTIN)
#: The spelling of every taken name and alias -> the canonical name it stands for.
_SPELLINGS: dict[str, str] = {spelling(a): c for a, c in BUILTIN.items()}
_builtins_loaded = False  # the import of the built-ins has begun (in some thread)
_builtins_ready = False  # ... and has finished: lookups need no lock from here on
_loading = threading.RLock()  # reentrant: a built-in module imported mid-load may look up


def register(fmt: Format, *, aliases: Sequence[str] = ()) -> Format:
    """Add a format to the registry (each format module calls this once; a custom
    format may be registered at any time, before or after the built-ins load).

    `aliases`: further names for it. A name or alias that spells like one already
    taken (a registered format's name or any alias, the built-in ones included) is a
    `UsageError`, and nothing is registered. (The built-in formats load on the first
    lookup, so a custom format registered before it that takes a built-in's name fails
    then.)
    """
    if fmt.name in _REGISTRY:
        raise UsageError(f"format {fmt.name!r} is registered twice")
    if isinstance(aliases, str):
        raise UsageError(f"aliases is a sequence of names, got the string {aliases!r}")
    wanted = [fmt.name, *aliases]
    seen: set[str] = set()
    for name in wanted:
        key = spelling(name) if isinstance(name, str) else ""
        if not key:
            raise UsageError(f"format names and aliases are non-empty strings, got {name!r}")
        taken = _SPELLINGS.get(key)
        if taken is not None or key in seen:
            owner = repr(taken) if taken is not None else "this format already"
            raise UsageError(
                f"format name {name!r} is taken (it spells like a name of {owner}); "
                "choose another name"
            )
        seen.add(key)
    _REGISTRY[fmt.name] = fmt
    for name in wanted:
        _SPELLINGS[spelling(name)] = fmt.name
    _ALIASES.update(dict.fromkeys(aliases, fmt.name))
    return fmt


def names() -> list[str]:
    """The registered format names (canonical ones only), sorted."""
    _load()
    return sorted(_REGISTRY)


def aliases() -> dict[str, str]:
    """Every alias of a registered format -> its canonical name, sorted by alias."""
    _load()
    return {a: c for a, c in sorted(_ALIASES.items()) if c in _REGISTRY}


def get(name: str) -> Format:
    """The format called `name` (a canonical name or an alias, in any case and with
    any of the separators `-`, `_`, `.` and spaces); `UsageError` names the known ones
    otherwise."""
    _load()
    fmt = _REGISTRY.get(name) if isinstance(name, str) else None
    if fmt is not None:
        return fmt
    canonical = _SPELLINGS.get(spelling(name)) if isinstance(name, str) else None
    if canonical is not None and canonical in _REGISTRY:
        return _REGISTRY[canonical]
    raise UsageError(
        f"unknown format {name!r}; known: {', '.join(sorted(_REGISTRY))} "
        f"(and their aliases: {', '.join(aliases())})"
    )


#: Detection renders chat templates and runs parsers, layers above this registry, so
#: the registry never imports it: `toolwire.detect` installs itself here when it
#: loads (the `toolwire` package imports it, so it is in place before any caller's code).
_detector: Callable[..., Detection] | None = None


def _install_detector(detector: Callable[..., Detection]) -> None:
    global _detector
    _detector = detector


def detect(tokenizer: Tokenizer, *, template: str | os.PathLike[str] | None = None) -> Detection:
    """The format a chat template and a vocabulary say the model writes, with the
    evidence, or no format and the reason (see `toolwire.detect`).

    `template`: the template text or a `.jinja` path; by default the tokenizer's own.
    """
    if _detector is None:  # only while the `toolwire` package itself is still loading
        raise UsageError("format detection is not loaded yet: import toolwire first")
    return _detector(tokenizer, template=template)


def is_gated(fmt: Format | str, tokenizer: Tokenizer | None) -> bool:
    """True when `fmt`'s call structure is decided by token id under `tokenizer`
    (what `Parser(fmt, tokenizer).gated` says, without building a parser)."""
    from toolwire.lexicon import is_gated as gated  # lazily: a registry lookup loads no tokenizer

    return gated(get(fmt) if isinstance(fmt, str) else fmt, tokenizer)


def _load() -> None:
    """Import the built-in formats once. Other threads wait until they are all
    registered (a lookup never sees a half-filled registry); the importing thread
    itself passes through, so a built-in module may import its siblings."""
    global _builtins_loaded, _builtins_ready
    if _builtins_ready:
        return
    with _loading:
        if _builtins_loaded:
            return
        _builtins_loaded = True
        try:
            _import_builtins()
        except BaseException:
            _builtins_loaded = False
            raise
        _builtins_ready = True


def _import_builtins() -> None:
    from toolwire.formats import (  # noqa: F401
        apertus,
        command,
        deepseek_v3,
        deepseek_v4,
        deepseek_v31,
        deepseek_v32,
        deepseek_v41,
        ernie45,
        functiongemma,
        gemma4,
        gigachat3,
        gigachat31,
        gigachat35,
        glm45,
        glm47,
        gpt_oss,
        granite,
        granite4,
        granite31,
        hermes,
        hunyuan,
        hy_v3,
        hy_v4,
        inkling,
        internlm,
        jamba,
        kimi_k2,
        kimi_k3,
        lfm2,
        llama3_json,
        llama4,
        longcat,
        minicpm5,
        minimax_m2,
        minimax_m3,
        mistral,
        nemotron,
        olmo3,
        phi4_mini,
        pythonic,
        qwen3,
        qwen3_coder,
        seed_oss,
        step3,
        xlam,
    )
