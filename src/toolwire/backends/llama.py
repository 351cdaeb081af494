"""The embedded engine: llama.cpp (llama-cpp-python) running a GGUF model in-process.

Data flow::

    Generation --stream()--> worker thread: llama.generate(prompt ids)
                               each sampled id: constraint.accept(id), then emitted
                             --call_soon_threadsafe--> asyncio.Queue --> Delta(ids)

Invariants:

* Generation runs on one worker thread (a llama.cpp context serves one sequence at a
  time), never on the event loop; requests queue for it in arrival order.
* Grammar compiles do not run there when the server compiled the tag already
  (`Generation.grammar`, `compile_structural_tag` on the server's pool): a request
  waits for the worker only while another one generates, never while one compiles.
* A request's logits are those of its prompt evaluated afresh, whatever was served
  before: llama.cpp's numbers depend on how many tokens one decode call holds, so the
  cache of the previous prompt is reused only in whole batches of `_BATCH` tokens that
  a fresh evaluation would have decoded the same way (`reusable`); identical requests
  give identical logprobs, and a tail of under `_BATCH` tokens is decoded again.
* Closing the iterator sets a cancel flag the worker checks before every id, so a
  client that disconnects frees the worker within one token.
* With a constraint, every sampled id was allowed by its matcher (a logits mask over
  the same vocabulary), so `tool_choice="required"` yields a real call. The constraint
  is llguidance's grammar where llguidance is installed and expresses the request's
  tag, else XGrammar's structural tag (`grammar_backends`, `backends.grammar_backend`).
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from toolwire.backends.base import Delta, EngineError, Generation, TokenLogprob
from toolwire.backends.constraint import (
    GrammarConstraint,
    GuidanceConstraint,
    SequenceConstraint,
    guidance_grammar,
)
from toolwire.backends.gguf import read_metadata, tokenizer_from_gguf
from toolwire.backends.grammar_backend import GUIDANCE, XGRAMMAR
from toolwire.errors import UsageError
from toolwire.tokenizer import Tokenizer

__all__ = ["LlamaEngine", "reusable", "training_context"]

# Turn-ending tokens of common chat vocabularies: generation stops at any that exist.
_END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "<|return|>")

_Item = Delta | EngineError

#: Tokens per decode call, the granularity of cache reuse (`reusable`): a request decodes
#: at most this many tokens of a cached prefix again. On the CPU a prefill costs the same
#: per token from 16 tokens a call up (SmolLM2-135M, 1-2 threads: 8.9 ms at 16, 8.9 at
#: 512), where llama.cpp's default of 512 would decode up to 511 again per request.
_BATCH = 32

#: The context when a GGUF names none (llama.cpp's own default).
_FALLBACK_CONTEXT = 4096


def reusable(cached: Iterable[int], prefilled: int, prompt: list[int], batch: int) -> int:
    """How many of the cached positions a request for `prompt` keeps: the prefix it shares
    with the `cached` ids, cut to the previous prompt's `prefilled` length (the ids
    generated after it were decoded one by one) and to one short of `prompt` (its last
    id is decoded to give the logits), then down to a whole number of `batch`-token
    decode calls, the ones a fresh evaluation of `prompt` makes first."""
    limit = min(prefilled, len(prompt) - 1)  # compared no further than can be kept
    shared = 0
    for have, want in zip(cached, prompt[:limit], strict=False):
        if have != want:
            break
        shared += 1
    return shared // batch * batch


def training_context(metadata: Mapping[str, Any]) -> int:
    """The context the model was trained for (`{architecture}.context_length` in the
    GGUF's metadata), else llama.cpp's default of 4096."""
    arch = metadata.get("general.architecture")
    length = metadata.get(f"{arch}.context_length")
    return length if type(length) is int and length > 0 else _FALLBACK_CONTEXT


class _Scores:
    """A logits processor that sees each step's logits before any mask, so the chosen
    id's log probability (and the best alternatives) are the model's own."""

    def __init__(self, top: int) -> None:
        self._top = top
        self._last: npt.NDArray[np.float64] | None = None

    def see(self, _ids: Any, logits: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        shifted = logits.astype(np.float64) - float(np.max(logits))
        self._last = shifted - float(np.log(np.exp(shifted).sum()))
        return logits

    def of(self, token: int) -> TokenLogprob:
        """The entry of the id sampled from the last logits seen."""
        last = self._last
        if last is None:  # no logits were seen (nothing to sample from): unknown
            return TokenLogprob(token, 0.0)
        top: tuple[tuple[int, float], ...] = ()
        if self._top:
            best = np.argpartition(-last, self._top)[: self._top]
            best = best[np.argsort(-last[best])]
            top = tuple((int(i), float(last[i])) for i in best)
        return TokenLogprob(token, float(last[token]), top)


class LlamaEngine:
    """A GGUF model on llama.cpp, with grammar constraints applied in-process."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        model: str | None = None,
        format: str = "hermes",
        template: str | None = None,
        tokenizer: Tokenizer | None = None,
        context: int | None = None,
        threads: int | None = None,
    ) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise UsageError(
                "the embedded engine needs llama-cpp-python: pip install 'toolwire[llama]'"
            ) from exc
        path = Path(model_path)
        if not path.is_file():
            raise UsageError(f"{path}: no such model file")
        metadata = read_metadata(path)
        self.tokenizer = tokenizer or tokenizer_from_gguf(path, metadata)
        self.model = model or path.stem
        self.format = format
        self.template = template
        context = context or training_context(metadata)
        self.context_length: int | None = context
        self.max_prompt_tokens: int | None = None  # the context bounds it
        self._context = context
        # `threads` bounds prompt evaluation too (llama.cpp's default there is every core):
        # its threads wait for each other by spinning, so one more than the cores free
        # makes a prefill crawl.
        self._llama = Llama(
            str(path),
            n_ctx=context,
            n_threads=threads,
            n_threads_batch=threads,
            n_batch=_BATCH,
            n_ubatch=_BATCH,
            verbose=False,
        )
        #: llama.cpp's rows: the GGUF's vocabulary, padding entries included.
        self.vocab_size = max(self.tokenizer.vocab_size, int(self._llama.n_vocab()))
        self._stop_ids = frozenset(self._end_ids(metadata))
        self._grammar = GrammarConstraint.load(self.tokenizer, self._stop_ids)
        # llguidance's tokenizer is built on its own thread from here on (seconds).
        self._guidance = GuidanceConstraint.load(self.tokenizer, self._stop_ids)
        #: The constraint backends applied here, preferred first.
        self.grammar_backends: tuple[str, ...] = tuple(
            name
            for name, loaded in ((GUIDANCE, self._guidance), (XGRAMMAR, self._grammar))
            if loaded is not None
        )
        self.constrains = self._grammar is not None
        self.logprobs = True
        self.warnings: list[str] = []
        if self._grammar is None:
            self.warnings.append(
                "xgrammar is not installed: tool_choice 'required' and named tools are "
                "not enforced on the embedded engine (pip install 'toolwire[grammar]')"
            )
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama")
        #: The previous prompt's length: the cache holds its prefill (`reusable`).
        self._prefilled = 0

    def _end_ids(self, metadata: dict[str, Any]) -> Iterable[int]:
        yield from self.tokenizer.eos_ids
        eos = metadata.get("tokenizer.ggml.eos_token_id")
        if isinstance(eos, int):
            yield eos
        for text in _END_TOKENS:
            if text in self.tokenizer.added_tokens:
                yield self.tokenizer.added_tokens[text]

    async def stream(self, generation: Generation) -> AsyncIterator[Delta]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        cancel = threading.Event()

        def emit(item: _Item) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        loop.run_in_executor(self._executor, self._run, generation, cancel, emit)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, EngineError):
                    raise item
                yield item
                if item.finish_reason is not None:
                    return
        finally:
            cancel.set()

    def warm_up(self, generation: Generation) -> None:
        """Compile one constraint now (XGrammar's first compile is slow; llguidance's
        first waits for its tokenizer)."""
        if generation.structural_tag is not None:
            compiler = self._compiler(generation.structural_tag)
            if compiler is not None:
                compiler.start(generation.structural_tag)

    def _compiler(
        self, constraint: Mapping[str, Any]
    ) -> GrammarConstraint | GuidanceConstraint | None:
        """The compiler for a constraint's form: llguidance's grammar or a structural tag."""
        if guidance_grammar(constraint) is not None:
            return self._guidance
        return self._grammar

    def compile_structural_tag(self, tag: Mapping[str, Any]) -> Any:
        """The constraint (a structural tag, or llguidance's grammar) compiled against
        this model's vocabulary (for `Generation.grammar`); raises ValueError when it
        does not compile or its backend is not installed. Runs on the caller's thread,
        so compiles stay off the generation thread."""
        compiler = self._compiler(tag)
        if compiler is None:
            raise ValueError("the constraint's backend (xgrammar or llguidance) is not installed")
        return compiler.compile(tag)

    def _constraint(self, generation: Generation) -> SequenceConstraint | None:
        if generation.structural_tag is None:
            return None
        compiler = self._compiler(generation.structural_tag)
        if compiler is None:
            return None
        try:
            return compiler.start(generation.structural_tag, generation.grammar)
        except ValueError as exc:
            raise EngineError(str(exc), status=500) from exc

    def _run(
        self, generation: Generation, cancel: threading.Event, emit: Callable[[_Item], None]
    ) -> None:
        """Worker thread: sample ids until a stop id, the budget, or cancellation."""
        try:
            budget = min(generation.max_tokens, self._context - len(generation.prompt_ids))
            if cancel.is_set():
                return
            if budget <= 0:
                emit(Delta([], "length"))
                return
            constraint = self._constraint(generation)
            processors: list[Callable[[Any, npt.NDArray[np.float32]], Any]] = []
            scores = _Scores(generation.logprobs) if generation.logprobs is not None else None
            if scores is not None:
                processors.append(scores.see)  # first: the model's own distribution
            if constraint is not None:
                mask: Callable[[Any, npt.NDArray[np.float32]], npt.NDArray[np.float32]]
                mask = lambda _ids, scores: constraint.mask(scores)  # noqa: E731
                processors.append(mask)
            seed = generation.seed if generation.seed is not None else random.getrandbits(31)
            self._llama.set_seed(seed)
            temperature = 1.0 if generation.temperature is None else generation.temperature
            top_p = 1.0 if generation.top_p is None else generation.top_p
            prompt = list(generation.prompt_ids)
            llama = self._llama
            # llama-cpp-python reuses the cache up to `n_tokens`; it frees the rest itself.
            cached = llama.input_ids[: llama.n_tokens]
            llama.n_tokens = reusable(cached, self._prefilled, prompt, llama.n_batch)
            self._prefilled = len(prompt)
            tokens = llama.generate(
                prompt,
                temp=temperature,
                top_p=top_p,
                top_k=0,
                min_p=0.0,
                repeat_penalty=1.0,
                logits_processor=processors or None,  # type: ignore[arg-type]
            )
            for produced, token in enumerate(tokens, start=1):
                if cancel.is_set():
                    return
                logprobs = None if scores is None else [scores.of(token)]
                if token in self._stop_ids:
                    emit(Delta([token], "stop", logprobs=logprobs))
                    return
                if constraint is not None and not constraint.accept(token):
                    emit(EngineError(f"the grammar rejected sampled token {token}", status=500))
                    return
                if produced >= budget:
                    emit(Delta([token], "length", logprobs=logprobs))
                    return
                emit(Delta([token], logprobs=logprobs))
        except EngineError as exc:
            emit(exc)
        except Exception as exc:  # llama.cpp failures surface as assorted types
            emit(EngineError(f"llama.cpp failed: {exc}", status=500))

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
