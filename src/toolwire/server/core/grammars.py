"""Structural tags compiled off the request path: a bounded pool, wait and cache.

Data flow of one planned request with a structural tag::

    Plan --prepare()--> key = the tag's JSON text
        embedded engine (it compiles tags itself: `compile_structural_tag`):
            cache hit                  -> Generation(grammar=compiled)
            miss: compile in the pool (one compile per key, however many requests
                  wait for it), wait at most `timeout` seconds
                compiled in time       -> Generation(grammar=compiled), cached
                timeout                -> the policy's fallback: no constraint,
                                          fallback "compile_timeout"; the compile
                                          goes on and is cached for the next request
                queue full             -> the same, fallback "compile_busy"
                compile error          -> no constraint, fallback "compile_failed"
        remote engine (the upstream compiles): the plan is unchanged; once per key,
            the compile the upstream will pay is measured in the pool, against the
            served vocabulary, and observed in the histogram

Invariants:

* Nothing here runs on the event loop or on the generation thread: a request without
  tools (or with a cached tag) never waits for another request's compile.
* The pool is bounded (`workers` threads, at most `queue` compiles waiting); the wait
  is bounded (`timeout`); the cache is bounded in entries and bytes (least recently
  used entries go first; an entry larger than the byte bound is not kept).

Metrics (on the server's registry): `toolwire_grammar_cache_hits_total`,
`toolwire_grammar_cache_misses_total`, `toolwire_grammar_compile_seconds{where}`
(`embedded`, or `upstream` for the preflight measurement), and the cache's
`toolwire_grammar_cache_entries` / `toolwire_grammar_cache_bytes`. Fallbacks are
counted by the caller in `toolwire_grammar_fallbacks_total{reason}`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from toolwire.backends.base import Engine
from toolwire.server.core.pipeline import Plan

__all__ = ["CompiledCache", "GrammarService", "GrammarSettings"]

#: Compile times span milliseconds (a cached rule set) to minutes (huge tool sets).
_COMPILE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


@dataclass(frozen=True)
class GrammarSettings:
    """Bounds of grammar compilation (server flags `--grammar-*`)."""

    #: Seconds a request waits for its tag to compile (None: no limit).
    timeout: float | None = 10.0
    #: Compiles running at once.
    workers: int = 1
    #: Compiles waiting for a worker; beyond it a new tag is served unconstrained.
    queue: int = 8
    #: Compiled grammars kept.
    cache_entries: int = 64
    #: Bytes of compiled grammars kept (XGrammar's `memory_size_bytes`).
    cache_bytes: int = 512 * 1024 * 1024


class CompiledCache:
    """Least-recently-used compiled grammars, bounded in entries and bytes."""

    def __init__(self, max_entries: int, max_bytes: int, size: Callable[[Any], int]) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size = size
        self._items: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> Any | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: str, value: Any) -> None:
        size = self._size(value)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            if size > self.max_bytes or self.max_entries <= 0:
                return
            self._items[key] = (value, size)
            self.bytes += size
            while len(self._items) > self.max_entries or self.bytes > self.max_bytes:
                _, (_, dropped) = self._items.popitem(last=False)
                self.bytes -= dropped


def _memory(compiled: Any) -> int:
    return int(getattr(compiled, "memory_size_bytes", 0))


class _Metrics:
    def __init__(self, registry: CollectorRegistry, cache: CompiledCache) -> None:
        self.hits = Counter(
            "toolwire_grammar_cache_hits", "Structural tags found compiled", registry=registry
        )
        self.misses = Counter(
            "toolwire_grammar_cache_misses",
            "Structural tags not found compiled (a compile was started or joined)",
            registry=registry,
        )
        self.seconds = Histogram(
            "toolwire_grammar_compile_seconds",
            "Structural tag compile time: embedded, or measured for the upstream",
            ["where"],
            buckets=_COMPILE_BUCKETS,
            registry=registry,
        )
        # set after every change (not read on collection), so that several worker
        # processes sum theirs (multiprocess mode: live workers only)
        self._cache = cache
        self.entries = Gauge(
            "toolwire_grammar_cache_entries",
            "Compiled grammars kept",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.size = Gauge(
            "toolwire_grammar_cache_bytes",
            "Bytes of compiled grammars kept",
            registry=registry,
            multiprocess_mode="livesum",
        )

    def cached(self) -> None:
        """The cache changed: its gauges follow."""
        self.entries.set(len(self._cache))
        self.size.set(self._cache.bytes)


class GrammarService:
    """Compiles (embedded) or measures (remote) structural tags in a bounded pool."""

    def __init__(
        self,
        engine: Engine,
        registry: CollectorRegistry,
        settings: GrammarSettings | None = None,
        *,
        measure: Callable[[Mapping[str, Any]], float] | None = None,
    ) -> None:
        """`measure`: for a remote engine, a function that compiles a tag as the
        upstream would and returns the seconds it took (None: nothing is measured)."""
        self.settings = settings or GrammarSettings()
        self._compile: Callable[[Mapping[str, Any]], Any] | None = getattr(
            engine, "compile_structural_tag", None
        )
        self._measure = measure
        self.cache = CompiledCache(self.settings.cache_entries, self.settings.cache_bytes, _memory)
        self._metrics = _Metrics(registry, self.cache)
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, self.settings.workers), thread_name_prefix="grammar"
        )
        self._running: dict[str, Future[Any]] = {}
        self._measured: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def for_engine(
        cls, engine: Engine, registry: CollectorRegistry, settings: GrammarSettings | None = None
    ) -> GrammarService:
        """Compiles for an engine that compiles tags itself; for a constraining remote
        engine, measures what its upstream will pay (when XGrammar is installed)."""
        compiles = callable(getattr(engine, "compile_structural_tag", None))
        remote = not compiles and engine.constrains
        measure = upstream_measure(engine.tokenizer) if remote else None
        return cls(engine, registry, settings, measure=measure)

    @property
    def compiling(self) -> int:
        """Compiles submitted and not finished."""
        with self._lock:
            return len(self._running)

    async def prepare(self, plan: Plan) -> Plan:
        """The plan with its tag compiled, or under the fallback (see the module doc)."""
        tag = plan.generation.structural_tag
        if tag is None:
            return plan
        key = json.dumps(tag, ensure_ascii=False)
        if self._compile is None:
            self._measure_once(key, tag)
            return plan
        compiled = self.cache.get(key)
        if compiled is not None:
            self._metrics.hits.inc()
            return replace(plan, generation=replace(plan.generation, grammar=compiled))
        self._metrics.misses.inc()
        future = self._submit(key, tag)
        if future is None:
            return _fallback(plan, "compile_busy", "the grammar compile queue is full")
        try:
            wrapped = asyncio.shield(asyncio.wrap_future(future))
            compiled = await asyncio.wait_for(wrapped, self.settings.timeout)
        except TimeoutError:
            why = f"the tag did not compile within {self.settings.timeout:g} s (kept compiling)"
            return _fallback(plan, "compile_timeout", why)
        except Exception as exc:  # XGrammar raises several types for a bad tag
            return _fallback(plan, "compile_failed", f"the tag does not compile: {exc}")
        return replace(plan, generation=replace(plan.generation, grammar=compiled))

    def _submit(self, key: str, tag: Mapping[str, Any]) -> Future[Any] | None:
        with self._lock:
            running = self._running.get(key)
            if running is not None:
                return running
            if len(self._running) >= self.settings.workers + self.settings.queue:
                return None
            future = self._pool.submit(self._compile_now, key, tag)
            self._running[key] = future
            return future

    def _compile_now(self, key: str, tag: Mapping[str, Any]) -> Any:
        assert self._compile is not None
        started = time.perf_counter()
        try:
            compiled = self._compile(tag)
            self._metrics.seconds.labels("embedded").observe(time.perf_counter() - started)
            self.cache.put(key, compiled)
            self._metrics.cached()
            return compiled
        finally:
            with self._lock:
                self._running.pop(key, None)

    def _measure_once(self, key: str, tag: Mapping[str, Any]) -> None:
        if self._measure is None:
            return
        with self._lock:
            if key in self._measured:
                self._measured.move_to_end(key)
                return
            self._measured[key] = None
            while len(self._measured) > max(1, self.settings.cache_entries):
                self._measured.popitem(last=False)
        self._pool.submit(self._measure_now, tag)

    def _measure_now(self, tag: Mapping[str, Any]) -> None:
        assert self._measure is not None
        try:
            seconds = self._measure(tag)
        except Exception:  # a tag the upstream's compiler rejects is the upstream's to report
            return
        self._metrics.seconds.labels("upstream").observe(seconds)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _fallback(plan: Plan, code: str, why: str) -> Plan:
    """Served without the tag: the policy's fallback for a tag that cannot be had now."""
    generation = replace(plan.generation, structural_tag=None, grammar=None)
    return replace(
        plan,
        generation=generation,
        grammar_fallback=code,
        grammar_reasons=(*plan.grammar_reasons, why),
    )


def upstream_measure(tokenizer: Any) -> Callable[[Mapping[str, Any]], float] | None:
    """For a remote engine: a function that compiles a tag against the served vocabulary
    (XGrammar, cache off, one thread) and returns the seconds it took, as the upstream
    will pay them; None without XGrammar. The compiler is built on first use."""
    from toolwire.grammar.preflight import available, xgrammar_module

    if not available():
        return None
    compilers: list[Any] = []

    def measure(tag: Mapping[str, Any]) -> float:
        from toolwire.grammar.preflight import tokenizer_info

        if not compilers:
            info = tokenizer_info(tokenizer)
            compilers.append(xgrammar_module().GrammarCompiler(info, cache_enabled=False))
        started = time.perf_counter()
        compilers[0].compile_structural_tag(json.dumps(tag))
        return time.perf_counter() - started

    return measure
