"""One request, end to end: prompt -> structural tag -> engine -> parser -> events.

Data flow::

    ChatRequest --offer()--> what the model is offered and may call (`offer`:
                             custom tools as functions, `allowed_tools`' subset)
                --plan()--> Plan: prompt ids (rendered with isolation on), the
                                  structural tag (or None, with a fallback reason),
                                  the Generation the engine runs
    Plan --ChoiceRun.start()--> the engine accepted the request (its first delta came)
         --ChoiceRun.steps()--> engine deltas --checked--> Parser.feed() --> events
                                --StopMatcher--> events cut at a stop string
                                --ForcedOutput--> (forced turns) calls whole or cut,
                                                  no content (`forced`)
                                --> Step(events[, finish_reason | error])

This module is the stream boundary every API shares (`turn` runs it for each): API
modules only format steps.

Invariants:

* Handlers never parse: every event comes from one `Parser` per choice, fed the
  engine's ids exactly as they arrive (non-streaming is the same run, collected).
* `start()` raises (`ApiError` with a status) when the engine refuses, fails or stalls
  before its first delta: nothing was sent yet, so the client gets a plain status.
* After `start()`, `steps()` never raises (but for cancellation): any failure, whether
  engine, timeout, bad upstream data or a bug, ends the run with a last `Step` whose
  `error` is set, after the events `finish()` released from what the parser held.
* What an engine returns is checked: every id an integer of the model's vocabulary
  (`Engine.vocab_size`, the rows of its output layer), and no more ids than
  `max_tokens` (the excess is cut and the run ends with `length`). Ids past the
  tokenizer's vocabulary but within the model's (the layer's padding rows, which a
  sampler can pick) are empty text: counted, and not fed to the parser; only ids
  past the model's are an engine error.
* Progress means tokens: past `Limits.token_timeout` without a new id (however busy
  the engine keeps the connection: SSE comments, events without ids), the run ends
  with a 504, as past the request's own `timeout`.
* The engine stream is always closed (the generation stops) when the run ends,
  whether by completion, stop string, error, timeout or the client going away; the
  run's tokens are counted once, however it ended.
* A request that declares no tools parses with `tools=[]`: no call can be returned.
* A turn in which no further call may come once one was made (parallel calls off,
  or a named tool under the grammar) ends at that call's end: the engine is stopped
  there, without waiting for the model to end its turn, and the run's finish reason
  is a completed call's (`tool_calls`), even when the token budget ran out with it.
  The ids counted are those up to the call's end, however the engine batched them.
* A forced turn (`required` or named, the tag applied) returns calls and reasoning
  only: a call cut off is a cut call (`ToolCallEnd(valid=False)`), never content
  (`forced`).
* The prompt fits the model: at most its context less one id (the context is the
  GGUF's training context, or the upstream's `max_model_len`), or
  `--max-prompt-tokens`; past it, a 400 naming the messages (each API's own field).
  The output budget is what the request asked, cut to the context the prompt leaves
  (a client asking for 128000 tokens of an 8192-token model gets what fits, and
  `length` when it runs out), never a refusal.
* Errors name the neutral request's fields (`messages`, `tools`, `response_format`);
  each API's field table renames them to its own.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any, Protocol

from toolwire.backends.base import Delta, Engine, EngineError, Generation, TokenLogprob
from toolwire.backends.grammar_backend import request_grammar
from toolwire.errors import PromptError, ToolwireError
from toolwire.events import Event, ToolCallBegin, ToolCallEnd
from toolwire.grammar.output import output_tag
from toolwire.grammar.policy import GrammarPolicy, loosen
from toolwire.parser import Parser
from toolwire.prompt import Prompt, render_prompt
from toolwire.server.core.errors import ApiError, failure
from toolwire.server.core.forced import ForcedOutput
from toolwire.server.core.history import continuable
from toolwire.server.core.metrics import Metrics
from toolwire.server.core.offer import Offer, offer
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.stops import StopMatcher
from toolwire.server.core.tracing import span
from toolwire.server.core.watch import CallWatch

__all__ = [
    "ChoiceRun",
    "Chosen",
    "Limits",
    "Plan",
    "Run",
    "Step",
    "finish_reason",
    "plan",
    "prompt_limit",
    "serves",
    "warm_up",
]

log = logging.getLogger("toolwire.server")


@dataclass(frozen=True)
class Limits:
    """Server-wide limits applied to every request."""

    #: max_tokens when the request gives none.
    default_max_tokens: int = 512
    #: Seconds one request may take, first byte to last (None: no limit).
    timeout: float | None = 600.0
    #: Seconds the engine may go without producing a token (None: no limit).
    token_timeout: float | None = None
    #: Stream argument fragments as they come instead of holding calls until complete.
    stream_tool_arguments: bool = False
    #: Largest request body accepted, in bytes (larger: 413).
    max_body_bytes: int = 8 * 1024 * 1024
    #: Most tools one request may declare.
    max_tools: int = 128
    #: Deepest JSON nesting accepted anywhere in a request body.
    max_nesting: int = 64
    #: Largest client-supplied field an answer echoes (Responses' `instructions`,
    #: `tools`, `text`...), as JSON bytes.
    max_echo_bytes: int = 512 * 1024
    #: The operator's guidance policy: when requests get a structural tag, and how.
    guidance: GrammarPolicy = field(default_factory=GrammarPolicy)
    #: Declared hosted tools (web search, MCP...): "drop" (not offered, said in a
    #: header and a metric) or "refuse" (a 400 naming the tool).
    hosted_tools: str = "drop"
    #: More model names a request may send for the engine's model: names, or
    #: `fnmatch` patterns (`claude-*`, `*`).
    model_aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    """What one request runs."""

    request: ChatRequest
    generation: Generation
    in_reasoning: bool
    #: What the model is offered and may call (`offer`).
    offer: Offer
    #: The fallback code when the structural tag was weakened or dropped, else ''.
    grammar_fallback: str = ""
    #: Why the tag is what it is (schema normalizations, fallbacks).
    grammar_reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chosen:
    """A returned token: its text (the id's, as the parser read it), its log
    probability, and the most likely alternatives (text, log probability), best first."""

    text: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Step:
    """Events from one engine delta; the last step carries the finish reason, or the
    error that ended the run (then `finish_reason` is None)."""

    events: list[Event] = field(default_factory=list)
    #: "stop", "length" or "tool_calls" on the last step of a completed run.
    finish_reason: str | None = None
    #: Why the run ended early; each API formats it in its own error shape.
    error: ApiError | None = None
    #: The log probabilities of the ids this step fed the parser (when asked), but
    #: special tokens, which never reach the answer.
    logprobs: list[Chosen] = field(default_factory=list)
    #: The choice this step belongs to (Chat Completions' `n`).
    choice: int = 0


class Run(Protocol):
    """What a framer reads of a running request: one `ChoiceRun`, or the `Choices` of
    an `n` > 1 request (`core/choices.py`)."""

    # the finish reason, the stop string that ended it, and the log probabilities are
    # the first choice's, for `Choices`

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...

    @property
    def finish_reason(self) -> str | None: ...

    @property
    def parse_seconds(self) -> float: ...

    @property
    def logprobs(self) -> list[Chosen]: ...

    @property
    def custom(self) -> frozenset[str]: ...

    @property
    def stop_string(self) -> str | None: ...

    async def start(self) -> None: ...

    def steps(self) -> AsyncIterator[Step]: ...

    async def collect(self) -> list[Event]: ...

    async def aclose(self) -> None: ...


def finish_reason(engine_reason: str | None, *, calls: int, stopped: bool) -> str:
    """Why the output ended, in OpenAI's words (each API maps them to its own):
    'length' when cut, 'tool_calls' when calls were made, else 'stop'."""
    if engine_reason == "length" and not stopped:
        return "length"
    return "tool_calls" if calls else "stop"


def serves(engine: Engine, limits: Limits, model: str) -> bool:
    """Whether `model` names the engine's model (its name, or an alias or pattern)."""
    return model == engine.model or any(fnmatchcase(model, p) for p in limits.model_aliases)


def prompt_limit(engine: Engine) -> tuple[int | None, str]:
    """The most prompt ids the engine takes, and where that bound comes from: the
    model's context less one id for the answer, or `--max-prompt-tokens` if lower."""
    bounds: list[tuple[int, str]] = []
    if engine.context_length is not None:
        bounds.append(
            (
                engine.context_length - 1,
                f"the model's context of {engine.context_length} tokens, less one for the answer",
            )
        )
    if engine.max_prompt_tokens is not None:
        bounds.append((engine.max_prompt_tokens, "--max-prompt-tokens"))
    if not bounds:
        return None, ""
    return min(bounds)


def _sized(engine: Engine, prompt: Prompt, asked: int) -> int:
    """The output budget: what was asked, within the context the prompt leaves; a
    prompt past the engine's bound is a 400 naming the messages."""
    limit, why = prompt_limit(engine)
    if limit is not None and len(prompt.ids) > limit:
        raise ApiError(
            400,
            f"the prompt is {len(prompt.ids)} tokens, more than this server takes ({limit}: {why})",
            param="messages",
            code="context_length_exceeded",
        )
    if engine.context_length is None:
        return asked
    return max(1, min(asked, engine.context_length - len(prompt.ids)))


def _render(engine: Engine, request: ChatRequest, offered: Offer) -> Prompt:
    try:
        return render_prompt(
            continuable(offered.messages),
            engine.tokenizer,
            tools=offered.prompt_tools or None,
            format=engine.format,
            template=engine.template,
            add_generation_prompt=True,
            isolate=True,
            template_kwargs=request.template_kwargs or None,
        )
    except PromptError as exc:
        raise ApiError(
            400, f"the prompt cannot be rendered safely: {exc}", param="messages"
        ) from exc
    except ToolwireError as exc:
        raise ApiError(400, str(exc), param="messages") from exc


#: Fallback codes of `structural_tag_with_reason` that mean a constraint was lost or
#: weakened (the others say no constraint was wanted: no tools, scope, disabled).
_FALLBACKS = frozenset(
    {"relaxed", "compile_failed", "unsupported_format", "unknown_format", "unsupported_backend"}
)


def _relaxed_tag(
    engine: Engine, offered: Offer, parallel: bool, in_reasoning: bool, policy: GrammarPolicy
) -> Callable[[], dict[str, Any] | None]:
    """The tag to send when the engine rejects the planned one: for required/named, the
    native envelope with any JSON object as arguments (every tool `strict: false`); for
    `auto`, none (the grammar's documented fallbacks, applied by the engine)."""

    def relaxed() -> dict[str, Any] | None:
        if offered.tool_choice in (None, "auto") or not offered.call_tools:
            return None
        return request_grammar(
            engine,
            engine.format,
            loosen(offered.call_tools),
            tool_choice=offered.tool_choice,
            parallel_tool_calls=parallel,
            tokenizer=engine.tokenizer,
            in_reasoning=in_reasoning,
            policy=policy,
        ).tag

    return relaxed


def _structural_tag(
    engine: Engine,
    request: ChatRequest,
    offered: Offer,
    in_reasoning: bool,
    policy: GrammarPolicy,
) -> tuple[dict[str, Any] | None, str, tuple[str, ...]]:
    """The tag for this request, a fallback code ('' when none) and the reasons."""
    if request.response_format is not None:
        if not policy.enabled:
            raise ApiError(
                400,
                "response_format cannot be enforced: this server runs with guidance off",
                param="response_format",
            )
        return _output_tag(engine, request.response_format, in_reasoning)
    if not engine.constrains or not offered.call_tools or offered.tool_choice == "none":
        return None, "", ()
    try:
        result = request_grammar(
            engine,
            engine.format,
            offered.call_tools,
            tool_choice=offered.tool_choice,
            parallel_tool_calls=request.parallel_tool_calls,
            tokenizer=engine.tokenizer,
            in_reasoning=in_reasoning,
            policy=policy,
        )
    except ToolwireError as exc:
        raise ApiError(400, str(exc), param="tools") from exc
    code = result.fallback if result.fallback in _FALLBACKS else ""
    return result.tag, str(code or ""), tuple(result.reasons)


def _output_tag(
    engine: Engine, schema: Mapping[str, Any], in_reasoning: bool
) -> tuple[dict[str, Any] | None, str, tuple[str, ...]]:
    """`response_format`: a tag that keeps the answer to the schema, or a 400."""
    if not engine.constrains:
        raise ApiError(
            400,
            "response_format needs a constraining engine (this one applies no grammar)",
            param="response_format",
        )
    result = output_tag(
        engine.format, schema, tokenizer=engine.tokenizer, in_reasoning=in_reasoning
    )
    if result.tag is None:
        raise ApiError(400, "; ".join(result.reasons), param="response_format")
    return result.tag, str(result.fallback or ""), tuple(result.reasons)


def plan(engine: Engine, request: ChatRequest, limits: Limits) -> Plan:
    """Render, constrain and size one request; raises `ApiError` for a bad one.

    Blocking (template rendering, tokenization, grammar checks): servers run it off
    the event loop.
    """
    if not serves(engine, limits, request.model):
        also = "".join(f", {a!r}" for a in limits.model_aliases)
        raise ApiError(
            404,
            f"The model {request.model!r} does not exist; this server serves "
            f"{engine.model!r}{also} (--served-model-name)",
            param="model",
            code="model_not_found",
        )
    if request.top_logprobs is not None and not engine.logprobs:
        raise ApiError(
            400,
            "logprobs are not available on this engine (the embedded engine and vLLM return them)",
            param="logprobs",
        )
    if request.response_format is not None and request.tools and request.tool_choice != "none":
        raise ApiError(
            400,
            "response_format cannot be combined with tools (unless tool_choice is 'none')",
            param="response_format",
        )
    offered = offer(request)
    with span("render"):
        prompt = _render(engine, request, offered)
    in_reasoning = bool(prompt.in_reasoning)
    with span("grammar", stage="build"):
        tag, fallback, reasons = _structural_tag(
            engine, request, offered, in_reasoning, limits.guidance
        )
    generation = Generation(
        prompt_ids=list(prompt.ids),
        max_tokens=_sized(engine, prompt, request.max_tokens or limits.default_max_tokens),
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        structural_tag=tag,
        logprobs=request.top_logprobs,
        fallback_tag=(
            _relaxed_tag(
                engine, offered, request.parallel_tool_calls, in_reasoning, limits.guidance
            )
            if tag is not None and request.response_format is None
            else None
        ),
    )
    return Plan(request, generation, in_reasoning, offered, fallback, reasons)


#: The warm-up request's tool: complete as strict templates require (gpt-oss's reads
#: `description`), so every format starts.
WARM_UP_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "the city"}},
            "required": ["city"],
        },
    },
}


