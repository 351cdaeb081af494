"""Traces: OpenTelemetry spans per request, exported over OTLP (the `otel` extra).

The spans of one turn (every API; other routes get the request span alone)::

    POST /v1/responses   the request (SERVER); continues the client's W3C `traceparent`
    |- render            the prompt rendered to ids (isolation on)      pipeline.plan
    |- grammar           the structural tag built (stage=build)         pipeline.plan
    |- grammar           compiled, or found compiled (stage=compile)    the grammar service
    |- queue             the engine request until its first output ids: the engine's
    |                    queue and prefill; an HTTP engine's request carries this span's
    |                    `traceparent` (vLLM continues it)
    |- first_token       those first ids until the bytes carrying them are handed to the
    |                    client (streamed) or the body is (whole)
    |- parse             the first ids to the end of output; `toolwire.parse.seconds`:
    |                    the time spent inside the parser and the stop strings
    `- write             the first bytes to the last; `toolwire.write.seconds`: the time
                         spent framing events as the API's bytes

`render`, `grammar` and `queue` are sequential and timed as they run; `first_token`,
`parse` and `write` interleave (every delta is parsed, then written) and are recorded
from their timestamps when the answer ends, their busy time as an attribute. The request
span says the route, status, model, stream, tokens and finish reason.

Off (`Tracing.off()`: no `--otlp-endpoint`, or no SDK in tests): nothing is imported,
no span is made, every hook is one context-variable read; the client's `traceparent`
and `tracestate` are still forwarded upstream unchanged, so an upstream's traces join
the client's.

`span(name)` is the hook for code below the turn (the pipeline, off the event loop in a
copied context): a child of the request's current span, or nothing when off.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from toolwire.backends.propagation import forwarding

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

__all__ = ["RequestTrace", "Tracing", "span"]

#: A W3C traceparent: version, trace id, parent id, flags (lowercase hex).
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")

#: Attribute namespaces of OpenTelemetry's semantic conventions, kept as they are;
#: every other attribute is toolwire's own (`toolwire.` added).
_STANDARD = ("gen_ai.", "http.")

_TRACER: ContextVar[Tracer | None] = ContextVar("toolwire_tracer", default=None)


def _incoming(headers: Mapping[str, str]) -> dict[str, str]:
    """The client's trace context, if well-formed (forwarded upstream when not traced)."""
    parent = headers.get("traceparent", "").strip()
    if not _TRACEPARENT.match(parent):
        return {}
    out = {"traceparent": parent}
    state = headers.get("tracestate")
    if state and len(state) <= 512:
        out["tracestate"] = state.strip()
    return out


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[Span | None]:
    """A child span of the current request's span for the enclosed work (None when
    tracing is off)."""
    tracer = _TRACER.get()
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(name, attributes=_attributes(attributes)) as child:
        yield child


def _attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        name = key if key.startswith(_STANDARD) else "toolwire." + key
        out[name] = value if isinstance(value, bool | int | float | str) else str(value)
    return out


class RequestTrace:
    """One request's spans (a no-op when tracing is off; see the module docstring)."""

    def __init__(
        self, tracer: Tracer | None, route: str, method: str, headers: Mapping[str, str]
    ) -> None:
        self._tracer = tracer
        self._incoming = _incoming(headers)
        self._span: Span | None = None
        self._context: Context | None = None
        self.ended = False
        if tracer is None:
            return
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        parent = TraceContextTextMapPropagator().extract(dict(headers))
        self._span = tracer.start_span(
            f"{method} {route}",
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes={"http.request.method": method, "http.route": route},
        )
        self._context = trace.set_span_in_context(self._span, parent)

    @property
    def on(self) -> bool:
        return self._span is not None

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The request's span is the current one for the enclosed work, and its trace
        context is what an HTTP engine forwards upstream."""
        if self._span is None or self._context is None:
            with forwarding(self._incoming):
                yield
            return
        from opentelemetry import context

        token = context.attach(self._context)
        tracer = _TRACER.set(self._tracer)
        try:
            with forwarding(self._outgoing()):
                yield
        finally:
            _TRACER.reset(tracer)
            context.detach(token)

    def _outgoing(self) -> dict[str, str]:
        """The current span's trace context as W3C headers."""
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        headers: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(headers)
        return headers

    @contextlib.contextmanager
    def phase(self, name: str, **attributes: Any) -> Iterator[None]:
        """A child span timed as the enclosed work runs; an HTTP engine called inside
        forwards this span's context."""
        if self._tracer is None:
            yield
            return
        with (
            self._tracer.start_as_current_span(name, attributes=_attributes(attributes)),
            forwarding(self._outgoing()),
        ):
            yield

    def record(self, name: str, start_ns: int, end_ns: int, **attributes: Any) -> None:
        """A child span from timestamps (`time.time_ns()`)."""
        if self._tracer is None or self._context is None:
            return
        child = self._tracer.start_span(
            name, context=self._context, start_time=start_ns, attributes=_attributes(attributes)
        )
        child.end(end_time=max(start_ns, end_ns))

    def set(self, **attributes: Any) -> None:
        if self._span is not None:
            self._span.set_attributes(_attributes(attributes))

    def end(self, status: int) -> None:
        """End the request span with the answer's status (once)."""
        if self.ended:
            return
        self.ended = True
        if self._span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("http.response.status_code", status)
        if status >= 500:
            self._span.set_status(Status(StatusCode.ERROR))
        self._span.end()


class Tracing:
    """Where a server's spans go: an OpenTelemetry tracer provider, or nowhere."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self.provider = provider
        self._tracer: Tracer | None = None
        if provider is not None:
            self._tracer = provider.get_tracer("toolwire")

    @classmethod
    def off(cls) -> Tracing:
        return cls()

    @classmethod
    def to_collector(
        cls, endpoint: str, protocol: str = "http/protobuf", service: str = "toolwire"
    ) -> Tracing:
        """Spans batched to the OTLP collector at `endpoint` (`http/protobuf`: the base
        URL, `/v1/traces` added when missing; `grpc`: host:port)."""
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            from toolwire.errors import UsageError

            raise UsageError(
                "--otlp-endpoint needs OpenTelemetry: pip install 'toolwire[otel]'"
            ) from exc
        exporter: Any
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcExporter,
            )

            target = endpoint.split("://", 1)[-1]
            exporter = GrpcExporter(endpoint=target, insecure=not endpoint.startswith("https"))
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter as HttpExporter,
            )

            url = endpoint.rstrip("/")
            if not url.endswith("/v1/traces"):
                url += "/v1/traces"
            exporter = HttpExporter(endpoint=url)
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(BatchSpanProcessor(exporter))
        return cls(provider)

    @property
    def on(self) -> bool:
        return self._tracer is not None

    def request(self, route: str, method: str, headers: Mapping[str, str]) -> RequestTrace:
        return RequestTrace(self._tracer, route, method, headers)

    def shutdown(self) -> None:
        """Export what is pending (at exit)."""
        if self.provider is not None:
            self.provider.shutdown()


def now_ns() -> int:
    return time.time_ns()
