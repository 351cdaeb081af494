"""vLLM over HTTP: a token-id prompt to `/v1/completions`, output ids streamed back.

Request body (fields of vLLM's `CompletionRequest`)::

    {"model": ..., "prompt": [ids], "max_tokens": n, "stream": true,
     "return_token_ids": true,           # each chunk carries choices[0].token_ids (delta)
     "skip_special_tokens": false,       # special tokens stay in the text, too
     "add_special_tokens": false,        # the prompt ids are final (no BOS added)
     "structured_outputs": {"structural_tag": "<tag as JSON>"},
     "temperature", "top_p", "seed"}     # only when the request set them

The server never sends `stop` strings upstream: they are matched on parsed content.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from toolwire.backends.base import Delta, EngineError, Generation
from toolwire.backends.remote import RemoteClient, token_ids
from toolwire.tokenizer import Tokenizer

__all__ = ["VllmEngine", "completion_body"]


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
    if generation.structural_tag is not None:
        body["structured_outputs"] = {"structural_tag": json.dumps(generation.structural_tag)}
    return body


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
    ) -> None:
        self._client = RemoteClient(upstream, timeout=timeout)
        self._upstream_model = model
        self.model = served_name or model
        self.tokenizer = tokenizer
        self.format = format
        self.template = template
        self.max_prompt_tokens = max_prompt_tokens
        self.constrains = True
        self.warnings: list[str] = []

    async def stream(self, generation: Generation) -> AsyncIterator[Delta]:
        body = completion_body(generation, self._upstream_model)
        async for payload in self._client.events("/v1/completions", body):
            choices = payload.get("choices")
            if choices is None:
                continue  # a usage-only chunk
            if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
                raise EngineError("vLLM returned 'choices' that is not a list of objects")
            for choice in choices:
                ids = choice.get("token_ids")
                reason = choice.get("finish_reason")
                if ids is None and reason is None:
                    raise EngineError(
                        "vLLM returned a chunk without token_ids: is return_token_ids "
                        "supported by this vLLM version?"
                    )
                ids = [] if ids is None else token_ids(ids, "vLLM's choices[].token_ids")
                yield Delta(list(ids), _reason(reason))
                if reason is not None:
                    return
        raise EngineError("vLLM ended the stream without a finish_reason")

    async def close(self) -> None:
        await self._client.close()


def _reason(reason: Any) -> str | None:
    if reason is None:
        return None
    if reason == "abort":
        raise EngineError("vLLM aborted the request")
    if not isinstance(reason, str):
        raise EngineError(f"vLLM returned finish_reason {reason!r}")
    return "length" if reason == "length" else "stop"
