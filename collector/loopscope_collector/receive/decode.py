"""Turn the body of an OTLP trace export into ``SpanRecord`` objects.

Every receiver ends here: OTLP/HTTP sends protobuf or JSON, maybe gzip- or deflate-compressed,
and OTLP/gRPC hands over an already parsed message. Keeping the decoding behind this one
module means the two wire formats cannot drift apart (the tests decode the same spans both ways and compare),
and everything downstream sees only the neutral ``SpanRecord``.

Two concerns shape the code. The protobuf path is the hot path, so its attribute conversion is
a tight loop (a string fast path, then ``WhichOneof``). And a body is untrusted input: decompression is incremental
and capped, so a gzip bomb never costs more than ``max_bytes + 1`` bytes, and every error is a
``DecodeError`` subclass whose message names the problem (and, for JSON, where it is), which
the HTTP receiver returns as 400, 413 or 415.

The OTLP JSON half lives in ``decode_json`` (``decode_request`` hands it the decompressed
body) and the error classes in ``errors``; callers import the decoder and its errors
from this module.
"""

from __future__ import annotations

import contextlib
import logging
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from google.protobuf.message import DecodeError as _ProtoDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from loopscope_collector.normalize.spans import Decoded, SpanEvent, SpanRecord
from loopscope_collector.normalize.typed_attributes import set_aside_unstorable
from loopscope_collector.receive.decode_json import decode_json
from loopscope_collector.receive.errors import (
    AdmissionError,
    DecodeError,
    PayloadTooLarge,
    UnsupportedEncoding,
    UnsupportedMediaType,
)

__all__ = [
    "DecodeError",
    "PayloadTooLarge",
    "UnsupportedEncoding",
    "UnsupportedMediaType",
    "decode_proto_request",
    "decode_request",
    "decoding",
    "export_answer",
    "inflate",
    "span_count",
]

logger = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_MEDIA_TYPES = {PROTOBUF: PROTOBUF, "application/protobuf": PROTOBUF, JSON: JSON}
_ACCEPTED_TYPES = "application/x-protobuf, application/json"
# zlib's wbits: gzip only; zlib-wrapped deflate (what HTTP's "deflate" means); raw deflate.
_GZIP, _ZLIB, _RAW = 31, 15, -15
_ENCODINGS = {"gzip": _GZIP, "x-gzip": _GZIP, "deflate": _ZLIB, "identity": None, "": None}
_NESTED = frozenset(("array_value", "kvlist_value"))


def decode_request(
    body: bytes | bytearray, *, content_type: str | None, content_encoding: str | None,
    max_bytes: int, admit: Callable[[int], None] | None = None,
) -> Decoded:
    """Decode the body of an OTLP/HTTP ``POST /v1/traces`` into span records.

    Called by the HTTP receiver on its request thread. Pure: no I/O, no shared state.

    Args:
        body: The request body as received.
        content_type: The Content-Type header; parameters and case are ignored.
        content_encoding: The Content-Encoding header: gzip, deflate, identity or None.
        max_bytes: The largest body accepted after decompression.
        admit: Told how many spans the body holds once it is parsed, before their records
            are built; it may refuse the request by raising (``limits``: memory).

    Returns:
        One record per span, in request order (empty for a request without spans); its
        ``set_aside`` names each value a typed column could not hold (``Decoded``).

    Raises:
        UnsupportedMediaType: The content type is missing or not protobuf or JSON.
        UnsupportedEncoding: The content encoding is not one we decode.
        PayloadTooLarge: The decompressed body exceeds ``max_bytes``.
        DecodeError: The body is malformed; the message names the problem. Whatever goes
            wrong while decoding is one of these (``decoding``): a body never fails any
            other way, so a client always gets an answer it will not retry for ever.
    """
    with decoding():
        return _decode_request(body, content_type, content_encoding, max_bytes, admit)


@contextlib.contextmanager
def decoding() -> Iterator[None]:
    """The one place a failure to decode becomes a ``DecodeError`` (HTTP 400, gRPC
    INVALID_ARGUMENT): an error the decoder names passes through; any other exception raised
    while decoding untrusted input (a number no type holds, a character ``int`` refuses, a
    case no check foresaw) is the input's too, and is named by its type and message. Only
    running out of memory, and admission refusing it now (``AdmissionError``), are not the
    client's fault."""
    try:
        yield
    except (DecodeError, AdmissionError, MemoryError):
        raise
    except RecursionError:
        raise DecodeError("the request is nested too deeply to decode") from None
    except Exception as exc:
        logger.debug("loopscope collector: a body failed to decode", exc_info=True)
        raise DecodeError(f"the request could not be decoded ({type(exc).__name__}: "
                          f"{str(exc)[:200]})") from None


