"""The ``unknown_writes`` and ``reconciles`` tables: UNKNOWN writes recorded, and settled by a
reconcile or by a successful retry.

Only the pipeline thread calls this, inside its transaction, on its own cursor. The SQL is in
``sql/writes/unknown_writes.sql``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import duckdb
import pyarrow as pa

from ...normalize.rows import ReconcileRow, ToolCallRow
from ..arrow import schema
from ..queries import insert_rows, statements

UNKNOWN_WRITES: Final = schema([
    ("idempotency_key", pa.string()), ("episode_id", pa.string()), ("service", pa.string()),
    ("tool", pa.string()), ("trace_id", pa.string()), ("span_id", pa.string()),
    ("unknown_at_ns", pa.int64()),
])

RECONCILES: Final = schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("episode_id", pa.string()),
    ("service", pa.string()), ("reconcile_key", pa.string()), ("found", pa.bool_()),
    ("time_ns", pa.int64()),
])


_SQL: Final = statements("unknown_writes")


def write_unknown_writes(
    cur: duckdb.DuckDBPyConnection, calls: Sequence[ToolCallRow],
    reconciles: Sequence[ReconcileRow],
) -> None:
    """Record UNKNOWN writes, and settle them by reconcile or by a successful retry."""
    unknown = [{
        "idempotency_key": c.idempotency_key, "episode_id": c.episode_id, "service": c.service,
        "tool": c.tool, "trace_id": c.trace_id, "span_id": c.span_id,
        "unknown_at_ns": c.end_ns,
    } for c in calls if c.write_status == "unknown" and c.idempotency_key]
    insert_rows(cur, "unknown_writes", unknown, UNKNOWN_WRITES)
    insert_rows(cur, "reconciles", [{
        "trace_id": r.trace_id, "span_id": r.span_id, "episode_id": r.episode_id,
        "service": r.service, "reconcile_key": r.key, "found": r.found, "time_ns": r.time_ns,
    } for r in reconciles], RECONCILES)
    for r in reconciles:
        cur.execute(
            _SQL["resolve_by_reconcile"],
            {"t": r.time_ns, "k": r.key, "trace": r.trace_id,
             "how": "reconciled_lookup" if r.found is None
             else "reconciled_found" if r.found else "reconciled_absent"},
        )
    for c in calls:
        if c.write_status == "ok" and c.idempotency_key:
            cur.execute(
                _SQL["resolve_by_retry"],
                {"t": c.end_ns, "k": c.idempotency_key},
            )
