"""Raw OTLP export requests, built directly from the protobuf classes (a load generator's view)."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def tool_span(trace_id: bytes, span_id: bytes, *, tool: str, args: str, result: str,
              start_ns: int, parent: bytes = b"") -> Span:
    """A GenAI ``execute_tool`` span with content."""
    return Span(
        trace_id=trace_id, span_id=span_id, parent_span_id=parent,
        name=f"execute_tool {tool}", kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=start_ns, end_time_unix_nano=start_ns + 1_000_000,
        attributes=[_kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", tool),
                    _kv("gen_ai.tool.call.arguments", args),
                    _kv("gen_ai.tool.call.result", result)],
    )


def request(spans: list[Span], service: str = "load") -> ExportTraceServiceRequest:
    """One export request holding ``spans`` under one resource."""
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[_kv("service.name", service)]),
        scope_spans=[ScopeSpans(spans=spans)],
    )])


def episode_request(n: int, *, start_ns: int = 1_700_000_000_000_000_000,
                    repeat: bool = False) -> tuple[ExportTraceServiceRequest, list[str]]:
    """A request with one trace of ``n`` tool calls; returns it and the span ids (hex)."""
    trace_id = os.urandom(16)
    spans, ids = [], []
    for i in range(n):
        span_id = os.urandom(8)
        query = "same" if repeat else f"q{i}"
        spans.append(tool_span(trace_id, span_id, tool="search", args=f'{{"q": "{query}"}}',
                               result=f"result for {query}", start_ns=start_ns + i * 10_000_000))
        ids.append(span_id.hex())
    return request(spans), ids
