"""The tokenizer interface: what the parser, prompt, grammar and server ask of a vocabulary.

Two implementations: `HuggingFaceTokenizer` (a `tokenizers.Tokenizer`, with the
`tokenizer_config.json` mapping) and `MistralTokenizer` (mistral-common's own
tokenizer). Each is a whole class with its own `__init__`, which hands the vocabulary
facts every implementation has to this base's `__init__`; the rest is abstract.

Why an abstract base and not a `typing.Protocol`: `Parser` and `render_prompt` check
`isinstance(tokenizer, Tokenizer)` on every construction to turn a wrong argument into
a `UsageError`. Against a base class that is a cheap, exact, nominal check; against a
runtime-checkable protocol it probes every member by name (slow on Python 3.11, and any
object with an `encode` and a few fields would pass). The base holds no state beyond
the facts its `__init__` takes, and its two concrete methods are defined from the
abstract ones, so it is the protocol with a constructor contract.

`Tokenizer(backend, config, ...)`, the spelling that predates the Mistral
implementation, builds a `HuggingFaceTokenizer`, as `pathlib.Path(...)` builds a
`PosixPath`; typed code names `HuggingFaceTokenizer` itself.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, Self

__all__ = ["Detokenizer", "Tokenizer"]


class Detokenizer(Protocol):
    """Incremental decoding of one output stream."""

    #: True while text is held back (an incomplete character); see `Tokenizer.plain_texts`.
    pending: bool

    def step(self, token_id: int) -> str:
        """Return the text this id completes ('' while a character is incomplete)."""
        ...

    def flush(self) -> str:
        """Return what is left at the end of the stream (an incomplete character)."""
        ...


class Tokenizer(abc.ABC):
    """A loaded vocabulary with the operations toolwire needs. Immutable after init."""

    #: The implementation `Tokenizer(...)` builds (the one declared `default=True`).
    _default: ClassVar[type[Tokenizer] | None] = None

    def __init_subclass__(cls, *, default: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if default:
            Tokenizer._default = cls

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        if cls is Tokenizer and Tokenizer._default is not None:
            cls = Tokenizer._default  # type: ignore[assignment]  # a subclass: still Self
        return super().__new__(cls)

    def __init__(
        self,
        *,
        name: str,
        added_tokens: Mapping[str, int],
        added_ids: frozenset[int],
        special_ids: frozenset[int],
        eos_ids: frozenset[int],
        chat_template: str | None,
    ) -> None:
        #: Where the vocabulary came from (a path or a hub id), for messages.
        self.name = name
        #: Every added token's text -> id (delimiters, turn markers, ...).
        self.added_tokens: Mapping[str, int] = added_tokens
        #: Ids of every added token, special or not.
        self.added_ids: frozenset[int] = added_ids
        #: Ids of added tokens flagged special.
        self.special_ids: frozenset[int] = special_ids
        #: Ids that end the model's output.
        self.eos_ids: frozenset[int] = eos_ids
        #: The chat template (Jinja), when the files carry one.
        self.chat_template: str | None = chat_template

    # -- vocabulary facts -------------------------------------------------------------

    @property
    @abc.abstractmethod
    def backend(self) -> Any:
        """The wrapped `tokenizers.Tokenizer` (`UsageError` where there is none)."""

    @property
    @abc.abstractmethod
    def config(self) -> Mapping[str, Any]:
        """The `tokenizer_config.json` mapping ({} where there is none)."""

    @property
    @abc.abstractmethod
    def vocab_size(self) -> int:
        """Ids are 0 .. vocab_size - 1, added tokens included."""

    @abc.abstractmethod
    def token_text(self, token_id: int) -> str:
        """The text of one id, as the model's output would show it."""

    @abc.abstractmethod
    def token_string(self, key: str) -> str | None:
        """A named token (`eos_token`, `bos_token`) as text."""

    def token_id(self, text: str) -> int | None:
        """The id of `text` when it is exactly one token of this vocabulary, else None."""
        if text in self.added_tokens:
            return self.added_tokens[text]
        ids = self.encode(text)
        if len(ids) == 1 and self.token_text(ids[0]) == text:
            return ids[0]
        return None

    def is_special(self, token_id: int) -> bool:
        return token_id in self.special_ids

    # -- encode / decode --------------------------------------------------------------

    @abc.abstractmethod
    def encode(self, text: str, *, delimiters: bool = True) -> list[int]:
        """Encode `text` without adding BOS/EOS.

        `delimiters=True` matches added tokens, as the model's own output carries them.
        `delimiters=False` spells every character from ordinary tokens, so the result
        holds no added-token id: what a model copying the text would produce.
        """

    @abc.abstractmethod
    def decode(self, ids: list[int], *, skip_special_tokens: bool = False) -> str:
        """The text of `ids` (an incomplete character as U+FFFD)."""

    @abc.abstractmethod
    def plain_texts(self) -> Mapping[int, str] | None:
        """Ordinary (not added) ids whose text is complete on its own -> that text.

        A detokenizer that is not `pending` would return exactly this text for such an
        id, so hot loops may look it up directly. None where there is no such table.
        """

    @abc.abstractmethod
    def detokenizer(self) -> Detokenizer:
        """A fresh incremental detokenizer for one output stream."""
