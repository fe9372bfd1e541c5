"""Chaos: spans the store cannot hold, mixed into concurrent good traffic.

A poison span is refused at decode time with a 400 (gRPC INVALID_ARGUMENT) naming its field;
a value only its typed column cannot hold is set aside and named in OTLP's
``partial_success`` while its span is stored. Every good request sent beside a poison is
acknowledged at its first try and stored exactly once. What still reaches the store and fails
there fails only its own request.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import grpc
import pytest
from collector_process import CollectorProcess, metric_value, start_collector
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from otlp_requests import episode_request, request, tool_span

from loopscope.detect.monitor import EpisodeMonitor
from loopscope_collector.normalize.spans import SpanRecord
from loopscope_collector.pipeline.jobs import Rejected
from loopscope_collector.pipeline.thread import Pipeline
from loopscope_collector.receive.decode import decode_request
from loopscope_collector.storage import open_database

pytestmark = pytest.mark.timeout(180)

START = 1_700_000_000_000_000_000
PATH = "resourceSpans[0].scopeSpans[0].spans[0]"


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[CollectorProcess]:
    proc = start_collector(tmp_path / "store.duckdb")
    yield proc
    proc.stop()


def _proto_poison(**fields: int) -> bytes:
    span = tool_span(os.urandom(16), os.urandom(8), tool="search", args="{}", result="r",
                     start_ns=START)
    for name, value in fields.items():
        if name == "status_code":
            span.status.code = value  # type: ignore[assignment]
        else:
            setattr(span, name, value)
    return request([span]).SerializeToString()


def _json_poison(name: str = "x", key: str = "k", value: str = "v") -> bytes:
    """OTLP JSON with these strings; ``LONE`` in one becomes the raw escape ``\\ud800``."""
    span = {"traceId": os.urandom(16).hex(), "spanId": os.urandom(8).hex(), "name": name,
            "startTimeUnixNano": "1", "endTimeUnixNano": "2",
            "attributes": [{"key": key, "value": {"stringValue": value}}]}
    text = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    return text.replace("LONE", "\\ud800").encode()


POISONS = [
    (_proto_poison(kind=200), "application/x-protobuf", f"{PATH}.kind: 200 is out of range"),
    (_proto_poison(status_code=200), "application/x-protobuf", f"{PATH}.status.code: 200"),
    (_proto_poison(start_time_unix_nano=2**63), "application/x-protobuf",
     f"{PATH}.startTimeUnixNano: {2**63} is out of range"),
    (_json_poison(name="LONE"), "application/json", f"{PATH}.name: a lone surrogate"),
    (_json_poison(key="aLONE"), "application/json", f"{PATH}.attributes[0].key: a lone"),
    (_json_poison(value="LONEx"), "application/json",
     f"{PATH}.attributes[0].value.stringValue: a lone surrogate"),
]


def _post_label(collector: CollectorProcess, body: bytes) -> tuple[int, str]:
    req = urllib.request.Request(collector.url + "/v1/labels", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_poison_gets_400_naming_the_field_and_good_traffic_is_stored_once(
    collector: CollectorProcess,
) -> None:
    """Three clients send only poison (every kind above, and labels holding a lone
    surrogate) while four send good requests: every good request is acknowledged (at its first
    try, or after a 503 that the queue was full: the good clients send faster than a busy
    store stores, and retry as exporters do), every poison gets a 400 naming its field (after
    such a 503, if admission turned it away before its spans were read), and each good span
    is stored once."""
    good: list[tuple[int, list[str]]] = []
    poison: list[tuple[int, str, str]] = []

    def send_good() -> None:
        for _ in range(15):
            req, ids = episode_request(3)
            good.append((collector.taken(req.SerializeToString())[0], ids))

    def send_poison() -> None:
        for _ in range(5):
            for body, content_type, says in POISONS:
                status, _, answer = collector.taken(body, content_type=content_type)
                poison.append((status, answer.decode("utf-8", "replace"), says))
            label = b'{"episode_id": "e", "label": "no_loop", "note": "\\ud800"}'
            status, answer = _post_label(collector, label)
            poison.append((status, answer, "note: a lone surrogate"))

    threads = [threading.Thread(target=send_good) for _ in range(4)]
    threads += [threading.Thread(target=send_poison) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert [status for status, _ in good] == [200] * 60
    for status, answer, says in poison:
        assert status == 400, answer
        assert says in answer
    metrics = collector.get("/metrics")
    assert 'loopscope_requests_rejected_total{code="400"} 90' in metrics

    collector.stop()
    con = duckdb.connect(str(collector.db), read_only=True)
    stored = Counter(row[0] for row in con.execute("select span_id from spans").fetchall())
    calls = con.execute("select count(*) from tool_calls").fetchall()[0][0]
    labels = con.execute("select count(*) from labels").fetchall()[0][0]
    con.close()
    wanted = [span_id for _, ids in good for span_id in ids]
    assert stored == Counter(wanted)
    assert calls == 180 and labels == 0


def test_grpc_poison_is_invalid_argument(collector: CollectorProcess) -> None:
    """The same check on the gRPC receiver: INVALID_ARGUMENT with the field path."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    body = _proto_poison(kind=200)
    with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Export(ExportTraceServiceRequest.FromString(body), timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"{PATH}.kind: 200 is out of range" in str(caught.value.details())


def _typed_poison(key: str, value: int | str | float) -> bytes:
    """A tool span whose typed attribute ``key`` carries ``value`` (an int, a float or text)."""
    span = tool_span(os.urandom(16), os.urandom(8), tool="search", args="{}", result="r",
                     start_ns=START)
    span.attributes.add(key="loopscope.episode.id").value.string_value = "ep-typed"
    attribute = span.attributes.add(key=key).value
    if isinstance(value, str):
        attribute.string_value = value
    elif isinstance(value, float):
        attribute.double_value = value
    else:
        attribute.int_value = value
    return request([span]).SerializeToString()


def _typed_poison_json(key: str, member: dict[str, object]) -> bytes:
    span = {"traceId": os.urandom(16).hex(), "spanId": os.urandom(8).hex(),
            "name": "execute_tool search", "startTimeUnixNano": str(START),
            "endTimeUnixNano": str(START + 1),
            "attributes": [{"key": "gen_ai.operation.name",
                            "value": {"stringValue": "execute_tool"}},
                           {"key": key, "value": member}]}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


TYPED_POISONS = [
    (_typed_poison("loopscope.step", 2**40), "application/x-protobuf",
     f"{PATH}.attributes['loopscope.step']: {2**40} does not fit tool_calls.step and messages.step (INTEGER"),
    (_typed_poison("loopscope.output.size", -(2**31) - 1), "application/x-protobuf",
     f"{PATH}.attributes['loopscope.output.size']: {-(2**31) - 1} does not fit"),
    (_typed_poison("loopscope.turn", "9" * 12), "application/x-protobuf",
     f"{PATH}.attributes['loopscope.turn']: {'9' * 12} does not fit tool_calls.turn"),
    (_typed_poison("loopscope.no_progress.streak", 1e12), "application/x-protobuf",
     f"{PATH}.attributes['loopscope.no_progress.streak']: {10**12} does not fit"),
    (_typed_poison("gen_ai.usage.input_tokens", "1" + "0" * 19), "application/x-protobuf",
     f"{PATH}.attributes['gen_ai.usage.input_tokens']: 1{'0' * 19} does not fit"
     " tool_calls.tokens_in and episodes.input_tokens (BIGINT"),
    (_typed_poison("loopscope.label.first_loop_step", 2**31), "application/x-protobuf",
     f"{PATH}.attributes['loopscope.label.first_loop_step']: {2**31} does not fit"
     " episodes.scenario_first_loop_step"),
    (_typed_poison_json("loopscope.step", {"intValue": str(2**35)}), "application/json",
     f"{PATH}.attributes['loopscope.step']: {2**35} does not fit tool_calls.step"),
    (_typed_poison_json("llm.token_count.prompt", {"doubleValue": 1e30}), "application/json",
     f"{PATH}.attributes['llm.token_count.prompt']: {int(1e30)} does not fit"),
]


def _partial_success(answer: bytes, content_type: str) -> str:
    """The ``partial_success`` message of an export's 200 answer ("" when it has none)."""
    if content_type == "application/json":
        return str(json.loads(answer).get("partialSuccess", {}).get("errorMessage", ""))
    return ExportTraceServiceResponse.FromString(answer).partial_success.error_message


def _stored_spans(collector: CollectorProcess) -> int:
    return int(metric_value(collector.get("/metrics"), "loopscope_spans_stored_total"))


@pytest.mark.parametrize(("body", "content_type", "says"), TYPED_POISONS,
                         ids=[says.split("'")[1] + "-" + ct.split("/")[1]
                              for _, ct, says in TYPED_POISONS])
def test_a_typed_attribute_its_column_cannot_hold_is_stored_as_unknown_and_named(
    collector: CollectorProcess, body: bytes, content_type: str, says: str,
) -> None:
    """A number a reader would store in a typed column but that the column cannot hold (an
    integer too large for INTEGER or BIGINT, sent as an int, a float or decimal text) does
    not refuse its span: the span is stored, the value is kept as text under
    ``loopscope.unstorable.<key>`` (its column reads unknown), and the 200 answer's OTLP
    ``partial_success`` names the attribute and the column; nothing counts as refused."""
    status, _, answer = collector.post(body, content_type=content_type)
    assert status == 200, answer
    message = _partial_success(answer, content_type)
    assert says in message and "stored as unknown" in message, message
    assert _stored_spans(collector) == 1
    key = says.split("'")[1]
    if content_type != "application/json":  # the JSON poisons carry no episode id
        (row,) = collector.read("episode_tool_calls", episode_id="ep-typed")
        if key == "loopscope.step":
            assert row["step"] is None
    metrics = collector.get("/metrics")
    assert 'loopscope_requests_rejected_total{code="400"} 1' not in metrics


def test_one_unstorable_value_in_a_hundred_spans_loses_none_of_them(
    collector: CollectorProcess,
) -> None:
    """Issue 29: a request of 100 spans in which one carries a NaN cost, a negative token
    count or 2^40 tokens used to be refused whole (400; exporters do not retry it). Now all
    100 are stored and the answer's ``partial_success`` names each bad value by its path; a
    call number past INTEGER (``loopscope.call.ordinal``) is one more such value."""
    poisons = {7: ("loopscope.cost_usd", float("nan")),
               42: ("gen_ai.usage.input_tokens", -1),
               63: ("gen_ai.usage.output_tokens", 2**40),
               99: ("loopscope.call.ordinal", 2**40)}
    spans = []
    for i in range(100):
        span = tool_span(os.urandom(16), os.urandom(8), tool="search", args=f'{{"q": {i}}}',
                         result="r", start_ns=START + i)
        span.attributes.add(key="loopscope.episode.id").value.string_value = "ep-mixed"
        if i in poisons:
            key, value = poisons[i]
            member = span.attributes.add(key=key).value
            if isinstance(value, float):
                member.double_value = value
            else:
                member.int_value = value
        spans.append(span)
    status, _, answer = collector.post(request(spans).SerializeToString())
    assert status == 200, answer
    message = _partial_success(answer, "application/x-protobuf")
    assert message.startswith("4 attribute value(s) stored as unknown"), message
    for i, (key, _) in list(poisons.items())[:3]:  # (the answer names three, counts the rest)
        assert f"resourceSpans[0].scopeSpans[0].spans[{i}].attributes['{key}']" in message
    assert message.endswith("(and 1 more)"), message
    assert _stored_spans(collector) == 100
    calls = collector.read("episode_tool_calls", episode_id="ep-mixed")
    assert len(calls) == 100 and {c["call_ordinal"] for c in calls} == {None}
    _every_read_answers(collector)
    collector.stop()
    with duckdb.connect(str(collector.db), read_only=True) as con:
        kept = con.execute(
            "select attributes ->> 'loopscope.unstorable.loopscope.cost_usd', "
            "attributes ->> 'loopscope.cost_usd' from spans "
            "where attributes ->> 'loopscope.unstorable.loopscope.cost_usd' is not null"
        ).fetchall()
    assert kept == [("nan", None)]  # what was sent is kept, as text, and read as unknown


def test_typed_attributes_that_fit_or_are_not_numbers_are_stored(
    collector: CollectorProcess,
) -> None:
    """The bounds are the columns' own: INTEGER's largest value is stored as it is, and text
    that is not a number is not read as one (the call is stored without a step; the span
    keeps the text)."""
    first = collector.post(_typed_poison("loopscope.step", 2**31 - 1))
    assert first[0] == 200, first
    second = collector.post(_typed_poison("loopscope.step", "soon"))
    assert second[0] == 200, second
    steps = sorted(row["step"] is None
                   for row in collector.read("episode_tool_calls", episode_id="ep-typed"))
    assert steps == [False, True]
    rows = collector.read("episode_tool_calls", episode_id="ep-typed")
    assert 2**31 - 1 in [row["step"] for row in rows]


def test_grpc_typed_attribute_poison_is_stored_and_named_in_partial_success(
    collector: CollectorProcess,
) -> None:
    """The same on the gRPC receiver: OK, with ``partial_success`` naming the attribute."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    body, _, says = TYPED_POISONS[0]
    with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        answer = stub.Export(ExportTraceServiceRequest.FromString(body), timeout=30)
    assert answer.partial_success.rejected_spans == 0
    assert says in answer.partial_success.error_message
    assert _stored_spans(collector) == 1


def _unsummable(**attributes: object) -> bytes:
    """One tool span of episode ``ep-sum`` carrying ``attributes`` (ints, floats or text)."""
    span = tool_span(os.urandom(16), os.urandom(8), tool="search", args="{}", result="r",
                     start_ns=START)
    span.attributes.add(key="loopscope.episode.id").value.string_value = "ep-sum"
    for key, value in attributes.items():
        member = span.attributes.add(key=key).value
        if isinstance(value, str):
            member.string_value = value
        elif isinstance(value, float):
            member.double_value = value
        else:
            member.int_value = value  # type: ignore[assignment]
    return request([span]).SerializeToString()


UNSUMMABLE = [
    (_unsummable(**{"gen_ai.usage.input_tokens": 2**63 - 1,
                    "gen_ai.usage.output_tokens": 2**63 - 1}), "application/x-protobuf",
     f"{PATH}.attributes['gen_ai.usage.", "does not fit"),
    (_unsummable(**{"gen_ai.usage.output_tokens": -5}), "application/x-protobuf",
     f"{PATH}.attributes['gen_ai.usage.output_tokens']: -5 does not fit", "token count"),
    (_unsummable(**{"loopscope.cost_usd": float("nan")}), "application/x-protobuf",
     f"{PATH}.attributes['loopscope.cost_usd']: nan is not a finite number", "finite"),
    (_unsummable(**{"loopscope.cost_usd": float("inf")}), "application/x-protobuf",
     f"{PATH}.attributes['loopscope.cost_usd']: inf is not a finite number", "finite"),
    (_unsummable(**{"loopscope.cost_usd": "NaN"}), "application/x-protobuf",
     f"{PATH}.attributes['loopscope.cost_usd']: 'NaN' is not a finite number", "finite"),
    (_typed_poison_json("loopscope.cost_usd", {"doubleValue": "Infinity"}),
     "application/json", f"{PATH}.attributes['loopscope.cost_usd']: inf is not a finite",
     "finite"),
    (_typed_poison_json("loopscope.tool.deadline_s", {"doubleValue": "-Infinity"}),
     "application/json", f"{PATH}.attributes['loopscope.tool.deadline_s']: -inf is not a",
     "finite"),
]


def _strict_json(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"not JSON: a bare {constant}")

    return json.loads(text, parse_constant=refuse)


def _every_read_answers(collector: CollectorProcess) -> None:
    """Every read that needs no parameter answers 200 with strict JSON, and /metrics has the
    store's four gauges."""
    for name, read in collector.get("/v1/reads")["reads"].items():
        if read["required"]:
            continue
        req = urllib.request.Request(f"{collector.url}/v1/reads/{name}")
        with urllib.request.urlopen(req, timeout=30) as response:
            assert response.status == 200, name
            _strict_json(response.read().decode())
    metrics = collector.get("/metrics")
    for gauge in ("loopscope_stopped_runs", "loopscope_false_stopped_runs",
                  "loopscope_false_stop_rate", "loopscope_budget_stopped_runs"):
        assert f"\n{gauge} " in metrics, gauge


@pytest.mark.parametrize(("body", "content_type", "says", "why"), UNSUMMABLE,
                         ids=["tokens-2^63-1", "tokens-negative", "cost-nan", "cost-inf",
                              "cost-nan-text", "cost-inf-json", "deadline-inf-json"])
def test_values_no_read_can_sum_are_stored_as_unknown_naming_the_field(
    collector: CollectorProcess, body: bytes, content_type: str, says: str, why: str,
) -> None:
    """Issue 20, cases 5 and 6: token counts of 2^63-1 (whose sum overflows every read that
    adds them) and a NaN or infinite cost (every sum NaN, a read's answer not JSON) never
    reach a typed column: the span is stored with the value set aside as text and the
    answer's ``partial_success`` names the attribute; afterwards every read answers 200 with
    strict JSON and /metrics keeps its gauges."""
    assert collector.post(episode_request(3)[0].SerializeToString())[0] == 200
    status, _, answer = collector.post(body, content_type=content_type)
    assert status == 200, answer
    text = _partial_success(answer, content_type)
    assert says in text and why in text, text
    assert _stored_spans(collector) == 4
    if content_type != "application/json":
        (row,) = collector.read("episode_tool_calls", episode_id="ep-sum")
        assert row["cost_usd"] is None or "cost" not in says
    _every_read_answers(collector)


def test_the_largest_summable_values_are_stored_and_every_read_sums_them(
    collector: CollectorProcess,
) -> None:
    """The bound is what the reads can sum: a trillion tokens each way on a hundred calls and
    a large finite cost are stored, and every read still answers."""
    for _ in range(100):
        body = _unsummable(**{"gen_ai.usage.input_tokens": 10**12,
                              "gen_ai.usage.output_tokens": 10**12,
                              "loopscope.cost_usd": 1e300})
        assert collector.taken(body)[0] == 200
    assert len(collector.read("episode_tool_calls", episode_id="ep-sum")) == 100
    _every_read_answers(collector)


def _record(span_id: str, *, kind: int = 1) -> SpanRecord:
    return SpanRecord(trace_id="ab" * 16, span_id=span_id, parent_span_id="", name="x",
                      start_ns=START, end_ns=START + 1, kind=kind)


def test_a_request_the_store_refuses_fails_alone(tmp_path: Path) -> None:
    """Spans built past the decoder (kind 200 does not fit tinyint) reach DuckDB in the same
    batch as good requests: the batch is retried request by request, the poison alone gets
    ``Rejected`` (a 400) and the others are stored."""
    db = open_database(tmp_path / "x.duckdb")
    pipeline = Pipeline(db)  # not started: the three jobs are taken as one batch
    try:
        first = pipeline.submit([_record("01" * 8)])
        bad = pipeline.submit([_record("02" * 8, kind=200)])
        last = pipeline.submit([_record("03" * 8)])
        pipeline.start()
        first.wait(30)
        last.wait(30)
        with pytest.raises(Rejected, match="cannot hold"):
            bad.wait(30)
        assert pipeline.stats.spans_rejected == 1
        assert pipeline.stats.spans_stored == 2
    finally:
        pipeline.stop()
    con = db.cursor()
    assert sorted(r[0] for r in con.execute("select span_id from spans").fetchall()) == [
        "01" * 8, "03" * 8]
    db.close()



def test_a_fault_of_detection_fails_no_request_and_only_its_episode_goes_unjudged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the detection core (injected: the monitor raises on one tool) is contained to
    its episode: both requests of the batch are acknowledged, every span is stored, the
    other episode is judged as usual, the faulty one's calls carry no verdict, and
    ``detection_failures`` counts it (a request 503'd for it would be retried forever)."""
    real = EpisodeMonitor.before_call

    def faulty(self: EpisodeMonitor, call: Any) -> Any:
        if call.tool == "explode":
            raise RuntimeError("a bug in the core")
        return real(self, call)

    monkeypatch.setattr(EpisodeMonitor, "before_call", faulty)

    def records(tool: str, trace: bytes) -> list[SpanRecord]:
        spans = [tool_span(trace, os.urandom(8), tool=tool, args='{"q": "same"}',
                           result="same answer", start_ns=START + i * 10_000_000)
                 for i in range(6)]
        return decode_request(request(spans).SerializeToString(),
                              content_type="application/x-protobuf", content_encoding=None,
                              max_bytes=1 << 20)

    db = open_database(tmp_path / "x.duckdb")
    pipeline = Pipeline(db)  # not started: the two jobs are taken as one batch
    try:
        good = pipeline.submit(records("search", b"\x01" * 16))
        bad = pipeline.submit(records("explode", b"\x02" * 16))
        pipeline.start()
        good.wait(30)
        bad.wait(30)  # acknowledged: the spans are stored
        assert pipeline.stats.spans_stored == 12
        assert pipeline.stats.detection_failures == 1
        assert pipeline.health.ok
    finally:
        pipeline.stop()
    con = db.cursor()
    rows = dict(con.execute(
        "select tool, count(collector_progress) from tool_calls group by tool"
    ).fetchall())
    assert rows == {"search": 6, "explode": 0}
    flagged = con.execute("select count(*) from detections").fetchone()
    assert flagged is not None and flagged[0] > 0  # the good episode's spin was judged
    db.close()