def warm_up(engine: Engine, limits: Limits | None = None) -> None:
    """Plan one tool request, so the first client does not pay for grammar setup."""
    request = ChatRequest(
        model=engine.model,
        messages=[{"role": "user", "content": "hi"}],
        tools=[WARM_UP_TOOL],
        tool_choice="required",
    )
    planned = plan(engine, request, limits or Limits())
    warm = getattr(engine, "warm_up", None)
    if callable(warm):
        warm(planned.generation)


def _call_ids() -> Callable[[int], str]:
    """Unique ids per call index (`call_` and 24 hex digits), stable within a choice."""
    minted: dict[int, str] = {}

    def call_id(index: int) -> str:
        if index not in minted:
            minted[index] = f"call_{secrets.token_hex(12)}"
        return minted[index]

    return call_id


def _forced(plan: Plan) -> bool:
    """The grammar forces the output to be calls (no content a stop string could end)."""
    choice = plan.offer.tool_choice
    return plan.generation.structural_tag is not None and (
        choice == "required" or isinstance(choice, Mapping)
    )


def _one_call(plan: Plan) -> bool:
    """No call may follow a call: parallel calls are off, or the grammar allows one
    call only (a named tool)."""
    named = isinstance(plan.offer.tool_choice, Mapping) and _forced(plan)
    return not plan.request.parallel_tool_calls or named


