"""A request refused for its content is counted by its spans and logged, rate-limited.

``loopscope_spans_rejected_total`` counts the spans of every request refused at decode time
(HTTP and gRPC) as well as those the store refused; the log names the field path, the first
refusal at once and the ones after it as one summary line per interval.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from collector_process import CollectorProcess, metric_value, start_collector
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from otlp_requests import request, tool_span

from loopscope_collector.pipeline.refusals import RefusalLog
from loopscope_collector.receive.decode import DecodeError, decode_request

pytestmark = pytest.mark.timeout(120)

PATH = "resourceSpans[0].scopeSpans[0].spans[0]"


def _json_span(**fields: object) -> dict[str, object]:
    return {"traceId": os.urandom(16).hex(), "spanId": os.urandom(8).hex(), "name": "x",
            "startTimeUnixNano": "1", "endTimeUnixNano": "2", **fields}


def _json_body(*spans: dict[str, object]) -> bytes:
    text = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})
    return text.replace("LONE", "\\ud800").encode()


def _proto_body(spans: int, *, bad_kind: int) -> bytes:
    made = [tool_span(os.urandom(16), os.urandom(8), tool="search", args="{}", result="r",
                      start_ns=1_700_000_000_000_000_000) for _ in range(spans)]
    made[0].kind = bad_kind  # type: ignore[assignment]
    return request(made).SerializeToString()


def _refusal_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "loopscope collector: refused" in line]


# -- what a refused request's spans count as ---------------------------------------------------


@pytest.mark.parametrize(("body", "content_type", "spans"), [
    (_proto_body(3, bad_kind=200), "application/x-protobuf", 3),
    (_json_body(_json_span(), _json_span(name="LONE")), "application/json", 2),
    (_json_body(_json_span(kind=200), _json_span(), _json_span()), "application/json", 3),
    (b"{not json", "application/json", 0),
    (b"\xff\xff\xff", "application/x-protobuf", 0),
])
def test_a_decode_error_counts_the_spans_of_its_request(body: bytes, content_type: str,
                                                        spans: int) -> None:
    with pytest.raises(DecodeError) as caught:
        decode_request(body, content_type=content_type, content_encoding=None,
                       max_bytes=1 << 20)
    assert caught.value.spans == spans


# -- the rate limit, on a clock the test moves ---------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_first_refusal_is_logged_and_the_rest_summed_up_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    scheduled: list[tuple[float, Callable[[], None]]] = []
    log = RefusalLog(logging.getLogger("test.refusals"), 60.0, clock=clock,
                     schedule=lambda delay, call: scheduled.append((delay, call)))
    caplog.set_level(logging.WARNING, logger="test.refusals")

    log.refused("request A: a.kind: 200 is out of range", 1)
    assert [r.getMessage() for r in caplog.records] == [
        "loopscope collector: refused request A: a.kind: 200 is out of range"]
    assert caplog.records[0].levelno == logging.WARNING
    assert scheduled == []

    clock.now += 10
    for n in range(500):  # a flood: nothing more is logged, one summary is scheduled
        log.refused(f"request {n}: b.name: a lone surrogate", 2)
    assert len(caplog.records) == 1
    assert [delay for delay, _ in scheduled] == [50.0]

    clock.now += 50  # the timer fires at the end of the interval
    scheduled.pop()[1]()
    assert caplog.records[-1].getMessage() == (
        "loopscope collector: refused 500 more request(s) (1000 span(s)) since the line "
        "before, not logged one by one (one line per 60 s at most); the latest: "
        "request 499: b.name: a lone surrogate")

    clock.now += 30  # the flood goes on: held until the next summary, a minute after the last
    log.refused("request C", 1)
    assert len(caplog.records) == 2
    assert [delay for delay, _ in scheduled] == [30.0]
    clock.now += 30
    scheduled.pop()[1]()
    assert "refused 1 more request(s) (1 span(s))" in caplog.records[-1].getMessage()

    clock.now += 60  # a quiet minute: no summary owed, and the next refusal is logged at once
    log.summarise()
    assert len(caplog.records) == 3
    log.refused("request D", 1)
    assert caplog.records[-1].getMessage() == "loopscope collector: refused request D"
    assert scheduled == []


# -- a real collector: HTTP and gRPC -------------------------------------------------------------


@pytest.fixture
def collector(tmp_path: Path) -> CollectorProcess:
    proc = start_collector(tmp_path / "store.duckdb")
    yield proc  # type: ignore[misc]
    proc.stop()


def test_http_refusals_count_their_spans_and_the_log_names_the_field(
    collector: CollectorProcess,
) -> None:
    """The issue's two requests: a span of kind 200 and one named "\\ud800". Both get 400;
    both are counted, request and span; the first is logged with its field path and the
    second in the summary line (at the latest when the collector stops)."""
    bad_kind = _json_body(_json_span(kind=200))
    lone = _json_body(_json_span(name="LONE"))
    for body in (bad_kind, lone):
        status, _, answer = collector.post(body, content_type="application/json")
        assert status == 400, answer

    metrics = collector.get("/metrics")
    assert 'loopscope_requests_rejected_total{code="400"} 2' in metrics
    assert metric_value(metrics, "loopscope_spans_rejected_total") == 2

    lines = _refusal_lines(collector.stop())
    assert lines[0] == ("loopscope collector: refused an OTLP/HTTP request from 127.0.0.1 "
                        f"(400, 1 span(s)): {PATH}.kind: 200 is out of range (-128 to 127)")
    assert len(lines) == 2, lines
    assert lines[1].startswith("loopscope collector: refused 1 more request(s) (1 span(s)) ")
    assert lines[1].endswith(f"{PATH}.name: a lone surrogate '\\ud800' at character 0, "
                             "which is not valid Unicode")


def test_grpc_refusals_count_their_spans_and_the_log_names_the_field(
    collector: CollectorProcess,
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    body = _proto_body(3, bad_kind=200)
    with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Export(ExportTraceServiceRequest.FromString(body), timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    metrics = collector.get("/metrics")
    assert 'loopscope_requests_rejected_total{code="400"} 1' in metrics
    assert metric_value(metrics, "loopscope_spans_rejected_total") == 3

    lines = _refusal_lines(collector.stop())
    assert lines == [
        "loopscope collector: refused an OTLP/gRPC request from 127.0.0.1 (400, 3 span(s)): "
        f"{PATH}.kind: 200 is out of range (-128 to 127)"]


def test_good_traffic_logs_no_refusal(collector: CollectorProcess) -> None:
    good = request([tool_span(os.urandom(16), os.urandom(8), tool="t", args="{}", result="r",
                              start_ns=1_700_000_000_000_000_000)]).SerializeToString()
    assert collector.post(good)[0] == 200
    assert metric_value(collector.get("/metrics"), "loopscope_spans_rejected_total") == 0
    assert _refusal_lines(collector.stop()) == []
