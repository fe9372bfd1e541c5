"""Turn the body of an OTLP trace export into ``SpanRecord`` objects.

Every receiver ends here: OTLP/HTTP sends protobuf or JSON, maybe gzip- or deflate-compressed,
and OTLP/gRPC hands over an already parsed message. Keeping the decoding in one module means
the two wire formats cannot drift apart (the tests decode the same spans both ways and compare),
and everything downstream sees only the neutral ``SpanRecord``.

Two concerns shape the code. The protobuf path is the hot path, so its attribute conversion is
a tight loop (a string fast path, then ``WhichOneof``). And a body is untrusted input: decompression is incremental
and capped, so a gzip bomb never costs more than ``max_bytes + 1`` bytes, and every error is a
``DecodeError`` subclass whose message names the problem (and, for JSON, where it is), which
the HTTP receiver returns as 400, 413 or 415.

OTLP JSON is read as the OTLP spec defines it: hex ids, 64-bit integers as strings or numbers,
enums as integers. It is lenient where that costs nothing: enum names, snake_case keys and
``null`` for an absent field are accepted, and unknown fields are ignored.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from google.protobuf.message import DecodeError as _ProtoDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from loopscope_collector.spans import SpanEvent, SpanRecord

__all__ = [
    "DecodeError",
    "PayloadTooLarge",
    "UnsupportedEncoding",
    "UnsupportedMediaType",
    "decode_proto_request",
    "decode_request",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_MEDIA_TYPES = {PROTOBUF: PROTOBUF, "application/protobuf": PROTOBUF, JSON: JSON}
_ACCEPTED_TYPES = "application/x-protobuf, application/json"
# zlib's wbits: gzip only; zlib-wrapped deflate (what HTTP's "deflate" means); raw deflate.
_GZIP, _ZLIB, _RAW = 31, 15, -15
_ENCODINGS = {"gzip": _GZIP, "x-gzip": _GZIP, "deflate": _ZLIB, "identity": None, "": None}
_NESTED = frozenset(("array_value", "kvlist_value"))
_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)


class DecodeError(ValueError):
    """The body is not a valid OTLP trace export; the message says what and where (HTTP 400)."""

    http_status = 400


class UnsupportedMediaType(DecodeError):
    """The Content-Type is missing or not one we read (HTTP 415)."""

    http_status = 415


class UnsupportedEncoding(DecodeError):
    """The Content-Encoding is not gzip, deflate or identity (HTTP 415)."""

    http_status = 415


class PayloadTooLarge(DecodeError):
    """The body, after decompression, is larger than the limit (HTTP 413)."""

    http_status = 413


def decode_request(
    body: bytes, *, content_type: str | None, content_encoding: str | None, max_bytes: int
) -> list[SpanRecord]:
    """Decode the body of an OTLP/HTTP ``POST /v1/traces`` into span records.

    Called by the HTTP receiver on its request thread. Pure: no I/O, no shared state.

    Args:
        body: The request body as received.
        content_type: The Content-Type header; parameters and case are ignored.
        content_encoding: The Content-Encoding header: gzip, deflate, identity or None.
        max_bytes: The largest body accepted after decompression.

    Returns:
        One record per span, in request order; ``[]`` for a request without spans.

    Raises:
        UnsupportedMediaType: The content type is missing or not protobuf or JSON.
        UnsupportedEncoding: The content encoding is not one we decode.
        PayloadTooLarge: The decompressed body exceeds ``max_bytes``.
        DecodeError: The body is malformed; the message names the problem.
    """
    media = _MEDIA_TYPES.get((content_type or "").split(";", 1)[0].strip().lower())
    if media is None:
        got = f"{content_type!r}" if content_type else "none"
        raise UnsupportedMediaType(f"unsupported Content-Type {got}; send {_ACCEPTED_TYPES}")
    encoding = (content_encoding or "").strip().lower()
    if encoding not in _ENCODINGS:
        raise UnsupportedEncoding(
            f"unsupported Content-Encoding {content_encoding!r}; send gzip, deflate or identity"
        )
    wbits = _ENCODINGS[encoding]
    if wbits is None:
        if len(body) > max_bytes:
            raise PayloadTooLarge(f"body is {len(body)} bytes, more than the {max_bytes} allowed")
        data: bytes | bytearray = body
    else:
        data = _decompress(body, wbits, max_bytes, encoding)
    if media == PROTOBUF:
        try:
            request = ExportTraceServiceRequest.FromString(data)
        except (_ProtoDecodeError, ValueError, RecursionError) as exc:
            raise DecodeError(f"protobuf: message could not be parsed ({exc})") from None
        return decode_proto_request(request)
    return _decode_json(data)


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


def decode_proto_request(request: ExportTraceServiceRequest) -> list[SpanRecord]:
    """Convert a parsed ``ExportTraceServiceRequest`` into span records.

    Called by the gRPC receiver with the message it parsed, and by ``decode_request``.

    Raises:
        DecodeError: A trace or span id is empty, all zero or of the wrong length; the
            message gives its path, e.g. ``resourceSpans[0].scopeSpans[0].spans[2].traceId``.
    """
    records: list[SpanRecord] = []
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
                        _proto_attributes(span.attributes),
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


# --- JSON ----------------------------------------------------------------------------------


def _decode_json(data: bytes | bytearray) -> list[SpanRecord]:
    try:
        doc = json.loads(data)
    except json.JSONDecodeError as exc:
        raise DecodeError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except UnicodeDecodeError:
        raise DecodeError("invalid JSON: the body is not UTF-8") from None
    except RecursionError:
        raise DecodeError("invalid JSON: nested too deeply") from None
    try:
        return _json_request(_obj(doc, "request"))
    except RecursionError:
        raise DecodeError("AnyValue nested too deeply") from None


def _json_request(doc: dict[str, Any]) -> list[SpanRecord]:
    records: list[SpanRecord] = []
    for r, rs in _items(doc, "resourceSpans", ""):
        p = f"resourceSpans[{r}]"
        resource = _json_attributes(_obj(_get(rs, "resource"), f"{p}.resource"), f"{p}.resource")
        for s, ss in _items(rs, "scopeSpans", p):
            ps = f"{p}.scopeSpans[{s}]"
            scope = _obj(_get(ss, "scope"), f"{ps}.scope")
            scope_name_version = (
                _str(scope, "name", f"{ps}.scope"),
                _str(scope, "version", f"{ps}.scope"),
            )
            for i, span in _items(ss, "spans", ps):
                records.append(_json_span(span, f"{ps}.spans[{i}]", resource, scope_name_version))
    return records


def _json_span(
    span: dict[str, Any], path: str, resource: dict[str, Any], scope: tuple[str, str]
) -> SpanRecord:
    status = _obj(_get(span, "status"), f"{path}.status")
    events = [
        SpanEvent(
            _str(event, "name", f"{path}.events[{e}]"),
            _int(_get(event, "timeUnixNano"), f"{path}.events[{e}].timeUnixNano", _UINT64),
            _json_attributes(event, f"{path}.events[{e}]"),
        )
        for e, event in _items(span, "events", path)
    ]
    return SpanRecord(
        trace_id=_hex_id(span, "traceId", 16, path),
        span_id=_hex_id(span, "spanId", 8, path),
        parent_span_id=_hex_id(span, "parentSpanId", 8, path),
        name=_str(span, "name", path),
        start_ns=_int(_get(span, "startTimeUnixNano"), f"{path}.startTimeUnixNano", _UINT64),
        end_ns=_int(_get(span, "endTimeUnixNano"), f"{path}.endTimeUnixNano", _UINT64),
        kind=_enum(_get(span, "kind"), f"{path}.kind", Span.SpanKind, "SPAN_KIND_"),
        status_code=_enum(
            _get(status, "code"), f"{path}.status.code", Status.StatusCode, "STATUS_CODE_"
        ),
        status_message=_str(status, "message", f"{path}.status"),
        attributes=_json_attributes(span, path),
        events=events,
        resource=dict(resource),
        scope_name=scope[0],
        scope_version=scope[1],
    )


@functools.cache
def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _get(obj: dict[str, Any], key: str) -> Any:
    """``obj[key]`` in lowerCamelCase, else snake_case; ``None`` when absent or null."""
    value = obj.get(key)
    return obj.get(_snake(key)) if value is None else value


def _type(value: Any) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    return "null" if value is None else kinds.get(type(value), "a number")


def _obj(value: Any, path: str) -> dict[str, Any]:
    """``value`` as an object; ``{}`` for null or absent."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DecodeError(f"{path}: expected an object, got {_type(value)}")
    return value


