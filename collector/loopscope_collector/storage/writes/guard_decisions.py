"""The ``guard_decisions`` table: the decisions in-process guards reported on their spans.

Only the pipeline thread calls this, inside its transaction, on its own cursor.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import duckdb
import pyarrow as pa

from ...normalize.rows import ToolCallRow
from ..arrow import schema
from ..queries import insert_rows

GUARD_DECISIONS: Final = schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("episode_id", pa.string()),
    ("service", pa.string()), ("tool", pa.string()), ("mode", pa.string()),
    ("action", pa.string()), ("decision", pa.string()), ("reason", pa.string()),
    ("flags", pa.list_(pa.string())), ("time_ns", pa.int64()),
])

def write_guard_decisions(cur: duckdb.DuckDBPyConnection, rows: Iterable[ToolCallRow]) -> int:
    """Store the decisions in-process guards reported on their spans."""
    decisions = [{
        "trace_id": r.trace_id, "span_id": r.span_id, "episode_id": r.episode_id,
        "service": r.service, "tool": r.tool, "mode": r.guard_mode, "action": r.guard_action,
        "decision": r.guard_decision, "reason": r.guard_reason, "flags": r.guard_flags or None,
        "time_ns": r.start_ns,
    } for r in rows if r.guard_action is not None]
    return insert_rows(cur, "guard_decisions", decisions, GUARD_DECISIONS)
