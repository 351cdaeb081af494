"""Several choices of one request (Chat Completions' `n`), run as one.

Data flow::

    Plan --choices()--> n plans: the same prompt and tag, seed + i for choice i (when
                        the request set a seed)
         --Choices--> n ChoiceRuns: start() starts each in turn (so nothing is sent
                      before every one was accepted); steps() interleaves their steps
                      as they come, each tagged with its `choice`; collect() the
                      events of each, in order (`collect()`, then `events`)

Each choice is its own generation: an engine that runs one sequence at a time (the
embedded one) runs them one after another. A failure of any choice ends the stream
(the turn frames its error step); every run is closed however it ended. `Choices`
answers the same questions a `ChoiceRun` does (`prompt_tokens` once, `completion_tokens`
summed), so a framer reads either.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

from toolwire.backends.base import Engine
from toolwire.events import Event
from toolwire.server.core.metrics import Metrics
from toolwire.server.core.pipeline import ChoiceRun, Chosen, Limits, Plan, Step

__all__ = ["Choices", "choice_plans"]


def choice_plans(plan: Plan, n: int) -> list[Plan]:
    """`n` plans of one request: choice i samples with `seed + i` (a seeded request's
    choices differ, and each is reproducible)."""
    seed = plan.generation.seed
    if seed is None:
        return [plan] * n
    return [replace(plan, generation=replace(plan.generation, seed=seed + i)) for i in range(n)]


class Choices:
    """The runs of a request's `n` choices."""

    def __init__(self, engine: Engine, plans: list[Plan], limits: Limits, metrics: Metrics) -> None:
        self.runs = [ChoiceRun(engine, plan, limits, metrics) for plan in plans]
        #: Each choice's events, once `collect()` ran.
        self.events: list[list[Event]] = []

    @property
    def prompt_tokens(self) -> int:
        return self.runs[0].prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return sum(run.completion_tokens for run in self.runs)

    @property
    def finish_reason(self) -> str | None:
        return self.runs[0].finish_reason

    @property
    def parse_seconds(self) -> float:
        return sum(run.parse_seconds for run in self.runs)

    @property
    def stop_string(self) -> str | None:
        return self.runs[0].stop_string

    @property
    def logprobs(self) -> list[Chosen]:
        return self.runs[0].logprobs

    async def start(self) -> None:
        """Start every choice (each waits for its first delta); closes all on failure."""
        try:
            for run in self.runs:
                await run.start()
        except BaseException:
            await self.aclose()
            raise

    async def steps(self) -> AsyncIterator[Step]:
        """Every choice's steps as they come, each with its `choice`."""
        queue: asyncio.Queue[Step | None] = asyncio.Queue()

        async def pump(index: int, run: ChoiceRun) -> None:
            try:
                async for step in run.steps():
                    await queue.put(replace(step, choice=index))
            finally:
                await queue.put(None)

        tasks = [asyncio.create_task(pump(i, run)) for i, run in enumerate(self.runs)]
        running = len(tasks)
        try:
            while running:
                step = await queue.get()
                if step is None:
                    running -= 1
                    continue
                yield step
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.aclose()

    async def collect(self) -> list[Event]:
        """The first choice's events; every choice's are in `events`. Raises the error
        that ended one."""
        try:
            self.events = [await run.collect() for run in self.runs]
        finally:
            await self.aclose()
        return self.events[0]

    async def aclose(self) -> None:
        for run in self.runs:
            await run.aclose()
