"""What every engine is: prompt token ids in, output token ids out.

Data flow::

    Generation (prompt ids, sampling, structural tag)
        -> Engine.stream()            an async iterator; each item is a Delta
        -> Delta(ids, finish_reason)  ids in output order; the last item carries
                                      "stop" (end of sequence) or "length" (max_tokens)

Invariants every engine keeps:

* Token ids only: an engine never decodes or parses output; the server's parser does.
* Closing the iterator early (`aclose()`, or the consuming task being cancelled) stops
  the generation: a client that goes away costs no more compute.
* A failure is an `EngineError`, raised from the iterator, never a silent end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolwire.tokenizer import Tokenizer

__all__ = ["Delta", "Engine", "EngineError", "Generation", "TokenLogprob"]


@dataclass(frozen=True)
class Generation:
    """One sequence to generate."""

    #: The rendered prompt, as token ids.
    prompt_ids: list[int]
    #: The most output ids to produce.
    max_tokens: int
    #: Sampling temperature (None: the engine's default); 0 means greedy.
    temperature: float | None = None
    #: Nucleus sampling mass (None: the engine's default).
    top_p: float | None = None
    #: Seed for sampling (None: random).
    seed: int | None = None
    #: XGrammar structural tag constraining the output, or None.
    structural_tag: Mapping[str, Any] | None = None
    #: What to send instead when the engine rejects `structural_tag` (its own limits or
    #: XGrammar version): called at most once; returns the weaker tag (the native
    #: envelope with any JSON object as arguments, for required/named calls) or None
    #: (no constraint). None here: no fallback (the rejection is the request's error).
    fallback_tag: Callable[[], Mapping[str, Any] | None] | None = None
    #: `structural_tag` already compiled by the engine's own compiler (the server
    #: compiles off the generation thread), or None: the engine compiles it.
    grammar: Any = None
    #: Return each output id's log probability and this many most likely alternatives
    #: (`Delta.logprobs`); None: none.
    logprobs: int | None = None


@dataclass(frozen=True)
class TokenLogprob:
    """One output id's log probability under the model (before any grammar mask)."""

    id: int
    logprob: float
    #: The most likely ids at that position and their log probabilities, best first.
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class Delta:
    """Output ids produced since the last delta; the last one says why it ended."""

    ids: list[int] = field(default_factory=list)
    #: None while generating; "stop" (end of sequence) or "length" on the last delta.
    finish_reason: str | None = None
    #: Set on the first delta when the engine rejected the structural tag and ran with
    #: `Generation.fallback_tag` instead: the reason code to count.
    grammar_fallback: str | None = None
    #: One entry per id of `ids`, when the generation asked for logprobs.
    logprobs: list[TokenLogprob] | None = None


class EngineError(Exception):
    """The engine failed: unreachable, refused the request, or broke off mid-stream."""

    def __init__(self, message: str, *, status: int = 502) -> None:
        super().__init__(message)
        #: The HTTP status the server answers with when nothing was streamed yet.
        self.status = status


class Engine(Protocol):
    """An engine the server can run requests on."""

    #: The model name clients send and `/v1/models` lists.
    model: str
    #: The served model's vocabulary (prompt rendering and parsing use it).
    tokenizer: Tokenizer
    #: Ids the model can produce: 0 .. vocab_size - 1, the rows of its output layer (at
    #: least the tokenizer's vocabulary; often wider, padded: Qwen3's has 151,936 rows
    #: for 151,669 tokens). An id between the two has no text.
    vocab_size: int
    #: The output format name (a key of `toolwire.formats`).
    format: str
    #: A chat template that overrides the tokenizer's own, or None.
    template: str | None
    #: The longest prompt the engine takes, in ids (None: no bound but the context).
    max_prompt_tokens: int | None
    #: The model's context, prompt and output ids together (None: not known).
    context_length: int | None
    #: True when the engine applies `structural_tag` constraints.
    constrains: bool
    #: True when the engine returns log probabilities (`Generation.logprobs`).
    logprobs: bool
    #: What the operator should know at startup (ungated format, no grammar, ...).
    warnings: list[str]

    def stream(self, generation: Generation) -> AsyncIterator[Delta]:
        """Generate; the iterator ends after the delta carrying `finish_reason`."""
        ...

    async def close(self) -> None:
        """Release connections and threads."""
        ...
