"""OpenTelemetry traces: the spans of a turn on every API, the client's trace continued,
the W3C `traceparent` forwarded upstream, and OTLP export to an in-process collector.

toolwire runs in front of a scripted vLLM that records each request's headers. Spans
are read from the SDK's in-memory exporter; the export path (`--otlp-endpoint`) is
checked against a collector served here over OTLP/HTTP (protobuf) and OTLP/gRPC.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.data import data_dir
from tests.production import APIS, ROUTES, Keyed, free_port, keyed, send, with_tools
from tests.serving import ScriptedUpstream, running
from toolwire.server.config import add_arguments, config_from
from toolwire.server.core.tracing import Tracing
from toolwire.server.run import build_app

pytest.importorskip("opentelemetry.sdk", reason="the otel extra (make test installs it)")

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

#: A client's trace context (W3C's example ids).
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
TURN = {"render", "grammar", "queue", "first_token", "parse", "write"}


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(scope="module")
def traced(exporter: InMemorySpanExporter) -> Iterator[Keyed]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with keyed(tracing=Tracing(provider)) as server:
        yield server


def _finished(exporter: InMemorySpanExporter, count: int) -> list[ReadableSpan]:
    """The spans of the last request (its root ends last, after a stream's body)."""
    deadline = time.monotonic() + 5
    while True:
        spans = list(exporter.get_finished_spans())
        roots = [s for s in spans if s.kind.name == "SERVER"]
        if len(roots) >= count or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    root = roots[-1]
    return [s for s in spans if s.context.trace_id == root.context.trace_id]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_a_turn_is_one_trace_with_its_phases(
    traced: Keyed, exporter: InMemorySpanExporter, api: str, stream: bool
) -> None:
    exporter.clear()
    traced.rig.script("Sunny, 21 degrees.")
    answer = send(
        traced.url,
        api,
        stream=stream,
        headers={"traceparent": TRACEPARENT},
        **with_tools(api, "auto"),
    )
    assert answer.status == 200
    spans = _finished(exporter, 1)
    names = [s.name for s in spans]
    root = next(s for s in spans if s.kind.name == "SERVER")
    assert root.name == f"POST {ROUTES[api]}"
    assert set(names) >= TURN and names.count("grammar") == 2  # built, then compiled
    assert {s.attributes.get("toolwire.stage") for s in spans if s.name == "grammar"} == {
        "build",
        "compile",
    }
    # the client's trace, continued: same trace id, its span as the root's parent
    assert format(root.context.trace_id, "032x") == TRACE_ID
    assert root.parent is not None and format(root.parent.span_id, "016x") == PARENT_ID
    for span in spans:
        if span is not root:
            assert span.parent is not None and span.parent.span_id == root.context.span_id
    assert root.attributes["http.route"] == ROUTES[api]
    assert root.attributes["http.response.status_code"] == 200
    tokens = len(traced.rig.tok.encode("Sunny, 21 degrees.")) + 1  # and <|im_end|>
    assert root.attributes["gen_ai.usage.output_tokens"] == tokens
    assert root.attributes["gen_ai.usage.input_tokens"] == len(traced.rig.prompt())
    # the phases in order; every span inside the request's
    by = {s.name: s for s in spans}
    assert by["render"].end_time <= by["queue"].start_time
    assert by["queue"].end_time <= by["first_token"].end_time <= root.end_time
    assert by["parse"].start_time == by["first_token"].start_time
    assert by["parse"].attributes["toolwire.parse.seconds"] > 0
    assert by["write"].attributes["toolwire.write.seconds"] > 0
    for span in spans:
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time
    # the upstream request carries the queue span's context
    sent = traced.upstream.headers[-1]["traceparent"]
    _, trace_id, parent_id, _ = sent.split("-")
    assert trace_id == TRACE_ID and parent_id == format(by["queue"].context.span_id, "016x")


def test_other_routes_and_errors_are_one_span(
    traced: Keyed, exporter: InMemorySpanExporter
) -> None:
    exporter.clear()
    assert send(traced.url, "chat", model="nope").status == 404
    spans = _finished(exporter, 1)
    root = next(s for s in spans if s.kind.name == "SERVER")
    assert root.attributes["http.response.status_code"] == 404
    assert "queue" not in {s.name for s in spans}  # refused before the engine


@pytest.mark.parametrize("api", APIS)
def test_untraced_the_clients_trace_context_is_forwarded_as_received(api: str) -> None:
    with keyed() as server:
        for headers, expected in (
            ({"traceparent": TRACEPARENT, "tracestate": "vendor=1"}, TRACEPARENT),
            ({}, None),
            ({"traceparent": "00-not-a-trace-01"}, None),
        ):
            server.rig.script("Fine.")
            assert send(server.url, api, headers=headers).status == 200
            got = server.upstream.headers[-1]
            assert got.get("traceparent") == expected
            if expected is not None:
                assert got.get("tracestate") == "vendor=1"


class Collector:
    """An OTLP/HTTP trace collector (protobuf), for the duration."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.services: list[str] = []

    async def _traces(self, request: Request) -> Response:
        message = trace_service_pb2.ExportTraceServiceRequest()
        message.ParseFromString(await request.body())
        self._read(message)
        return Response(
            trace_service_pb2.ExportTraceServiceResponse().SerializeToString(),
            media_type="application/x-protobuf",
        )

    def _read(self, message: Any) -> None:
        for resource in message.resource_spans:
            for attribute in resource.resource.attributes:
                if attribute.key == "service.name":
                    self.services.append(attribute.value.string_value)
            for scope in resource.scope_spans:
                self.names += [span.name for span in scope.spans]

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/traces", self._traces, methods=["POST"])])


def _serve_flags(upstream: str, *more: str) -> Any:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    tokenizer = str(data_dir() / "tokenizers" / "qwen3")
    flags = ["--engine", "vllm", "--upstream", upstream, "--tokenizer", tokenizer]
    return config_from(parser.parse_args([*flags, "--store", "memory", *more]), {})


def test_the_otlp_endpoint_flag_exports_to_a_collector() -> None:
    collector = Collector()
    upstream = ScriptedUpstream("vllm")
    with running(collector.app()) as collector_url, running(upstream.app()) as upstream_url:
        app = build_app(_serve_flags(upstream_url, "--otlp-endpoint", collector_url))
        with running(app) as url:
            upstream.scripts.append(_script("Hello."))
            assert send(url, "chat", model="qwen3").status == 200
        app.state.turn.tracing.shutdown()  # flushes the batch
    assert set(collector.names) >= TURN and "POST /v1/chat/completions" in collector.names
    assert collector.services == ["toolwire"] * len(collector.services) and collector.services


def test_otlp_over_grpc() -> None:
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    collector = Collector()

    class Service(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
        def Export(self, request: Any, context: Any) -> Any:
            collector._read(request)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = free_port()
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        tracing = Tracing.to_collector(f"http://127.0.0.1:{port}", "grpc")
        with keyed(tracing=tracing) as served:
            served.rig.script("Hi.")
            assert send(served.url, "responses").status == 200
        tracing.shutdown()
    finally:
        server.stop(0)
    assert set(collector.names) >= TURN and "POST /v1/responses" in collector.names


def _script(text: str) -> Any:
    from tests.data import tokenizer_for
    from tests.serving import Script

    tok = tokenizer_for("qwen3")
    return Script([*tok.encode(text), tok.added_tokens["<|im_end|>"]])