def media_type(content_type: str | None) -> str | None:
    """``PROTOBUF`` or ``JSON`` for a Content-Type header (parameters and case ignored);
    None for any other."""
    return _MEDIA_TYPES.get((content_type or "").split(";", 1)[0].strip().lower())


def _decode_request(
    body: bytes | bytearray, content_type: str | None, content_encoding: str | None,
    max_bytes: int, admit: Callable[[int], None] | None,
) -> Decoded:
    media = media_type(content_type)
    if media is None:
        got = f"{content_type!r}" if content_type else "none"
        raise UnsupportedMediaType(f"unsupported Content-Type {got}; send {_ACCEPTED_TYPES}")
    data = inflate(body, content_encoding=content_encoding, max_bytes=max_bytes)
    if media == PROTOBUF:
        try:
            # The stub says bytes; protobuf parses any buffer, and bytes() would copy the body.
            request = ExportTraceServiceRequest.FromString(data)  # type: ignore[arg-type]
        except (_ProtoDecodeError, ValueError, RecursionError) as exc:
            raise DecodeError(f"protobuf: message could not be parsed ({exc})") from None
        if admit is not None:
            admit(span_count(request))
        return decode_proto_request(request)
    return decode_json(data, admit)


def span_count(request: ExportTraceServiceRequest) -> int:
    """How many spans a parsed request holds."""
    return sum(len(scope_spans.spans) for resource_spans in request.resource_spans
               for scope_spans in resource_spans.scope_spans)


def inflate(body: bytes | bytearray, *, content_encoding: str | None,
            max_bytes: int) -> bytes | bytearray:
    """``body`` with its Content-Encoding undone, never more than ``max_bytes``.

    The HTTP receiver calls it before ``decode_request`` (then passing no encoding) to learn
    the size of what it is about to decode.

    Raises:
        UnsupportedEncoding: The content encoding is not one we decode.
        PayloadTooLarge: The body, decompressed, exceeds ``max_bytes``.
        DecodeError: The compressed stream is corrupt or truncated.
    """
    encoding = (content_encoding or "").strip().lower()
    if encoding not in _ENCODINGS:
        raise UnsupportedEncoding(
            f"unsupported Content-Encoding {content_encoding!r}; send gzip, deflate or identity"
        )
    wbits = _ENCODINGS[encoding]
    if wbits is None:
        if len(body) > max_bytes:
            raise PayloadTooLarge(f"body is {len(body)} bytes, more than the {max_bytes} allowed")
        return body
    return _decompress(bytes(body), wbits, max_bytes, encoding)


def _decompress(body: bytes, wbits: int, max_bytes: int, encoding: str) -> bytearray:
    """Inflate ``body`` without ever holding more than ``max_bytes + 1`` output bytes."""
    out = bytearray()
    decomp = zlib.decompressobj(wbits)
    data = body
    try:
        while True:
            # max_length is at least 1 here (0 would mean "no limit").
            chunk = decomp.decompress(data, max_bytes + 1 - len(out))
            out += chunk
            if len(out) > max_bytes:
                raise PayloadTooLarge(f"body inflates to more than the {max_bytes} bytes allowed")
            if decomp.eof:
                data = decomp.unused_data
                if not data:
                    return out
                if wbits != _GZIP:
                    raise DecodeError(f"{encoding}: unexpected data after the compressed stream")
                decomp = zlib.decompressobj(wbits)  # a multi-member gzip file
            else:
                data = decomp.unconsumed_tail
                if not data and not chunk:
                    raise DecodeError(f"{encoding}: compressed stream is truncated")
    except zlib.error as exc:
        if wbits == _ZLIB and not out:  # some clients send raw deflate without the zlib header
            return _decompress(body, _RAW, max_bytes, encoding)
        raise DecodeError(f"{encoding}: body could not be decompressed ({exc})") from None


# --- protobuf ------------------------------------------------------------------------------


def export_answer(spans: Decoded) -> ExportTraceServiceResponse:
    """The answer to a stored export: empty, or OTLP's ``partial_success`` with no span
    rejected and a message naming the values set aside (OTLP's way to warn a client)."""
    message = spans.partial_success_message()
    if not message:
        return ExportTraceServiceResponse()
    return ExportTraceServiceResponse(
        partial_success=ExportTracePartialSuccess(rejected_spans=0, error_message=message))


