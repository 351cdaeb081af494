"""One request, end to end: prompt -> structural tag -> engine -> parser -> events.

Data flow::

    ChatRequest --plan()--> Plan: prompt ids (rendered with isolation on), the
                                  structural tag (or None, with a fallback reason),
                                  the Generation the engine runs
    Plan --ChoiceRun.steps()--> engine deltas --Parser.feed()--> events
                                --StopMatcher--> events cut at a stop string
                                --> Step(events[, finish_reason])

Invariants:

* Handlers never parse: every event comes from one `Parser` per choice, fed the
  engine's ids exactly as they arrive (non-streaming is the same run, collected).
* Nothing the model produced is lost: when the engine fails or the request times out
  mid-stream, `finish()` releases what the parser holds before the error is raised.
* The engine stream is always closed (the generation stops) when the run ends,
  whether by completion, stop string, error, timeout or the client going away.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from toolwire.backends.base import Delta, Engine, EngineError, Generation
from toolwire.errors import PromptError, UsageError
from toolwire.events import Event, ToolCallBegin
from toolwire.formats import get as get_format
from toolwire.grammar import structural_tag_with_reason
from toolwire.parser import Parser
from toolwire.prompt import Prompt, render_prompt
from toolwire.server.chunks import finish_reason
from toolwire.server.errors import ApiError
from toolwire.server.metrics import Metrics
from toolwire.server.request import ChatRequest
from toolwire.server.stops import StopMatcher
from toolwire.server.watch import CallWatch

__all__ = ["ChoiceRun", "Limits", "Plan", "Step", "plan", "warm_up"]


@dataclass(frozen=True)
class Limits:
    """Server-wide limits applied to every request."""

    #: max_tokens when the request gives none.
    default_max_tokens: int = 512
    #: Seconds one request may take, first byte to last (None: no limit).
    timeout: float | None = 600.0
    #: Stream argument fragments as they come instead of holding calls until complete.
    stream_tool_arguments: bool = False


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
    """Events from one engine delta; the last step carries the finish reason."""

    events: list[Event] = field(default_factory=list)
    finish_reason: str | None = None


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
    except UsageError as exc:
        raise ApiError(400, str(exc), param="messages") from exc


#: Fallback codes of `structural_tag_with_reason` that mean a constraint was lost or
#: weakened (the others say no constraint was wanted: no tools, scope, disabled).
_FALLBACKS = frozenset({"relaxed", "compile_failed", "unsupported_format", "unknown_format"})


def _structural_tag(
    engine: Engine, request: ChatRequest, in_reasoning: bool
) -> tuple[dict[str, Any] | None, str, tuple[str, ...]]:
    """The tag for this request, a fallback code ('' when none) and the reasons."""
    if not engine.constrains or not request.tools or request.tool_choice == "none":
        return None, "", ()
    result = structural_tag_with_reason(
        engine.format,
        request.tools,
        tool_choice=request.tool_choice,
        parallel_tool_calls=request.parallel_tool_calls,
        tokenizer=engine.tokenizer,
        in_reasoning=in_reasoning,
    )
    code = result.fallback if result.fallback in _FALLBACKS else ""
    return result.tag, str(code or ""), tuple(result.reasons)


def plan(engine: Engine, request: ChatRequest, limits: Limits) -> Plan:
    """Render, constrain and size one request; raises `ApiError` for a bad one."""
    if request.model != engine.model:
        raise ApiError(
            404,
            f"The model {request.model!r} does not exist; this server serves {engine.model!r}",
            param="model",
            code="model_not_found",
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
    )
    return Plan(request, generation, in_reasoning, fallback, reasons)


def warm_up(engine: Engine) -> None:
    """Plan one tool request, so the first client does not pay for grammar setup."""
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    request = ChatRequest(
        model=engine.model,
        messages=[{"role": "user", "content": "hi"}],
        tools=[tool],
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
                tools=request.tools,
                tool_choice=request.tool_choice,
                parallel_tool_calls=request.parallel_tool_calls,
                in_reasoning=plan.in_reasoning,
                stream_arguments=limits.stream_tool_arguments,
                call_id=_call_ids(),
            )
        except UsageError as exc:
            raise ApiError(400, str(exc), param="tools") from exc
        self._stops = StopMatcher(request.stop)
        opener = get_format(engine.format).call[0]
        opener_id = engine.tokenizer.token_id(opener) if self._parser.gated else None
        self._watch = CallWatch(opener, opener_id, enabled=request.tool_choice != "none")
        self.prompt_tokens = len(plan.generation.prompt_ids)
        self.completion_tokens = 0
        self.calls = 0
        self.finish_reason: str | None = None

    def _events(self, events: list[Event]) -> list[Event]:
        self._watch.events(events)
        out = self._stops.feed(events)
        self.calls += sum(isinstance(e, ToolCallBegin) for e in out)
        return out

    def _close(self, engine_reason: str | None) -> list[Event]:
        """End of output: the parser's last events, and the finish reason."""
        events = self._parser.finish() if not self._stops.stopped else []
        out = self._events(events)
        out += self._stops.flush()
        self.finish_reason = finish_reason(
            engine_reason, calls=self.calls, stopped=self._stops.stopped
        )
        m = self._metrics
        m.prompt_tokens.inc(self.prompt_tokens)
        m.completion_tokens.inc(self.completion_tokens)
        if self._watch.echoes:
            m.echoed_delimiters.inc(self._watch.echoes)
        if self._watch.fallbacks:
            m.parse_fallbacks.inc(self._watch.fallbacks)
        return out

    async def steps(self) -> AsyncIterator[Step]:
        """Steps until the output ends; raises EngineError or ApiError(504) mid-stream."""
        started = time.perf_counter()
        deadline = None if self._limits.timeout is None else started + self._limits.timeout
        last: float | None = None
        stream = self._engine.stream(self._plan.generation)
        try:
            while True:
                try:
                    delta = await self._next(stream, deadline)
                except (EngineError, ApiError):
                    self._metrics.stream_errors.inc()
                    yield Step(self._close(None))
                    raise
                if delta is None:
                    yield Step(self._close("stop"), self.finish_reason)
                    return
                now = time.perf_counter()
                if delta.ids:
                    if last is None:
                        self._metrics.ttft.observe(now - started)
                    else:
                        self._metrics.itl.observe(now - last)
                    last = now
                self.completion_tokens += len(delta.ids)
                self._watch.ids(delta.ids)
                events = self._events(self._parser.feed(delta.ids))
                if delta.finish_reason is not None or self._stops.stopped:
                    events += self._close(delta.finish_reason)
                    yield Step(events, self.finish_reason)
                    return
                if events:
                    yield Step(events)
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def _next(self, stream: AsyncIterator[Delta], deadline: float | None) -> Delta | None:
        try:
            if deadline is None:
                return await anext(stream)
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError
            async with asyncio.timeout(remaining):  # in this task: no task per delta
                return await anext(stream)
        except StopAsyncIteration:
            return None
        except TimeoutError:
            raise ApiError(
                504,
                f"the request took longer than {self._limits.timeout:g} s",
                type="timeout",
                code="timeout",
            ) from None
