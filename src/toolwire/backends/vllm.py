"""vLLM over HTTP: a token-id prompt to `/v1/completions`, output ids streamed back.

Request body (fields of vLLM's `CompletionRequest`)::

    {"model": ..., "prompt": [ids], "max_tokens": n, "stream": true,
     "return_token_ids": true,           # each chunk carries choices[0].token_ids (delta)
     "skip_special_tokens": false,       # special tokens stay in the text, too
     "add_special_tokens": false,        # the prompt ids are final (no BOS added)
     "structured_outputs": {"structural_tag": "<tag as JSON>"},   # XGrammar upstream
                        or {"grammar": "<Lark>"},             # llguidance upstream
     "temperature", "top_p", "seed",     # only when the request set them
     "logprobs": k, "return_tokens_as_token_ids": true}   # only when asked: each
                                         # chunk's choices[].logprobs, by id

The constraint is in the form of the backend vLLM runs (`--grammar-backend`, vLLM's
`--structured-outputs-config.backend`): XGrammar takes the structural tag, guidance
takes the Lark grammar of the same language as `structured_outputs.grammar`.

The server never sends `stop` strings upstream: they are matched on parsed content.
The events that arrived together (`RemoteClient.events`' batches) become one Delta.

A tag vLLM rejects (HTTP 400 naming the structured output: its nesting limit, its own
XGrammar version) is not the request's fault: before any output, the request is sent
again with `Generation.fallback_tag` (a relaxed tag for forced calls, none for `auto`)
and the first delta says so (`grammar_fallback="engine_rejected"`). A second rejection,
or one with no fallback planned (`response_format`), is the request's error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import replace
from typing import Any

from toolwire.backends.base import Delta, EngineError, Generation, TokenLogprob
from toolwire.backends.grammar_backend import GUIDANCE, XGRAMMAR, lark_of, warm_upstream_specials
from toolwire.backends.remote import RemoteClient, in_vocabulary, token_ids
from toolwire.tokenizer import Tokenizer

__all__ = ["VllmEngine", "completion_body", "read_logprobs", "rejects_tag"]

log = logging.getLogger("toolwire.backends.vllm")

#: Words of vLLM's 400 answers about a structured-output constraint.
_TAG_WORDS = ("structur", "grammar", "schema", "xgrammar", "nested")


def rejects_tag(error: EngineError, generation: Generation) -> bool:
    """Whether `error` is vLLM refusing this generation's structural tag."""
    if generation.structural_tag is None or error.status != 400:
        return False
    text = str(error).lower()
    return any(word in text for word in _TAG_WORDS)


