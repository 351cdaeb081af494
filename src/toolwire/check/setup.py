"""A format's model as the run sets it up: tokenizer, chat template, thinking switch, stops.

A `Setup` names them for one format; `setup_for(format)` gives the registered one, or
else the default: the tokenizer folder of the format's own name under
`<data>/tokenizers/`, its own chat template, no thinking switch, its EOS as the stop
token. `load(source, data)` turns a `Setup.tokenizer` source into a `Tokenizer`: by
default the folder or file `<data>/tokenizers/<source>` (an absolute path is taken as
is). A module given to `toolwire check --impls-from` may register its own setups and a
loader for sources of its own (`register_setups`), e.g. vocabularies it builds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from toolwire.errors import UsageError
from toolwire.tokenizer import Tokenizer, load_tokenizer

__all__ = ["Loader", "Setup", "load", "load_folder", "register_setups", "setup_for"]

#: (tokenizer source, data folder) -> the tokenizer.
Loader = Callable[[str, Path], Tokenizer]


@dataclass(frozen=True)
class Setup:
    """A format's tokenizer, chat template, thinking switch and stop tokens."""

    #: A folder or file under `<data>/tokenizers/` (or a source the loader knows).
    tokenizer: str
    #: The chat template, a file under `<data>/tokenizers/` (None: the tokenizer's).
    template: str | None = None
    #: The `chat_template_kwargs` key that switches thinking on or off, when the
    #: template has one: a case with reasoning sends it True, others False.
    thinking: str | None = None
    #: Stop tokens (`generation_config.json` `eos_token_id`, as token text).
    stops: tuple[str, ...] = ()


@cache
def load_folder(source: str, data: Path) -> Tokenizer:
    """The default loader: `<data>/tokenizers/<source>` with `toolwire.load_tokenizer`."""
    path = data / "tokenizers" / source
    if not path.exists():
        raise UsageError(f"no tokenizer at {path}")
    return load_tokenizer(path)


_SETUPS: dict[str, Setup] = {}
_LOADER: list[Loader] = [load_folder]


def register_setups(setups: Mapping[str, Setup], loader: Loader | None = None) -> None:
    """Use these setups (format -> Setup; later registrations win) and, when given, this
    loader for every tokenizer source."""
    _SETUPS.update(setups)
    if loader is not None:
        _LOADER[0] = loader


def setup_for(fmt: str) -> Setup:
    """The registered setup of `fmt`, else its tokenizer folder of the same name."""
    return _SETUPS.get(fmt) or Setup(fmt)


def load(source: str, data: Path) -> Tokenizer:
    """The tokenizer a `Setup.tokenizer` source names, under `data`."""
    return _LOADER[0](source, data)
