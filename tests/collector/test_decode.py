"""OTLP trace export bodies, as real exporters send them, decode to the right span records."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from collections.abc import Sequence
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from loopscope_collector.normalize.spans import SpanEvent, SpanRecord
from loopscope_collector.receive.decode import (
    DecodeError,
    PayloadTooLarge,
    UnsupportedEncoding,
    UnsupportedMediaType,
    decode_proto_request,
    decode_request,
)

PROTO, JSON = "application/x-protobuf", "application/json"
MAX = 1 << 20
TOOL_ATTRIBUTES = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "search",
    "gen_ai.tool.call.id": "call_1",
    "loopscope.ok": True,
    "loopscope.step": 7,
    "loopscope.score": 0.25,
    "tags": ("a", "b"),
    "flags": (True, False),
    "counts": (1, -2, 2**62),
    "weights": (0.5, 1.5),
}


def decode(body: bytes, content_type: str | None = PROTO, encoding: str | None = None,
           max_bytes: int = MAX) -> list[SpanRecord]:
    return decode_request(
        body, content_type=content_type, content_encoding=encoding, max_bytes=max_bytes
    )


@pytest.fixture
def sdk_spans() -> Sequence[ReadableSpan]:
    """Spans from the real SDK: a server root, a client tool child with an event, two scopes."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "agent-7", "host.n": 3}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = provider.get_tracer("agent", "1.2.3")
    tools = provider.get_tracer("tools")
    with agent.start_as_current_span("invoke_agent", kind=SpanKind.SERVER) as root:
        root.set_status(Status(StatusCode.OK))
        with tools.start_as_current_span("execute_tool search", kind=SpanKind.CLIENT) as span:
            span.set_attributes(TOOL_ATTRIBUTES)
            span.add_event("retry", {"attempt": 2, "reason": "timeout"}, timestamp=123)
            span.set_status(Status(StatusCode.ERROR, "tool failed"))
    provider.shutdown()
    return exporter.get_finished_spans()


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The OTLP JSON for ``spans``, written from the spec: hex ids, int64s as strings."""

    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, float):
            return {"doubleValue": v}
        if isinstance(v, tuple):
            return {"arrayValue": {"values": [value(x) for x in v]}}
        return {"stringValue": v}

    def attributes(attrs: Any) -> list[dict[str, Any]]:
        return [{"key": k, "value": value(v)} for k, v in attrs.items()]

    def span(s: ReadableSpan) -> dict[str, Any]:
        return {
            "traceId": f"{s.context.trace_id:032x}",
            "spanId": f"{s.context.span_id:016x}",
            "parentSpanId": f"{s.parent.span_id:016x}" if s.parent else "",
            "name": s.name,
            "kind": s.kind.value + 1,  # the API's SpanKind starts at INTERNAL = 0
            "startTimeUnixNano": str(s.start_time),
            "endTimeUnixNano": str(s.end_time),
            "attributes": attributes(s.attributes),
            "events": [
                {"timeUnixNano": str(e.timestamp), "name": e.name,
                 "attributes": attributes(e.attributes)}
                for e in s.events
            ],
            "status": {"code": s.status.status_code.value, "message": s.status.description or ""},
            "flags": 256,
        }

    return {"resourceSpans": [{
        "resource": {"attributes": attributes(spans[0].resource.attributes)},
        "scopeSpans": [
            {"scope": {"name": s.instrumentation_scope.name,
                       "version": s.instrumentation_scope.version or ""},
             "spans": [span(s)]}
            for s in spans
        ],
    }]}


def by_id(records: list[SpanRecord]) -> dict[str, SpanRecord]:
    return {r.span_id: r for r in records}


def test_protobuf_from_the_sdk_exporter_keeps_everything(sdk_spans: Sequence[ReadableSpan]):
    records = by_id(decode(encode_spans(sdk_spans).SerializeToString()))
    tool_span, root_span = sdk_spans
    tool = records[f"{tool_span.context.span_id:016x}"]
    root = records[f"{root_span.context.span_id:016x}"]

    assert len(records) == 2
    assert tool.trace_id == root.trace_id == f"{root_span.context.trace_id:032x}"
    assert len(tool.trace_id) == 32 and tool.trace_id == tool.trace_id.lower()
    assert (root.parent_span_id, tool.parent_span_id) == ("", root.span_id)
    assert (root.name, tool.name) == ("invoke_agent", "execute_tool search")
    assert (root.kind, tool.kind) == (2, 3)  # SERVER, CLIENT in OTLP numbering
    assert (root.status_code, tool.status_code, tool.status_message) == (1, 2, "tool failed")
    assert (tool.start_ns, tool.end_ns) == (tool_span.start_time, tool_span.end_time)
    expected = {k: list(v) if isinstance(v, tuple) else v for k, v in TOOL_ATTRIBUTES.items()}
    assert tool.attributes == expected
    assert [type(v) for v in tool.attributes["flags"] + tool.attributes["weights"]] == [
        bool, bool, float, float]
    assert type(tool.attributes["loopscope.step"]) is int
    assert tool.events == [SpanEvent("retry", 123, {"attempt": 2, "reason": "timeout"})]
    assert tool.service_name == "agent-7" and tool.resource["host.n"] == 3
    assert (root.scope_name, root.scope_version) == ("agent", "1.2.3")
    assert (tool.scope_name, tool.scope_version) == ("tools", "")


def test_json_written_from_the_spec_decodes_equal_to_protobuf(sdk_spans: Sequence[ReadableSpan]):
    from_proto = decode(encode_spans(sdk_spans).SerializeToString())
    body = json.dumps(otlp_json(sdk_spans)).encode()
    from_json = decode(body, "application/json; charset=utf-8")
    assert by_id(from_json) == by_id(from_proto)


def test_grpc_path_takes_the_parsed_message(sdk_spans: Sequence[ReadableSpan]):
    request = encode_spans(sdk_spans)
    assert decode_proto_request(request) == decode(request.SerializeToString())


@pytest.mark.parametrize("content_type", [PROTO, JSON])
@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", gzip.compress),
        ("GZIP", lambda b: gzip.compress(b[:10]) + gzip.compress(b[10:])),  # two members
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b, wbits=-15)),  # raw deflate, no zlib header
        ("identity", lambda b: b),
        (None, lambda b: b),
    ],
)
def test_compressed_bodies_decode_the_same(sdk_spans, content_type, encoding, compress):
    plain = (encode_spans(sdk_spans).SerializeToString() if content_type == PROTO
             else json.dumps(otlp_json(sdk_spans)).encode())
    expected = decode(plain, content_type)
    assert len(expected) == 2
    assert decode(compress(plain), content_type, encoding) == expected


@pytest.mark.parametrize(
    ("body", "content_type"),
    [(b"", PROTO), (b"{}", JSON), (b'{"resourceSpans": [{"scopeSpans": [{}]}]}', JSON)],
)
def test_a_request_without_spans_is_empty(body: bytes, content_type: str):
    assert decode(body, content_type) == []


def test_lenient_json_snake_case_enum_names_numbers_nulls_unknown_fields():
    doc = {"resource_spans": [{"resource": None, "schemaUrl": "x", "scope_spans": [{
        "scope": {"name": "s", "version": None},
        "spans": [{
            "trace_id": "5B8EFFF798038103D269B633813FC60C",
            "span_id": "EEE19B7EC3C1B174",
            "parentSpanId": None,
            "name": "n",
            "kind": "SPAN_KIND_CLIENT",
            "start_time_unix_nano": 1544712660000000000,
            "endTimeUnixNano": "1544712661000000000",
            "status": {"code": "STATUS_CODE_ERROR"},
            "futureField": {"ignored": True},
            "attributes": [
                {"key": "i", "value": {"intValue": 42}},
                {"key": "big", "value": {"int_value": "-9223372036854775808"}},
                {"key": "d", "value": {"doubleValue": "NaN"}},
                {"key": "d2", "value": {"doubleValue": 3}},
                {"key": "raw", "value": {"bytesValue": "AP8="}},
                {"key": "kv", "value": {"kvlistValue": {"values": [
                    {"key": "nested", "value": {"arrayValue": {"values": [
                        {"stringValue": "x"}, {"boolValue": False}, {}]}}}]}}},
                {"key": "empty", "value": {}},
            ],
        }],
    }]}]}
    [record] = decode(json.dumps(doc).encode(), JSON)
    assert (record.trace_id, record.span_id) == ("5b8efff798038103d269b633813fc60c",
                                                 "eee19b7ec3c1b174")
    assert (record.parent_span_id, record.kind, record.status_code) == ("", 3, 2)
    assert (record.start_ns, record.end_ns) == (1544712660000000000, 1544712661000000000)
    assert (record.scope_name, record.scope_version, record.resource) == ("s", "", {})
    attrs = record.attributes
    assert (attrs["i"], attrs["big"], attrs["d2"], attrs["raw"]) == (42, -(2**63), 3.0, b"\x00\xff")
    assert attrs["d"] != attrs["d"]  # NaN
    assert attrs["kv"] == {"nested": ["x", False, None]}
    assert attrs["empty"] is None


def span_json(**overrides: Any) -> bytes:
    span = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
            "name": "n", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    valid = dict(span)
    span.update(overrides)
    spans = [valid, valid, span]
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


PATH = "resourceSpans[0].scopeSpans[0].spans[2]"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"a" 1}', "invalid JSON at line 1 column 6"),
        (b"\xff\xfe{", "invalid JSON"),
        (b"[]", "request: expected an object, got an array"),
        (b'{"resourceSpans": {}}', "resourceSpans: expected an array, got an object"),
        (span_json(traceId="5b8e"), f"{PATH}.traceId: not 16 bytes of hex"),
        (span_json(traceId="zz" * 16), f"{PATH}.traceId: not 16 bytes of hex"),
        (span_json(traceId="W47/95gDgQPSabYzgT/GDA"), f"{PATH}.traceId: not 16 bytes of hex"),
        (span_json(spanId="7uGbfsPB*XQ="), f"{PATH}.spanId: not 8 bytes of hex (or base64)"),
        (span_json(traceId="0" * 32), f"{PATH}.traceId: empty or all zero"),
        (span_json(traceId=None), f"{PATH}.traceId: empty or all zero"),
        (span_json(spanId=""), f"{PATH}.spanId: empty or all zero"),
        (span_json(spanId=12), f"{PATH}.spanId: not 8 bytes of hex"),
        (span_json(parentSpanId="abc"), f"{PATH}.parentSpanId: not 8 bytes of hex"),
        (span_json(startTimeUnixNano="soon"), f"{PATH}.startTimeUnixNano: expected an integer"),
        (span_json(endTimeUnixNano=-1), f"{PATH}.endTimeUnixNano: -1 is out of range"),
        (span_json(kind="SPAN_KIND_BOGUS"), f"{PATH}.kind: expected one of SPAN_KIND_UNSPECIFIED"),
        (span_json(status={"code": True}), f"{PATH}.status.code: expected one of"),
        (span_json(name=3), f"{PATH}.name: expected a string, got a number"),
        (span_json(attributes={}), f"{PATH}.attributes: expected an array"),
        (span_json(attributes=[{"key": 1}]), f"{PATH}.attributes[0].key: expected a string"),
        (span_json(attributes=[{"key": "k", "value": {"intValue": "1.5"}}]),
         f"{PATH}.attributes[0].value.intValue: expected an integer"),
        (span_json(attributes=[{"key": "k", "value": {"boolValue": "yes"}}]),
         f"{PATH}.attributes[0].value.boolValue: expected a boolean"),
        (span_json(attributes=[{"key": "k", "value": {"bytesValue": "***"}}]),
         f"{PATH}.attributes[0].value.bytesValue: expected base64"),
        (span_json(attributes=[{"key": "k", "value": {"kvlistValue": {"values": [
            {"key": "a", "value": {"arrayValue": {"values": [{"doubleValue": "x"}]}}}]}}}]),
         f"{PATH}.attributes[0].value.kvlistValue.values[0].value.arrayValue.values[0]"
         ".doubleValue: expected a number"),
        (span_json(events=[{"name": "e", "timeUnixNano": []}]),
         f"{PATH}.events[0].timeUnixNano: expected an integer"),
    ],
)
def test_malformed_json_names_the_problem(body: bytes, message: str):
    with pytest.raises(DecodeError) as info:
        decode(body, JSON)
    assert type(info.value) is DecodeError and info.value.http_status == 400
    assert message in str(info.value)


def test_json_from_protobufs_own_mapping_is_read_with_its_base64_ids(sdk_spans):
    body = json.dumps(MessageToDict(encode_spans(sdk_spans))).encode()  # base64 ids
    read = sorted(decode(body, JSON), key=lambda s: s.span_id)
    expected = sorted(decode(encode_spans(sdk_spans).SerializeToString()),
                      key=lambda s: s.span_id)
    assert [(s.trace_id, s.span_id, s.parent_span_id) for s in read] == [
        (s.trace_id, s.span_id, s.parent_span_id) for s in expected]
    assert any(s.parent_span_id for s in read)  # the child's parent id is read too


def proto_with_span(**fields: Any) -> bytes:
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    scope_spans.spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="ok")
    scope_spans.spans.add(**{"trace_id": b"\x01" * 16, "span_id": b"\x02" * 8, **fields})
    return request.SerializeToString()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x0a\x05\x01", "protobuf: message could not be parsed"),
        (b"\xff" * 20, "protobuf: message could not be parsed"),
        (proto_with_span(trace_id=b"\x01" * 3),
         "resourceSpans[0].scopeSpans[0].spans[1].traceId: not 16 bytes (got 3)"),
        (proto_with_span(trace_id=bytes(16)), "spans[1].traceId: empty or all zero"),
        (proto_with_span(span_id=b""), "spans[1].spanId: empty or all zero"),
        (proto_with_span(parent_span_id=b"\x01" * 9), "spans[1].parentSpanId: not 8 bytes"),
    ],
)
def test_malformed_protobuf_names_the_problem(body: bytes, message: str):
    with pytest.raises(DecodeError) as info:
        decode(body)
    assert type(info.value) is DecodeError
    assert message in str(info.value)


def test_all_zero_parent_means_root_in_protobuf():
    [_, record] = decode(proto_with_span(parent_span_id=bytes(8)))
    assert record.parent_span_id == "" and record.span_id == "02" * 8


@pytest.mark.parametrize("content_type", [None, "", "text/plain", "application/grpc",
                                          "application/jsonx"])
def test_unsupported_content_type_lists_the_accepted_ones(content_type: str | None):
    with pytest.raises(UnsupportedMediaType) as info:
        decode(b"{}", content_type)
    assert info.value.http_status == 415
    assert "application/x-protobuf, application/json" in str(info.value)


@pytest.mark.parametrize("content_type", ["Application/JSON", " application/json ; charset=UTF-8"])
def test_content_type_ignores_case_and_parameters(content_type: str):
    assert decode(b"{}", content_type) == []


def test_unknown_content_encoding_is_415():
    with pytest.raises(UnsupportedEncoding, match="'br'; send gzip, deflate or identity") as info:
        decode(b"{}", JSON, "br")
    assert info.value.http_status == 415 and isinstance(info.value, DecodeError)


@pytest.mark.parametrize(
    ("body", "encoding", "message"),
    [
        (gzip.compress(b"{}" * 100, mtime=0)[:-12], "gzip", "gzip: compressed stream is truncated"),
        (b"not gzip at all", "gzip", "gzip: body could not be decompressed"),
        (b"\x00garbage", "deflate", "deflate: body could not be decompressed"),
        (zlib.compress(b"{}") + b"junk", "deflate", "deflate: unexpected data after"),
    ],
)
def test_broken_compression_is_a_decode_error(body: bytes, encoding: str, message: str):
    with pytest.raises(DecodeError, match=message) as info:
        decode(body, JSON, encoding)
    assert type(info.value) is DecodeError


@pytest.mark.parametrize("encoding", [None, "gzip", "deflate"])
def test_the_size_limit_applies_after_decompression(encoding: str | None):
    body = b"{}" + b" " * 998  # exactly 1000 bytes of JSON
    sent = {None: body, "gzip": gzip.compress(body), "deflate": zlib.compress(body)}[encoding]
    assert decode(sent, JSON, encoding, max_bytes=1000) == []
    with pytest.raises(PayloadTooLarge) as info:
        decode(sent, JSON, encoding, max_bytes=999)
    assert info.value.http_status == 413


def test_a_gzip_bomb_is_stopped_without_inflating_it():
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    bomb = b"".join(compressor.compress(zeros) for _ in range(200)) + compressor.flush()
    assert len(bomb) < 1 << 20  # 200 MB of zeros, under 1 MB on the wire
    tracemalloc.start()
    try:
        with pytest.raises(PayloadTooLarge, match="more than the 4194304 bytes"):
            decode(bomb, PROTO, "gzip", max_bytes=4 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak / 2**20:.1f} MB"