def completion_body(generation: Generation, model: str) -> dict[str, Any]:
    """The `/v1/completions` body for one generation."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(generation.prompt_ids),
        "max_tokens": generation.max_tokens,
        "stream": True,
        "return_token_ids": True,
        "skip_special_tokens": False,
        "add_special_tokens": False,
    }
    for name in ("temperature", "top_p", "seed"):
        value = getattr(generation, name)
        if value is not None:
            body[name] = value
    tag = generation.structural_tag
    if tag is not None:
        lark = lark_of(tag)
        structured = {"grammar": lark} if lark is not None else {"structural_tag": json.dumps(tag)}
        body["structured_outputs"] = structured
    if generation.logprobs is not None:
        # alternatives named by id ("token_id:123"), never by text
        body["logprobs"] = generation.logprobs
        body["return_tokens_as_token_ids"] = True
    return body


def read_logprobs(logprobs: Any, ids: list[int], top: int) -> list[TokenLogprob]:
    """vLLM's completion `logprobs` of one chunk (`token_logprobs`, `top_logprobs` keyed
    `token_id:N`) as one entry per id of the chunk."""
    if not isinstance(logprobs, dict):
        raise EngineError("vLLM returned no logprobs for a request that asked for them")
    chosen = logprobs.get("token_logprobs")
    alternatives = logprobs.get("top_logprobs") or [None] * len(ids)
    if not isinstance(chosen, list) or len(chosen) != len(ids) or len(alternatives) != len(ids):
        raise EngineError("vLLM's logprobs do not match its token_ids")
    out = []
    for token, value, options in zip(ids, chosen, alternatives, strict=True):
        ranked: list[tuple[int, float]] = []
        for key, number in (options or {}).items():
            if isinstance(key, str) and key.startswith("token_id:"):
                ranked.append((int(key.split(":", 1)[1]), float(number)))
        ranked.sort(key=lambda pair: -pair[1])
        out.append(TokenLogprob(token, float(value or 0.0), tuple(ranked[:top])))
    return out


class VllmEngine:
    """A vLLM server's completions endpoint, spoken in token ids."""

    def __init__(
        self,
        upstream: str,
        *,
        model: str,
        tokenizer: Tokenizer,
        format: str,
        template: str | None = None,
        served_name: str | None = None,
        timeout: float = 60.0,
        max_prompt_tokens: int | None = None,
        vocab_size: int | None = None,
        grammar_backend: str = XGRAMMAR,
    ) -> None:
        self._client = RemoteClient(upstream, timeout=timeout)
        self._upstream_model = model
        #: The constraint backend vLLM runs (its grammars are sent in that form).
        self.grammar_backends = (grammar_backend,)
        if grammar_backend == GUIDANCE:
            warm_upstream_specials(tokenizer)
        self.model = served_name or model
        self.tokenizer = tokenizer
        #: The model's output rows (its config's `vocab_size`), else the tokenizer's.
        self.vocab_size = max(vocab_size or 0, tokenizer.vocab_size)
        self.format = format
        self.template = template
        self.max_prompt_tokens = max_prompt_tokens
        #: The upstream's `max_model_len` (`backends.context.upstream_context`).
        self.context_length: int | None = None
        self.constrains = True
        self.logprobs = True
        self.warnings: list[str] = []

    async def stream(self, generation: Generation) -> AsyncIterator[Delta]:
        deltas = self._deltas(generation)
        try:
            first = await anext(deltas)
        except EngineError as exc:
            if generation.fallback_tag is None or not rejects_tag(exc, generation):
                raise
            log.warning("vLLM rejected the structural tag, falling back: %s", exc)
            fallback: Mapping[str, Any] | None = generation.fallback_tag()
            weaker = replace(generation, structural_tag=fallback, fallback_tag=None)
            deltas = self._deltas(weaker)
            first = replace(await anext(deltas), grammar_fallback="engine_rejected")
        try:
            yield first
            async for delta in deltas:
                yield delta
        finally:
            await deltas.aclose()  # closes the response: vLLM aborts the request

    async def _deltas(self, generation: Generation) -> AsyncGenerator[Delta, None]:
        """One Delta per batch of events (every event that had arrived: see
        `RemoteClient.events`); a bad event ends the stream after the ids before it."""
        body = completion_body(generation, self._upstream_model)
        vocab = self.vocab_size  # the model's rows: padding ids are text, not errors
        async for batch in self._client.events("/v1/completions", body):
            ids: list[int] = []
            logprobs: list[TokenLogprob] | None = None if generation.logprobs is None else []
            try:
                chosen, reason = _read(batch, ids, vocab, generation.logprobs, logprobs)
            except EngineError:
                if ids:
                    yield Delta(ids, logprobs=logprobs[: len(ids)] if logprobs else None)
                raise
            if chosen:
                yield Delta(ids, reason, logprobs=logprobs)
                if reason is not None:
                    return
        raise EngineError("vLLM ended the stream without a finish_reason")

    async def close(self) -> None:
        await self._client.close()


def _read(
    batch: list[dict[str, Any]],
    ids: list[int],
    vocab: int,
    top: int | None = None,
    logprobs: list[TokenLogprob] | None = None,
) -> tuple[bool, str | None]:
    """Appends the batch's output ids to `ids` (and, when the generation asked for
    `top` logprobs, their entries to `logprobs`), up to and including the first choice
    with a finish reason; returns whether any event had a choice (usage-only chunks
    have none) and that finish reason (None while generating)."""
    chosen = False
    for payload in batch:
        choices = payload.get("choices")
        if choices is None:
            continue  # a usage-only chunk
        if type(choices) is not list or not all(type(c) is dict for c in choices):
            raise EngineError("vLLM returned 'choices' that is not a list of objects")
        for choice in choices:
            chosen = True
            new = choice.get("token_ids")
            reason = choice.get("finish_reason")
            if new is None and reason is None:
                raise EngineError(
                    "vLLM returned a chunk without token_ids: is return_token_ids "
                    "supported by this vLLM version?"
                )
            if new is not None:
                what = "vLLM's choices[].token_ids"
                new_ids = in_vocabulary(token_ids(new, what), what, vocab)
                if top is not None and logprobs is not None and new_ids:
                    logprobs += read_logprobs(choice.get("logprobs"), new_ids, top)
                ids += new_ids
            if reason is not None:
                return True, _reason(reason)  # raises for an error, after the ids before it
    return chosen, None


def _reason(reason: Any) -> str | None:
    """vLLM's finish reason as the server's: "length", or "stop" (end of sequence, a stop
    id, vLLM's repetition detector)."""
    if reason is None:
        return None
    if reason in ("abort", "error"):
        raise EngineError(f"vLLM ended the request with finish_reason {reason!r}")
    if not isinstance(reason, str):
        raise EngineError(f"vLLM returned finish_reason {reason!r}")
    return "length" if reason == "length" else "stop"