class ChoiceRun:
    """Runs one choice of a planned request and counts what it produced."""

    def __init__(self, engine: Engine, plan: Plan, limits: Limits, metrics: Metrics) -> None:
        request = plan.request
        self._engine = engine
        self._plan = plan
        self._limits = limits
        self._metrics = metrics
        forced = _forced(plan)
        try:
            self._parser = Parser(
                engine.format,
                engine.tokenizer,
                # no tools declared: none may be called (None would accept any name)
                tools=plan.offer.call_tools,
                tool_choice=plan.offer.tool_choice,
                parallel_tool_calls=request.parallel_tool_calls,
                in_reasoning=plan.in_reasoning,
                # a forced turn knows a call from its name on, so a cut one stays a call
                stream_arguments=limits.stream_tool_arguments or forced,
                call_id=_call_ids(),
            )
        except ToolwireError as exc:
            raise ApiError(400, str(exc), param="tools") from exc
        self._stops = StopMatcher([] if forced else request.stop)
        self._forced = ForcedOutput(hold=not limits.stream_tool_arguments) if forced else None
        self._one_call = _one_call(plan)
        self._at_call_end = False  # the one call ended: the output ends there
        self._watch = CallWatch(self._parser, enabled=plan.offer.tool_choice != "none")
        self._vocab = engine.tokenizer.vocab_size
        self._rows = max(self._vocab, engine.vocab_size)
        self._budget = plan.generation.max_tokens
        self.prompt_tokens = len(plan.generation.prompt_ids)
        self.completion_tokens = 0
        self.calls = 0
        #: The custom tools' names (their calls are returned as custom calls).
        self.custom = plan.offer.custom
        #: Seconds spent in the parser and the stop strings (the trace's `parse`).
        self.parse_seconds = 0.0
        self.finish_reason: str | None = None
        #: Every step's log probabilities so far (when asked).
        self.logprobs: list[Chosen] = []
        self._stream: AsyncIterator[Delta] | None = None
        self._first: Delta | None = None
        self._started = 0.0
        self._deadline: asyncio.TimerHandle | None = None  # the whole run's
        self._idle: asyncio.TimerHandle | None = None  # the token timeout's
        self._progress = 0.0  # when the engine last produced a token (the loop's clock)
        self._expired: str | None = None  # "run" or "idle", once a timer fired
        self._waiter: asyncio.Task[Any] | None = None
        self._idle_loop: asyncio.AbstractEventLoop  # (set by start)
        self._last: float | None = None
        self._ended = False
        self._accounted = False

    @property
    def stop_string(self) -> str | None:
        """The stop string that ended the output, if one did."""
        return self._stops.matched

    # -- the engine side ---------------------------------------------------------

    async def start(self) -> None:
        """Send the request and wait for the engine's first token (or its end).

        Raises `ApiError` (502 engine failure, 504 stall, ...) when the engine does not
        accept the request; the run is then closed and counted. Deltas without ids
        before the first token are no answer yet (a grammar fallback they report is
        kept for the first one).
        """
        self._started = time.perf_counter()
        timeout, idle = self._limits.timeout, self._limits.token_timeout
        loop = self._idle_loop = asyncio.get_running_loop()
        if timeout is not None:  # one timer for the whole run, not one per delta
            self._deadline = loop.call_later(timeout, self._expire, "run")
        if idle is not None:  # re-armed only when it fires after progress
            self._progress = loop.time()
            self._idle = loop.call_later(idle, self._check_idle, idle)
        self._stream = self._engine.stream(self._plan.generation)
        try:
            first = await self._next()
            while first is not None and not first.ids and first.finish_reason is None:
                fallback = first.grammar_fallback
                first = await self._next()
                if fallback and first is not None and not first.grammar_fallback:
                    first = replace(first, grammar_fallback=fallback)
            self._first = first
        except Exception as exc:
            self._ended = True  # refused, not abandoned
            await self.aclose()
            raise failure(exc) from exc
        except BaseException:  # cancelled: the client went away
            await self.aclose()
            raise

    def _expire(self, which: str) -> None:
        """A timer passed: a wait for the engine ends now (the task waiting is
        cancelled, as `asyncio.timeout` does), and no later one starts."""
        self._expired = self._expired or which
        if self._waiter is not None:
            self._waiter.cancel()

    def _check_idle(self, idle: float) -> None:
        """The token timeout's timer: expired when no id came for `idle` seconds, else
        set again for `idle` after the last one (however busy the connection was)."""
        due = self._progress + idle - self._idle_loop.time()
        if due <= 0:
            self._expire("idle")
        else:
            self._idle = self._idle_loop.call_later(due, self._check_idle, idle)

    def _timed_out(self) -> ApiError:
        if self._expired == "idle":
            message = f"the engine produced no token for {self._limits.token_timeout:g} s"
        else:
            message = f"the request took longer than {self._limits.timeout:g} s"
        return ApiError(504, message, type="timeout", code="timeout")

    async def _next(self) -> Delta | None:
        assert self._stream is not None
        if self._expired:
            raise self._timed_out()
        task = self._waiter = asyncio.current_task()
        try:
            delta = await anext(self._stream)
        except StopAsyncIteration:
            return None
        except asyncio.CancelledError:
            # a timer's cancel, unless the task was cancelled for another reason too
            if self._expired and task is not None and task.uncancel() == 0:
                raise self._timed_out() from None
            raise
        finally:
            self._waiter = None
        checked = self._checked(delta)
        if checked.ids and self._idle is not None:
            self._progress = self._idle_loop.time()
        return checked

    def _checked(self, delta: Any) -> Delta:
        """The delta, if its ids are ids of this vocabulary; cut to the token budget."""
        if not isinstance(delta, Delta) or not isinstance(delta.ids, list):
            raise EngineError(f"the engine returned {type(delta).__name__}, not token ids")
        ids = delta.ids
        if ids:
            if not all(type(i) is int for i in ids):
                bad = next(i for i in ids if type(i) is not int)
                raise EngineError(f"the engine returned a token id that is not an integer: {bad!r}")
            low, high = min(ids), max(ids)
            if low < 0 or high >= self._rows:
                bad = low if low < 0 else high
                raise EngineError(
                    f"the engine returned token id {bad}, outside the model's vocabulary "
                    f"(0..{self._rows - 1})"
                )
        if delta.finish_reason not in (None, "stop", "length"):
            raise EngineError(f"the engine returned finish reason {delta.finish_reason!r}")
        if self._plan.generation.logprobs is not None and (
            delta.logprobs is None or len(delta.logprobs) != len(ids)
        ):
            raise EngineError("the engine returned no log probability for some ids")
        left = self._budget - self.completion_tokens
        if len(ids) > left:  # the engine went past max_tokens: cut, and end there
            cut = None if delta.logprobs is None else delta.logprobs[:left]
            return Delta(ids[:left], "length", logprobs=cut)
        return delta

    def _texts(self, ids: list[int]) -> list[int]:
        """The ids that have text: those past the tokenizer's vocabulary (the output
        layer's padding rows) are dropped, and counted."""
        if not ids or max(ids) < self._vocab:
            return ids
        kept = [i for i in ids if i < self._vocab]
        self._metrics.padding_ids.inc(len(ids) - len(kept))
        return kept

    # -- the parser side ---------------------------------------------------------

    def _events(self, events: list[Event]) -> list[Event]:
        out = self._stops.feed(events)
        if self._forced is not None:
            out = self._forced.feed(out)
        if self._one_call:
            end = next((n for n, e in enumerate(out) if isinstance(e, ToolCallEnd)), None)
            if end is not None:  # no call may follow: what the model wrote after is cut
                out = out[: end + 1]
                self._at_call_end = True
        self.calls += sum(isinstance(e, ToolCallBegin) for e in out)
        return out

    def _release(self, reason: str) -> list[Event]:
        """End of output: what the parser held, through the stop strings. `reason` tells
        the parser why the output ended ("stop", or "length" for anything that cut it
        off): a call whose body never ended is returned only after a stop."""
        if self._ended:
            return []
        self._ended = True
        done = self._stops.stopped or self._at_call_end
        out = self._events([] if done else self._parser.finish(reason))
        if self._forced is not None:
            out += self._forced.flush()
        out += self._stops.flush()
        return out

    def _close(self, engine_reason: str | None) -> list[Event]:
        """End of output: the parser's last events, and the finish reason."""
        stopped = self._stops.stopped  # a stop string matched before the end of output
        out = self._release("stop" if engine_reason == "stop" else "length")
        # out of tokens is "length", even if a stop string matched in what was released
        self.finish_reason = finish_reason(engine_reason, calls=self.calls, stopped=stopped)
        return out

    def _failed(self, exc: Exception) -> Step:
        """The last step of a run cut by `exc`: what the parser held, then the error."""
        self._metrics.stream_errors.inc()
        error = failure(exc)
        if error.status != 500:  # a 500 was logged with its traceback by failure()
            log.warning("run ended by an error: %s", error.message)
        try:
            events = self._release("length")  # the output was cut off
        except Exception as late:  # the parser itself failed: its state is lost
            log.error("releasing held output failed", exc_info=late)
            events = []
        return Step(events, None, error)

    def _account(self) -> None:
        if self._accounted:
            return
        self._accounted = True
        m = self._metrics
        m.prompt_tokens.inc(self.prompt_tokens)
        m.completion_tokens.inc(self.completion_tokens)
        if self._watch.echoes:
            m.echoed_delimiters.inc(self._watch.echoes)
        if self._watch.fallbacks:
            m.parse_fallbacks.inc(self._watch.fallbacks)
        if self.finish_reason is None and not self._ended:
            m.abandoned.inc()  # neither completed nor failed: the client went away

    async def steps(self) -> AsyncIterator[Step]:
        """Steps until the output ends (after `start()`); a failure is the last step."""
        try:
            first, self._first = self._first, None
            delta: Delta | None = first
            pending = True
            while True:
                try:
                    if not pending:
                        delta = await self._next()
                    pending = False
                    step = self._step(delta)
                except Exception as exc:
                    yield self._failed(exc)
                    return
                if step is not None:
                    yield step
                    if step.finish_reason is not None:
                        return
        finally:
            await self.aclose()

    def _step(self, delta: Delta | None) -> Step | None:
        if delta is None:
            return Step(self._close("stop"), self.finish_reason)
        if delta.grammar_fallback:
            self._metrics.grammar_fallbacks.labels(delta.grammar_fallback).inc()
        now = time.perf_counter()
        if delta.ids:
            if self._last is None:
                self._metrics.ttft.observe(now - self._started)
            else:
                self._metrics.itl.observe(now - self._last)
            self._last = now
        events, used = self._fed(delta.ids)
        self.completion_tokens += used
        logprobs = self._chosen((delta.logprobs or ())[:used])
        self.logprobs += logprobs
        if self._at_call_end:  # the call is complete, whatever else this delta said
            events += self._close("stop")
            self.parse_seconds += time.perf_counter() - now
            return Step(events, self.finish_reason, logprobs=logprobs)
        if delta.finish_reason is not None or self._stops.stopped:
            events += self._close(delta.finish_reason)
            self.parse_seconds += time.perf_counter() - now
            return Step(events, self.finish_reason, logprobs=logprobs)
        self.parse_seconds += time.perf_counter() - now
        return Step(events, logprobs=logprobs) if events or logprobs else None

    def _fed(self, ids: list[int]) -> tuple[list[Event], int]:
        """The events of `ids`, and how many of them the output used: all, unless the
        one call ended among them (the engine's batch went on past the call's end: the
        ids after it are neither parsed nor counted). Such a batch is fed id by id, so
        the call ends at the same id however the stream was batched."""
        if not self._one_call or len(ids) < 2:
            return self._events(self._parser.feed(self._texts(ids))), len(ids)
        events: list[Event] = []
        for n, i in enumerate(ids):
            events += self._events(self._parser.feed(self._texts([i])))
            if self._at_call_end:
                return events, n + 1
        return events, len(ids)

    def _chosen(self, entries: Iterable[TokenLogprob]) -> list[Chosen]:
        """Entries with each id's text; special tokens (never in an answer) left out."""
        tok = self._engine.tokenizer
        return [
            Chosen(tok.token_text(e.id), e.logprob, tuple((tok.token_text(i), p) for i, p in e.top))
            for e in entries
            if e.id not in tok.special_ids
        ]

    async def collect(self) -> list[Event]:
        """The whole run's events (after `start()`); raises the error that ended it."""
        events: list[Event] = []
        async for step in self.steps():
            events += step.events
            if step.error is not None:
                raise step.error
        return events

    async def aclose(self) -> None:
        """Stop the generation and count the run (idempotent)."""
        for timer in (self._deadline, self._idle):
            if timer is not None:
                timer.cancel()
        stream, self._stream = self._stream, None
        try:
            if stream is not None:
                await stream.aclose()  # type: ignore[attr-defined]
        finally:
            self._account()
