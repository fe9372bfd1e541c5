"""Spans shaped as each foreign GenAI convention, sent by the real OTel SDK over HTTP to a
real collector: each becomes tool-call rows of its convention, and a spin is flagged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from collector_process import CollectorProcess, eventually, start_collector
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind

pytestmark = pytest.mark.timeout(120)

ARGS = {"query": "late orders", "limit": 20}
OUTPUT = "no orders match 'late orders'"


def openinference(i: int) -> dict[str, Any]:
    return {"openinference.span.kind": "TOOL", "tool.name": "search_orders",
            "input.value": json.dumps(ARGS), "input.mime_type": "application/json",
            "output.value": OUTPUT}


def openllmetry(i: int) -> dict[str, Any]:
    return {"traceloop.span.kind": "tool", "traceloop.entity.name": "search_orders",
            "traceloop.entity.input": json.dumps({"inputs": ARGS, "tags": [], "metadata": {},
                                                  "kwargs": {}}),
            "traceloop.entity.output": json.dumps({"outputs": OUTPUT, "kwargs": {}})}


def logfire(i: int) -> dict[str, Any]:
    return {"logfire.msg_template": "Function: {name}", "logfire.span_type": "span",
            "logfire.msg": "Function: search_orders", "name": "search_orders",
            "input": json.dumps(ARGS), "output": OUTPUT}


CONVENTIONS = {
    "openinference": ("search_orders", openinference),
    "openllmetry": ("search_orders.tool", openllmetry),
    "openai_agents": ("Function: {name}", logfire),
}


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[CollectorProcess]:
    proc = start_collector(tmp_path / "store.duckdb", grpc=False)
    yield proc
    proc.stop()


def _provider(collector: CollectorProcess, service: str) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(
        OTLPSpanExporter(endpoint=collector.url + "/v1/traces")))
    return provider


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_each_convention_is_normalised_and_detected(collector: CollectorProcess,
                                                    convention: str) -> None:
    """Four identical calls in the convention's own attributes: four rows with one
    signature, computed by the collector, and the third call flagged."""
    name, attributes = CONVENTIONS[convention]
    provider = _provider(collector, convention)
    tracer = provider.get_tracer(convention)
    with tracer.start_as_current_span("agent run") as root:
        trace_id = f"{root.get_span_context().trace_id:032x}"
        for i in range(4):
            with tracer.start_as_current_span(name, attributes=attributes(i)):
                pass
    provider.shutdown()
    calls = eventually(lambda: len(rows := collector.read(
        "episode_tool_calls", episode_id=trace_id)) == 4 and rows)
    assert {c["convention"] for c in calls} == {convention}
    assert {c["tool"] for c in calls} == {"search_orders"}
    assert len({c["signature"] for c in calls}) == 1 and calls[0]["content_captured"]
    assert json.loads(calls[0]["args_text"]) == ARGS
    flags = eventually(lambda: collector.read("episode_detections", episode_id=trace_id))
    assert flags[0]["ordinal"] == 2 and flags[0]["kind"] == "exact_repeat"


def test_mcp_client_and_server_reports_are_one_call(collector: CollectorProcess) -> None:
    """An MCP tools/call reported by both the client and the server is stored once."""
    provider = _provider(collector, "mcp-agent")
    tracer = provider.get_tracer("mcp")
    with tracer.start_as_current_span("agent run") as root:
        trace_id = f"{root.get_span_context().trace_id:032x}"
        for request_id in ("1", "2"):
            attributes = {
                "mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_orders", "jsonrpc.request.id": request_id,
                "mcp.session.id": "session-1",
                "gen_ai.tool.call.arguments": json.dumps(ARGS),
                "gen_ai.tool.call.result": json.dumps(
                    {"content": [{"type": "text", "text": OUTPUT}], "isError": False}),
            }
            with tracer.start_as_current_span("tools/call search_orders", kind=SpanKind.CLIENT,
                                              attributes=attributes), \
                 tracer.start_as_current_span("tools/call search_orders",
                                              kind=SpanKind.SERVER, attributes=attributes):
                pass
    provider.shutdown()
    spans_seen = eventually(lambda: "loopscope_spans_stored_total 5" in collector.get("/metrics"))
    assert spans_seen
    calls = collector.read("episode_tool_calls", episode_id=trace_id)
    assert len(calls) == 2 and {c["convention"] for c in calls} == {"mcp"}
    assert calls[0]["output_text"] == OUTPUT
