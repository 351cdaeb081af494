"""Prometheus metrics of one server (its own registry, served at /metrics).

Counted per request: requests by route and status, prompt and completion tokens, time
to first token, inter-token latency, parse fallbacks (calls released as content), grammar
fallbacks (a structural tag replaced or dropped, with its reason), delimiters echoed as
text and neutralized (a gated format's delimiter spelled from ordinary ids), runs
ended by an error, requests abandoned by their client, hosted tools not offered (by
type) and request fields no API names. Tokens are counted for every
run the engine accepted, however it ended.

With several worker processes (`--workers`), prometheus_client's multiprocess mode is
on (`PROMETHEUS_MULTIPROC_DIR`, set before the workers start): every worker writes its
values to its own files there, and `/metrics`, whichever worker answers, renders the
sum over all of them (gauges: over live workers).
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

__all__ = ["CONTENT_TYPE", "Metrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The server's counters and histograms."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "toolwire_requests",
            "HTTP requests by route and status",
            ["route", "status"],
            registry=r,
        )
        self.prompt_tokens = Counter("toolwire_prompt_tokens", "Prompt tokens", registry=r)
        self.completion_tokens = Counter(
            "toolwire_completion_tokens", "Completion tokens", registry=r
        )
        self.ttft = Histogram(
            "toolwire_time_to_first_token_seconds",
            "Time from request to first output token",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "toolwire_inter_token_latency_seconds",
            "Time between output deltas",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.parse_fallbacks = Counter(
            "toolwire_parse_fallbacks", "Tool calls released as content", registry=r
        )
        self.grammar_fallbacks = Counter(
            "toolwire_grammar_fallbacks",
            "Structural tags replaced or dropped, by reason",
            ["reason"],
            registry=r,
        )
        self.echoed_delimiters = Counter(
            "toolwire_echoed_delimiters_neutralized",
            "Delimiters spelled from ordinary tokens in output, kept as text",
            registry=r,
        )
        self.padding_ids = Counter(
            "toolwire_padding_ids",
            "Output ids past the tokenizer's vocabulary but within the model's (its output "
            "layer's padding rows), read as empty text",
            registry=r,
        )
        self.stream_errors = Counter(
            "toolwire_stream_errors",
            "Runs ended by an error after the engine accepted them (engine failure, "
            "timeout, bad upstream data, internal error)",
            registry=r,
        )
        self.hosted_tools = Counter(
            "toolwire_hosted_tools_dropped",
            "Declared hosted tools (web search, MCP...) not offered to the model, by type",
            ["type"],
            registry=r,
        )
        self.unknown_fields = Counter(
            "toolwire_unknown_fields",
            "Top-level request fields no API table names (logged by name, not acted on)",
            ["route"],
            registry=r,
        )
        self.abandoned = Counter(
            "toolwire_abandoned_requests",
            "Requests whose client went away before the output ended",
            registry=r,
        )

    def render(self) -> bytes:
        """The Prometheus text exposition (summed over the workers in multiprocess mode)."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return bytes(generate_latest(registry))
        return bytes(generate_latest(self.registry))