def _items(obj: dict[str, Any], key: str, path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Enumerate the objects in the array ``obj[key]`` (absent or null is empty)."""
    path = f"{path}.{key}" if path else key
    for n, item in enumerate(_list(_get(obj, key), path)):
        yield n, _obj(item, f"{path}[{n}]")


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError(f"{path}: expected an array, got {_type(value)}")
    return value


def _str(obj: dict[str, Any], key: str, path: str) -> str:
    value = _get(obj, key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DecodeError(f"{path}.{key}: expected a string, got {_type(value)}")
    return value


def _int(value: Any, path: str, bounds: tuple[int, int] = _INT64) -> int:
    """A 64-bit integer sent as a number or a decimal string (absent is 0)."""
    if value is None:
        return 0
    number = isinstance(value, (int, str)) and not isinstance(value, bool)
    try:
        result = int(value) if number or (type(value) is float and value.is_integer()) else None
    except ValueError:
        result = None
    if result is None:
        raise DecodeError(f"{path}: expected an integer, got {_type(value)} {value!r}")
    if not bounds[0] <= result <= bounds[1]:
        raise DecodeError(f"{path}: {result} is out of range for a 64-bit integer")
    return result


def _enum(value: Any, path: str, enum: Any, prefix: str) -> int:
    """An enum sent as its number or, leniently, its name (with or without the prefix)."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        name = value.strip().upper()
        for candidate in (name, prefix + name):
            if candidate in enum.DESCRIPTOR.values_by_name:
                return int(enum.Value(candidate))
        if name.isdigit():
            return int(name)
    names = ", ".join(enum.keys())
    raise DecodeError(f"{path}: expected one of {names} or its number, got {value!r}")


_HEX = {16: re.compile(r"[0-9a-fA-F]{32}"), 8: re.compile(r"[0-9a-fA-F]{16}")}


def _hex_id(span: dict[str, Any], key: str, size: int, path: str) -> str:
    """A hex id; ``""`` for an absent parent, ``DecodeError`` for an invalid one."""
    value = _get(span, key)
    if value is None:
        value = ""
    if not isinstance(value, str) or (value and not _HEX[size].fullmatch(value)):
        # base64 (what protobuf's own JSON mapping would produce) is a common mistake
        looks_base64 = isinstance(value, str) and len(value) == 4 * -(-size // 3)
        hint = " (OTLP JSON ids are hex, not base64)" if looks_base64 else ""
        raise DecodeError(f"{path}.{key}: not {size} bytes of hex{hint}: {value!r}")
    if value.strip("0") == "":
        if key == "parentSpanId":
            return ""
        raise DecodeError(f"{path}.{key}: empty or all zero, which OTLP defines as invalid")
    return value.lower()


def _json_attributes(obj: dict[str, Any], path: str, key: str = "attributes") -> dict[str, Any]:
    """Convert the ``KeyValue`` array ``obj[key]`` (attributes, or a kvlist's values)."""
    out: dict[str, Any] = {}
    for a, kv in _items(obj, key, path):
        name = _get(kv, "key")
        if not isinstance(name, str):
            raise DecodeError(f"{path}.{key}[{a}].key: expected a string, got {_type(name)}")
        out[name] = _json_value(_get(kv, "value"), f"{path}.{key}[{a}].value")
    return out


def _json_value(value: Any, path: str) -> Any:
    """Convert one JSON ``AnyValue``; an empty one (no known member) becomes ``None``."""
    value = _obj(value, path)
    for key, convert in _ANY_VALUE:
        member = _get(value, key)
        if member is not None:
            return convert(member, f"{path}.{key}")
    return None


def _typed(kind: type, name: str) -> Callable[[Any, str], Any]:
    def check(value: Any, path: str) -> Any:
        if type(value) is not kind:
            raise DecodeError(f"{path}: expected {name}, got {_type(value)}")
        return value

    return check


def _double(value: Any, path: str) -> float:
    try:  # the protobuf JSON mapping also allows strings: "NaN", "Infinity", "1.5"
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            return float(value)
    except ValueError:
        pass
    raise DecodeError(f"{path}: expected a number, got {_type(value)} {value!r}")


def _base64(value: Any, path: str) -> bytes:
    if isinstance(value, str):  # standard or URL-safe alphabet, padding optional
        text = value.replace("-", "+").replace("_", "/")
        with contextlib.suppress(binascii.Error, ValueError):
            return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    raise DecodeError(f"{path}: expected base64, got {value!r}")


def _array(value: Any, path: str) -> list[Any]:
    values = _list(_get(_obj(value, path), "values"), f"{path}.values")
    return [_json_value(x, f"{path}.values[{n}]") for n, x in enumerate(values)]


_ANY_VALUE: tuple[tuple[str, Callable[[Any, str], Any]], ...] = (
    ("stringValue", _typed(str, "a string")),
    ("boolValue", _typed(bool, "a boolean")),
    ("intValue", _int),
    ("doubleValue", _double),
    ("arrayValue", _array),
    ("kvlistValue", lambda v, p: _json_attributes(_obj(v, p), p, "values")),
    ("bytesValue", _base64),
)
