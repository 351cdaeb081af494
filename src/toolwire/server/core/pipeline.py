"""One request, end to end: prompt -> structural tag -> engine -> parser -> events.

Data flow::

    ChatRequest --plan()--> Plan: prompt ids (rendered with isolation on), the
                                  structural tag (or None, with a fallback reason),
                                  the Generation the engine runs
    Plan --ChoiceRun.start()--> the engine accepted the request (its first delta came)
         --ChoiceRun.steps()--> engine deltas --checked--> Parser.feed() --> events
                                --StopMatcher--> events cut at a stop string
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
* What an engine returns is checked: every id an integer of the vocabulary, and no
  more ids than `max_tokens` (the excess is cut and the run ends with `length`).
* The engine stream is always closed (the generation stops) when the run ends,
  whether by completion, stop string, error, timeout or the client going away; the
  run's tokens are counted once, however it ended.
* A request that declares no tools parses with `tools=[]`: no call can be returned.
* Errors name the neutral request's fields (`messages`, `tools`, `response_format`);
  each API's field table renames them to its own.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolwire.backends.base import Delta, Engine, EngineError, Generation
from toolwire.backends.grammar_backend import request_grammar
from toolwire.errors import PromptError, ToolwireError
from toolwire.events import Event, ToolCallBegin
from toolwire.grammar.output import output_tag
from toolwire.grammar.policy import loosen
from toolwire.parser import Parser
from toolwire.prompt import Prompt, render_prompt
from toolwire.server.core.errors import ApiError, failure
from toolwire.server.core.metrics import Metrics
from toolwire.server.core.request import ChatRequest
from toolwire.server.core.stops import StopMatcher
from toolwire.server.core.watch import CallWatch

__all__ = ["ChoiceRun", "Limits", "Plan", "Step", "finish_reason", "plan", "warm_up"]

log = logging.getLogger("toolwire.server")


@dataclass(frozen=True)
class Limits:
    """Server-wide limits applied to every request."""

    #: max_tokens when the request gives none.
    default_max_tokens: int = 512
    #: Seconds one request may take, first byte to last (None: no limit).
    timeout: float | None = 600.0
    #: Stream argument fragments as they come instead of holding calls until complete.
    stream_tool_arguments: bool = False
    #: Largest request body accepted, in bytes (larger: 413).
    max_body_bytes: int = 8 * 1024 * 1024
    #: Most tools one request may declare.
    max_tools: int = 128
    #: Deepest JSON nesting accepted anywhere in a request body.
    max_nesting: int = 64


@dataclass(frozen=True)
class Plan:
    """What one request runs."""

    request: ChatRequest
    generation: Generation
    in_reasoning: bool
    #: The fallback code when the structural tag was weakened or dropped, else ''.
    grammar_fallback: str = ""
    #: Why the tag is what it is (schema normalizations, fallbacks).
    grammar_reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """Events from one engine delta; the last step carries the finish reason, or the
    error that ended the run (then `finish_reason` is None)."""

    events: list[Event] = field(default_factory=list)
    #: "stop", "length" or "tool_calls" on the last step of a completed run.
    finish_reason: str | None = None
    #: Why the run ended early; each API formats it in its own error shape.
    error: ApiError | None = None


def finish_reason(engine_reason: str | None, *, calls: int, stopped: bool) -> str:
    """Why the output ended, in OpenAI's words (each API maps them to its own):
    'length' when cut, 'tool_calls' when calls were made, else 'stop'."""
    if engine_reason == "length" and not stopped:
        return "length"
    return "tool_calls" if calls else "stop"


def _render(engine: Engine, request: ChatRequest) -> Prompt:
    try:
        return render_prompt(
            request.messages,
            engine.tokenizer,
            tools=request.tools,
            format=engine.format,
            template=engine.template,
            add_generation_prompt=True,
            isolate=True,
            template_kwargs=request.template_kwargs or None,
            max_prompt_tokens=engine.max_prompt_tokens,
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
    engine: Engine, request: ChatRequest, in_reasoning: bool
) -> Callable[[], dict[str, Any] | None]:
    """The tag to send when the engine rejects the planned one: for required/named, the
    native envelope with any JSON object as arguments (every tool `strict: false`); for
    `auto`, none (the grammar's documented fallbacks, applied by the engine)."""

    def relaxed() -> dict[str, Any] | None:
        if request.tool_choice in (None, "auto") or not request.tools:
            return None
        return request_grammar(
            engine,
            engine.format,
            loosen(request.tools),
            tool_choice=request.tool_choice,
            parallel_tool_calls=request.parallel_tool_calls,
            tokenizer=engine.tokenizer,
            in_reasoning=in_reasoning,
        ).tag

    return relaxed


def _structural_tag(
    engine: Engine, request: ChatRequest, in_reasoning: bool
) -> tuple[dict[str, Any] | None, str, tuple[str, ...]]:
    """The tag for this request, a fallback code ('' when none) and the reasons."""
    if request.response_format is not None:
        return _output_tag(engine, request.response_format, in_reasoning)
    if not engine.constrains or not request.tools or request.tool_choice == "none":
        return None, "", ()
    try:
        result = request_grammar(
            engine,
            engine.format,
            request.tools,
            tool_choice=request.tool_choice,
            parallel_tool_calls=request.parallel_tool_calls,
            tokenizer=engine.tokenizer,
            in_reasoning=in_reasoning,
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
    if request.model != engine.model:
        raise ApiError(
            404,
            f"The model {request.model!r} does not exist; this server serves {engine.model!r}",
            param="model",
            code="model_not_found",
        )
    if request.response_format is not None and request.tools and request.tool_choice != "none":
        raise ApiError(
            400,
            "response_format cannot be combined with tools (unless tool_choice is 'none')",
            param="response_format",
        )
    prompt = _render(engine, request)
    in_reasoning = bool(prompt.in_reasoning)
    tag, fallback, reasons = _structural_tag(engine, request, in_reasoning)
    generation = Generation(
        prompt_ids=list(prompt.ids),
        max_tokens=request.max_tokens or limits.default_max_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        structural_tag=tag,
        fallback_tag=(
            _relaxed_tag(engine, request, in_reasoning)
            if tag is not None and request.response_format is None
            else None
        ),
    )
    return Plan(request, generation, in_reasoning, fallback, reasons)


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


def warm_up(engine: Engine) -> None:
    """Plan one tool request, so the first client does not pay for grammar setup."""
    request = ChatRequest(
        model=engine.model,
        messages=[{"role": "user", "content": "hi"}],
        tools=[WARM_UP_TOOL],
        tool_choice="required",
    )
    planned = plan(engine, request, Limits())
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
    choice = plan.request.tool_choice
    return plan.generation.structural_tag is not None and (
        choice == "required" or isinstance(choice, Mapping)
    )


class ChoiceRun:
    """Runs one choice of a planned request and counts what it produced."""

    def __init__(self, engine: Engine, plan: Plan, limits: Limits, metrics: Metrics) -> None:
        request = plan.request
        self._engine = engine
        self._plan = plan
        self._limits = limits
        self._metrics = metrics
        try:
            self._parser = Parser(
                engine.format,
                engine.tokenizer,
                # no tools declared: none may be called (None would accept any name)
                tools=request.tools or [],
                tool_choice=request.tool_choice,
                parallel_tool_calls=request.parallel_tool_calls,
                in_reasoning=plan.in_reasoning,
                stream_arguments=limits.stream_tool_arguments,
                call_id=_call_ids(),
            )
        except ToolwireError as exc:
            raise ApiError(400, str(exc), param="tools") from exc
        self._stops = StopMatcher([] if _forced(plan) else request.stop)
        self._watch = CallWatch(self._parser, enabled=request.tool_choice != "none")
        self._vocab = engine.tokenizer.vocab_size
        self._budget = plan.generation.max_tokens
        self.prompt_tokens = len(plan.generation.prompt_ids)
        self.completion_tokens = 0
        self.calls = 0
        self.finish_reason: str | None = None
        self._stream: AsyncIterator[Delta] | None = None
        self._first: Delta | None = None
        self._started = 0.0
        self._deadline: float | None = None
        self._last: float | None = None
        self._ended = False
        self._accounted = False

    @property
    def stop_string(self) -> str | None:
        """The stop string that ended the output, if one did."""
        return self._stops.matched

    # -- the engine side ---------------------------------------------------------

    async def start(self) -> None:
        """Send the request and wait for the engine's first delta (or its end).

        Raises `ApiError` (502 engine failure, 504 stall, ...) when the engine does not
        accept the request; the run is then closed and counted.
        """
        self._started = time.perf_counter()
        timeout = self._limits.timeout
        self._deadline = None if timeout is None else self._started + timeout
        self._stream = self._engine.stream(self._plan.generation)
        try:
            self._first = await self._next()
        except Exception as exc:
            self._ended = True  # refused, not abandoned
            await self.aclose()
            raise failure(exc) from exc
        except BaseException:  # cancelled: the client went away
            await self.aclose()
            raise

    async def _next(self) -> Delta | None:
        assert self._stream is not None
        try:
            if self._deadline is None:
                delta = await anext(self._stream)
            else:
                remaining = self._deadline - time.perf_counter()
                if remaining <= 0:
                    raise TimeoutError
                async with asyncio.timeout(remaining):  # in this task: no task per delta
                    delta = await anext(self._stream)
        except StopAsyncIteration:
            return None
        except TimeoutError:
            raise ApiError(
                504,
                f"the request took longer than {self._limits.timeout:g} s",
                type="timeout",
                code="timeout",
            ) from None
        return self._checked(delta)

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
            if low < 0 or high >= self._vocab:
                bad = low if low < 0 else high
                raise EngineError(
                    f"the engine returned token id {bad}, outside the vocabulary "
                    f"(0..{self._vocab - 1})"
                )
        if delta.finish_reason not in (None, "stop", "length"):
            raise EngineError(f"the engine returned finish reason {delta.finish_reason!r}")
        left = self._budget - self.completion_tokens
        if len(ids) > left:  # the engine went past max_tokens: cut, and end there
            return Delta(ids[:left], "length")
        return delta

    # -- the parser side ---------------------------------------------------------

    def _events(self, events: list[Event]) -> list[Event]:
        out = self._stops.feed(events)
        self.calls += sum(isinstance(e, ToolCallBegin) for e in out)
        return out

    def _release(self, reason: str) -> list[Event]:
        """End of output: what the parser held, through the stop strings. `reason` tells
        the parser why the output ended ("stop", or "length" for anything that cut it
        off): a call whose body never ended is returned only after a stop."""
        if self._ended:
            return []
        self._ended = True
        events = self._parser.finish(reason) if not self._stops.stopped else []
        out = self._events(events)
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
        self.completion_tokens += len(delta.ids)
        events = self._events(self._parser.feed(delta.ids))
        if delta.finish_reason is not None or self._stops.stopped:
            events += self._close(delta.finish_reason)
            return Step(events, self.finish_reason)
        return Step(events) if events else None

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
        stream, self._stream = self._stream, None
        try:
            if stream is not None:
                await stream.aclose()  # type: ignore[attr-defined]
        finally:
            self._account()
