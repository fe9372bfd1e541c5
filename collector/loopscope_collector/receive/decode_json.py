"""Turn the body of an OTLP/JSON trace export into ``SpanRecord`` objects.

The JSON half of ``decode``, which owns the entry points (``decode_request`` hands the
decompressed body here) and the protobuf path. Kept in a module of its own because reading
JSON field by field, with a path for every error, is a concept apart from the protobuf hot path.

OTLP JSON is read as the OTLP spec defines it: hex ids, 64-bit integers as strings or numbers,
enums as integers. It is lenient where that costs nothing: base64 ids (protobuf's own JSON
mapping), enum names, snake_case keys and ``null`` for an absent field are accepted, and
unknown fields are ignored. Every error is a
``DecodeError`` whose message names the problem and where it is.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from loopscope_collector.normalize.spans import Decoded, SpanEvent, SpanRecord
from loopscope_collector.normalize.typed_attributes import set_aside_unstorable
from loopscope_collector.receive.errors import DecodeError

__all__ = ["decode_json"]

_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)
_TIME_NS = (0, 2**63 - 1)
"""Span times are OTLP uint64, stored as DuckDB ``bigint``: past 2262 they cannot be held."""
_TINYINT = (-128, 127)
"""Span kind and status code are stored as ``tinyint``."""


def decode_json(
    data: bytes | bytearray, admit: Callable[[int], None] | None = None
) -> Decoded:
    """The span records of an OTLP JSON body; ``admit`` is told how many spans the body
    holds before they are built (it may refuse by raising)."""
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
    except ValueError as exc:  # a number literal too long to convert (over 4,300 digits)
        raise DecodeError(f"invalid JSON: {exc}") from None
    if admit is not None:
        admit(_span_count(doc))
    try:
        return _json_request(_obj(doc, "request"))
    except RecursionError:
        raise DecodeError("AnyValue nested too deeply", spans=_span_count(doc)) from None
    except DecodeError as exc:
        exc.spans = _span_count(doc)
        raise


def _span_count(doc: Any) -> int:
    """How many spans a refused request holds, as far as its shape allows counting them."""
    count = 0
    for rs in _lenient_list(doc, "resourceSpans"):
        for ss in _lenient_list(rs, "scopeSpans"):
            count += len(_lenient_list(ss, "spans"))
    return count


def _lenient_list(obj: Any, key: str) -> list[Any]:
    value = _get(obj, key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []


def _json_request(doc: dict[str, Any]) -> Decoded:
    records = Decoded()
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
                records.append(_json_span(span, f"{ps}.spans[{i}]", resource, scope_name_version,
                                          records.set_aside))
    return records


def _json_span(
    span: dict[str, Any], path: str, resource: dict[str, Any], scope: tuple[str, str],
    set_aside: list[str],
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
    attributes = _json_attributes(span, path)
    set_aside.extend(f"{path}.{wrong}" for wrong in set_aside_unstorable(attributes))
    return SpanRecord(
        trace_id=_hex_id(span, "traceId", 16, path),
        span_id=_hex_id(span, "spanId", 8, path),
        parent_span_id=_hex_id(span, "parentSpanId", 8, path),
        name=_str(span, "name", path),
        start_ns=_int(_get(span, "startTimeUnixNano"), f"{path}.startTimeUnixNano", _TIME_NS),
        end_ns=_int(_get(span, "endTimeUnixNano"), f"{path}.endTimeUnixNano", _TIME_NS),
        kind=_enum(_get(span, "kind"), f"{path}.kind", Span.SpanKind, "SPAN_KIND_"),
        status_code=_enum(
            _get(status, "code"), f"{path}.status.code", Status.StatusCode, "STATUS_CODE_"
        ),
        status_message=_str(status, "message", f"{path}.status"),
        attributes=attributes,
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
    return _text(value, f"{path}.{key}")


def _text(value: str, path: str) -> str:
    """``value``, if it is valid Unicode: JSON may escape a lone surrogate (``"\\ud800"``),
    which no UTF-8 text, and so no stored string, can hold."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DecodeError(f"{path}: a lone surrogate {value[exc.start]!r} at character "
                              f"{exc.start}, which is not valid Unicode") from None
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
        raise DecodeError(f"{path}: expected an integer, got {_type(value)} {_short(value)}")
    if not bounds[0] <= result <= bounds[1]:
        raise DecodeError(f"{path}: {result} is out of range ({bounds[0]} to {bounds[1]})")
    return result


def _enum(value: Any, path: str, enum: Any, prefix: str) -> int:
    """An enum sent as its number or, leniently, its name (with or without the prefix)."""
    if value is None:
        return 0
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        name = value.strip().upper()
        for candidate in (name, prefix + name):
            if candidate in enum.DESCRIPTOR.values_by_name:
                return int(enum.Value(candidate))
        if name.isascii() and name.isdigit():  # ('²'.isdigit() is true, int('²') fails)
            number = int(name)
    if number is not None:
        if not _TINYINT[0] <= number <= _TINYINT[1]:
            low, high = _TINYINT
            raise DecodeError(f"{path}: {number} is out of range ({low} to {high})")
        return number
    names = ", ".join(enum.keys())
    raise DecodeError(f"{path}: expected one of {names} or its number, got {_short(value)}")


_HEX = {16: re.compile(r"[0-9a-fA-F]{32}"), 8: re.compile(r"[0-9a-fA-F]{16}")}


def _hex_id(span: dict[str, Any], key: str, size: int, path: str) -> str:
    """A hex id; ``""`` for an absent parent, ``DecodeError`` for an invalid one.

    OTLP JSON writes ids in hex; protobuf's own JSON mapping (``MessageToDict``, many
    exporters' "JSON" option) writes them as base64. The two cannot be confused (16 bytes are
    32 hex digits or 24 base64 characters; 8 bytes 16 or 12), so base64 ids are read too.
    """
    value = _get(span, key)
    if value is None:
        value = ""
    if isinstance(value, str) and len(value) == 4 * -(-size // 3):
        value = _base64_id(value, size) or value
    if not isinstance(value, str) or (value and not _HEX[size].fullmatch(value)):
        raise DecodeError(f"{path}.{key}: not {size} bytes of hex (or base64): {value!r}")
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
        name = _text(name, f"{path}.{key}[{a}].key")
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
        return _text(value, path) if isinstance(value, str) else value

    return check


def _double(value: Any, path: str) -> float:
    try:  # the protobuf JSON mapping also allows strings: "NaN", "Infinity", "1.5"
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            return float(value)
    except ValueError:
        pass
    except OverflowError:  # an integer literal past the largest double (1 and 400 zeros)
        raise DecodeError(f"{path}: {_short(value)} is out of range for a double") from None
    raise DecodeError(f"{path}: expected a number, got {_type(value)} {_short(value)}")


def _short(value: Any) -> str:
    """``repr(value)``, cut to 60 characters for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _base64_id(text: str, size: int) -> str | None:
    """``text`` as hex when it is ``size`` bytes of base64, else None."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) == size else None


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
