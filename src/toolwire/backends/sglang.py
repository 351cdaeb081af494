"""SGLang over HTTP: `/generate` with `input_ids`, streaming `output_ids` back.

Request body (fields of SGLang's `GenerateReqInput`)::

    {"input_ids": [ids], "stream": true,
     "sampling_params": {"max_new_tokens": n, "skip_special_tokens": false,
                         "structural_tag": "<tag as JSON>",  # XGrammar upstream
                      or "ebnf": "<Lark>",                 # llguidance upstream
                         "temperature", "top_p", "sampling_seed"}}

SGLang streams `output_ids` cumulatively by default and as deltas with
`--incremental-streaming-output`; `meta_info.completion_tokens` (always cumulative) tells
which, so both work; an event without it, or agreeing with neither, is an engine error
(guessing would duplicate or drop text). `meta_info.finish_reason` is null until the
last event. The events that arrived together (`RemoteClient.events`' batches) become
one Delta.

The constraint is in the form of SGLang's `--grammar-backend`: XGrammar takes the
structural tag, llguidance the Lark grammar of the same language as `ebnf` (SGLang
reads it with llguidance's `grammar_from("ebnf", ...)`, which takes Lark as it is).
`grammar_backend_of(upstream)` reads the backend from SGLang's `/get_server_info`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from toolwire.backends.base import Delta, EngineError, Generation
from toolwire.backends.grammar_backend import GUIDANCE, XGRAMMAR, lark_of, warm_upstream_specials
from toolwire.backends.remote import RemoteClient, in_vocabulary, token_ids
from toolwire.tokenizer import Tokenizer

__all__ = ["SglangEngine", "generate_body", "grammar_backend_of"]


def grammar_backend_of(upstream: str, *, timeout: float = 5.0) -> str | None:
    """The constraint backend an SGLang server runs (its `grammar_backend` server
    argument, from `/get_server_info`), or None when it does not say."""
    try:
        info = httpx.get(upstream.rstrip("/") + "/get_server_info", timeout=timeout).json()
    except (httpx.HTTPError, ValueError):
        return None
    backend = info.get("grammar_backend") if isinstance(info, dict) else None
    return {"xgrammar": XGRAMMAR, "llguidance": GUIDANCE}.get(str(backend))


def generate_body(generation: Generation) -> dict[str, Any]:
    """The `/generate` body for one generation."""
    sampling: dict[str, Any] = {
        "max_new_tokens": generation.max_tokens,
        "skip_special_tokens": False,
    }
    if generation.temperature is not None:
        sampling["temperature"] = generation.temperature
    if generation.top_p is not None:
        sampling["top_p"] = generation.top_p
    if generation.seed is not None:
        sampling["sampling_seed"] = generation.seed
    tag = generation.structural_tag
    if tag is not None:
        lark = lark_of(tag)
        if lark is not None:
            sampling["ebnf"] = lark
        else:
            sampling["structural_tag"] = json.dumps(tag)
    return {"input_ids": list(generation.prompt_ids), "sampling_params": sampling, "stream": True}


class SglangEngine:
    """An SGLang server's native generate endpoint."""

    def __init__(
        self,
        upstream: str,
        *,
        model: str,
        tokenizer: Tokenizer,
        format: str,
        template: str | None = None,
        timeout: float = 60.0,
        max_prompt_tokens: int | None = None,
        vocab_size: int | None = None,
        grammar_backend: str = XGRAMMAR,
    ) -> None:
        self._client = RemoteClient(upstream, timeout=timeout)
        self.model = model
        #: The constraint backend SGLang runs (its grammars are sent in that form).
        self.grammar_backends = (grammar_backend,)
        if grammar_backend == GUIDANCE:
            warm_upstream_specials(tokenizer)
        self.tokenizer = tokenizer
        #: The model's output rows (its config's `vocab_size`), else the tokenizer's.
        self.vocab_size = max(vocab_size or 0, tokenizer.vocab_size)
        self.format = format
        self.template = template
        self.max_prompt_tokens = max_prompt_tokens
        #: The upstream's `max_model_len` (`backends.context.upstream_context`).
        self.context_length: int | None = None
        self.constrains = True
        self.logprobs = False  # /generate's logprobs are not read here yet
        self.warnings: list[str] = []

    async def stream(self, generation: Generation) -> AsyncIterator[Delta]:
        """One Delta per batch of events (every event that had arrived: see
        `RemoteClient.events`); a bad event ends the stream after the ids before it."""
        seen = 0
        vocab = self.vocab_size  # the model's rows: padding ids are text, not errors
        async for batch in self._client.events("/generate", generate_body(generation)):
            ids: list[int] = []
            try:
                for payload in batch:
                    new, reason = _event(payload, seen, vocab)
                    seen += len(new)
                    ids += new
                    if reason is not None:
                        break
            except EngineError:
                if ids:
                    yield Delta(ids)
                raise
            yield Delta(ids, reason)
            if reason is not None:
                return
        raise EngineError("SGLang ended the stream without a finish_reason")

    async def close(self) -> None:
        await self._client.close()


def _event(payload: dict[str, Any], seen: int, vocab: int) -> tuple[list[int], str | None]:
    """One event's new ids (past the `seen` ones) and its finish reason."""
    if "output_ids" not in payload:
        raise EngineError("SGLang returned an event without output_ids")
    ids = token_ids(payload["output_ids"], "SGLang's output_ids")
    meta = payload.get("meta_info")
    if not isinstance(meta, dict):
        raise EngineError("SGLang returned an event whose meta_info is not an object")
    new = in_vocabulary(
        _new_ids(ids, meta.get("completion_tokens"), seen), "SGLang's output_ids", vocab
    )
    finish = meta.get("finish_reason")
    if finish is None:
        return new, None
    kind = finish.get("type") if isinstance(finish, dict) else None
    if kind == "abort":
        raise EngineError(f"SGLang aborted the request: {finish.get('message')}")
    if kind not in ("stop", "length"):
        raise EngineError(f"SGLang returned finish_reason {finish!r}")
    return new, kind


def _new_ids(ids: list[int], total: Any, seen: int) -> list[int]:
    """The ids this event adds: cumulative output (`total == len(ids)`) past those
    already seen, or incremental output (`total == seen + len(ids)`) whole. Without a
    consistent `completion_tokens` the two cannot be told apart: an error."""
    if type(total) is not int:
        raise EngineError(
            "SGLang returned an event without meta_info.completion_tokens: cumulative "
            "and incremental output cannot be told apart"
        )
    if total == len(ids) and len(ids) >= seen:
        return ids[seen:]
    if total == seen + len(ids):
        return ids
    raise EngineError(
        f"SGLang's completion_tokens ({total}) agrees with neither cumulative nor "
        f"incremental output ({len(ids)} ids in this event, {seen} before)"
    )
