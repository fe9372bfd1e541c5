"""The ``export_reports`` and ``incomplete_runs`` tables: what the agents' SDKs say they lost.

Only the pipeline thread calls this, inside its transaction, on its own cursor. Both tables
only grow (one row per report, one per run it names), so a file and a lake store them alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import duckdb
import pyarrow as pa

from loopscope.conventions import DROP_REASONS

from ...normalize.rows import ExportReportRow
from ..arrow import schema
from ..queries import insert_rows

EXPORT_REPORTS: Final = schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("service", pa.string()),
    ("instance", pa.string()), ("time_ns", pa.int64()), ("started", pa.int64()),
    ("exported", pa.int64()), *((f"dropped_{r}", pa.int64()) for r in DROP_REASONS),
])
INCOMPLETE_RUNS: Final = schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("episode_id", pa.string()),
    ("service", pa.string()), ("instance", pa.string()), ("spans_dropped", pa.int64()),
])


def insert_export_reports(cur: duckdb.DuckDBPyConnection,
                          reports: Sequence[ExportReportRow]) -> None:
    """Store new reports and the runs they name (reports already stored are not passed in)."""
    insert_rows(cur, "export_reports", [{
        "trace_id": r.trace_id, "span_id": r.span_id, "service": r.service,
        "instance": r.instance, "time_ns": r.time_ns, "started": r.started,
        "exported": r.exported,
        **{f"dropped_{reason}": r.dropped.get(reason, 0) for reason in DROP_REASONS},
    } for r in reports], EXPORT_REPORTS)
    insert_rows(cur, "incomplete_runs", [{
        "trace_id": r.trace_id, "span_id": r.span_id, "episode_id": run,
        "service": r.service, "instance": r.instance, "spans_dropped": count,
    } for r in reports for run, count in r.runs.items()], INCOMPLETE_RUNS)
