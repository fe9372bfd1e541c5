"""The ``spans`` table: a span as a row, and spans sent again with other content.

Only the pipeline thread calls these, inside its transaction, on its own cursor.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import duckdb
import pyarrow as pa

from ...normalize.spans import SpanRecord
from ..arrow import registered, schema
from ..queries import statements

SPANS: Final = schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("parent_span_id", pa.string()),
    ("name", pa.string()), ("service", pa.string()), ("start_ns", pa.int64()),
    ("end_ns", pa.int64()), ("kind", pa.int8()), ("status_code", pa.int8()),
    ("status_message", pa.string()), ("attributes", pa.string()), ("resource", pa.string()),
    ("events", pa.string()), ("scope", pa.string()),
])

def _fallback(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes | bytearray) else str(value)


_json: Final = json.JSONEncoder(ensure_ascii=False, default=_fallback,
                                separators=(",", ":")).encode
"""JSON text of an attribute map; one encoder for every span (``json.dumps`` with options
builds a new one per call, a tenth of the ``spans`` rows' cost)."""

_last_resource: tuple[dict[str, Any], str] = ({}, "{}")
"""The last resource encoded and its JSON: the spans of one request share their resource
(one tuple, read and replaced whole, so a second thread can never mix two)."""


def _resource_json(resource: dict[str, Any]) -> str:
    global _last_resource
    last = _last_resource
    if resource == last[0]:
        return last[1]
    text = _json(resource)
    _last_resource = (resource, text)
    return text


def span_row(span: SpanRecord) -> dict[str, Any]:
    """A span as a ``spans`` row."""
    return {
        "trace_id": span.trace_id, "span_id": span.span_id,
        "parent_span_id": span.parent_span_id, "name": span.name,
        "service": span.service_name, "start_ns": span.start_ns, "end_ns": span.end_ns,
        "kind": span.kind, "status_code": span.status_code,
        "status_message": span.status_message or None,
        "attributes": _json(span.attributes), "resource": _resource_json(span.resource),
        "events": _json([{"name": e.name, "time_ns": e.time_ns, "attributes": e.attributes}
                         for e in span.events]) if span.events else None,
        "scope": span.scope_name or None,
    }


_SQL: Final = statements("spans")


def conflicting_spans(cur: duckdb.DuckDBPyConnection, rows: Sequence[dict[str, Any]]) -> list[str]:
    """The span ids among ``rows`` (``span_row`` of spans whose key is already stored) whose
    stored content differs: the same span id sent again with something else in it."""
    if not rows:
        return []
    with registered(cur, "incoming_again", pa.Table.from_pylist(list(rows), schema=SPANS)):
        found = cur.execute(_SQL["conflicting"]).fetchall()
    return [row[0] for row in found]


def existing_keys(
    cur: duckdb.DuckDBPyConnection, pairs: Sequence[tuple[str, str]]
) -> set[tuple[str, str]]:
    """The (trace_id, span_id) pairs among ``pairs`` that are already stored."""
    if not pairs:
        return set()
    found = cur.execute(_SQL["existing_keys"], {"traces": [p[0] for p in pairs],
                                                "spans": [p[1] for p in pairs]}).fetchall()
    return {(t, s) for t, s in found}