def decode_proto_request(request: ExportTraceServiceRequest) -> Decoded:
    """Convert a parsed ``ExportTraceServiceRequest`` into span records.

    Called by the gRPC receiver with the message it parsed, and by ``decode_request``.

    Raises:
        DecodeError: A trace or span id is empty, all zero or of the wrong length, or a value
            is out of its column's range (a time past 2262, a kind or status code over 127;
            a typed attribute its column cannot hold is set aside instead:
            ``typed_attributes``); the message gives
            its path, e.g. ``resourceSpans[0].scopeSpans[0].spans[2].kind``; its ``spans``
            is the number of spans in the request.
    """
    try:
        with decoding():
            return _proto_records(request)
    except DecodeError as exc:
        exc.spans = span_count(request)
        raise


def _proto_records(request: ExportTraceServiceRequest) -> Decoded:
    records = Decoded()
    append = records.append
    for r, resource_spans in enumerate(request.resource_spans):
        resource = _proto_attributes(resource_spans.resource.attributes)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_spans.scope
            scope_name, scope_version = scope.name, scope.version
            for i, span in enumerate(scope_spans.spans):
                trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
                if (
                    len(trace_id) != 16
                    or trace_id == _ZERO16
                    or len(span_id) != 8
                    or (span_id == _ZERO8 or (parent and len(parent) != 8))
                ):
                    _raise_bad_proto_ids(span, f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]")
                status = span.status
                if (
                    span.start_time_unix_nano > _MAX_NS
                    or span.end_time_unix_nano > _MAX_NS
                    or not _TINYINT_MIN <= span.kind <= _TINYINT_MAX
                    or not _TINYINT_MIN <= status.code <= _TINYINT_MAX
                ):
                    _raise_unstorable(span, f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]")
                attributes = _proto_attributes(span.attributes)
                if wrong := set_aside_unstorable(attributes):
                    path = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                    records.set_aside.extend(f"{path}.{why}" for why in wrong)
                append(
                    SpanRecord(
                        trace_id.hex(),
                        span_id.hex(),
                        "" if not parent or parent == _ZERO8 else parent.hex(),
                        span.name,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        span.kind,
                        status.code,
                        status.message,
                        attributes,
                        [
                            SpanEvent(e.name, e.time_unix_nano, _proto_attributes(e.attributes))
                            for e in span.events
                        ],
                        dict(resource),
                        scope_name,
                        scope_version,
                    )
                )
    return records


_ZERO16, _ZERO8 = bytes(16), bytes(8)
# What the store's columns hold: times are bigint nanoseconds (OTLP's uint64 past 2262 is not),
# kind and status code are tinyint (OTLP's enums are int32).
_MAX_NS = 2**63 - 1
_TINYINT_MIN, _TINYINT_MAX = -128, 127


def _raise_unstorable(span: Span, path: str) -> None:
    for name, value, low, high in (
        ("startTimeUnixNano", span.start_time_unix_nano, 0, _MAX_NS),
        ("endTimeUnixNano", span.end_time_unix_nano, 0, _MAX_NS),
        ("kind", span.kind, _TINYINT_MIN, _TINYINT_MAX),
        ("status.code", span.status.code, _TINYINT_MIN, _TINYINT_MAX),
    ):
        if not low <= value <= high:
            raise DecodeError(f"{path}.{name}: {value} is out of range ({low} to {high})")


def _raise_bad_proto_ids(span: Span, path: str) -> None:
    for name, value, size in (
        ("traceId", span.trace_id, 16),
        ("spanId", span.span_id, 8),
        ("parentSpanId", span.parent_span_id, 8),
    ):
        if name != "parentSpanId" and (not value or value == bytes(size)):
            raise DecodeError(f"{path}.{name}: empty or all zero, which OTLP defines as invalid")
        if value and len(value) != size:
            raise DecodeError(f"{path}.{name}: not {size} bytes (got {len(value)})")


def _proto_attributes(key_values: Iterable[Any]) -> dict[str, Any]:
    """Convert repeated ``KeyValue`` into a dict; the hot loop of the protobuf path.

    Most attributes are strings, so a non-empty ``string_value`` is taken without asking
    ``WhichOneof`` (it is ``""`` whenever another member of the oneof is set).
    """
    out: dict[str, Any] = {}
    for kv in key_values:
        value = kv.value
        text = value.string_value
        if text:
            out[kv.key] = text
            continue
        kind = value.WhichOneof("value")
        if kind is None:
            out[kv.key] = None
        elif kind in _NESTED:
            out[kv.key] = _proto_value(value)
        else:
            out[kv.key] = getattr(value, kind)
    return out


def _proto_value(value: Any) -> Any:
    """Convert one ``AnyValue``: scalars as themselves, arrays to lists, kvlists to dicts."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _proto_attributes(value.kvlist_value.values)
    return getattr(value, kind)
