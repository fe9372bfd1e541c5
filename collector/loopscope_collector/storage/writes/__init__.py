"""The pipeline's batch writers, one module per table: rows in, one Arrow-backed statement per
table and batch, the SQL beside the reads in ``sql/writes/TABLE.sql``.

Only the pipeline thread calls these, inside its transaction, on its own cursor.
"""

from .detections import DETECTIONS, write_detections
from .episodes import EPISODES, name_agents, recount_calls, upsert_episodes
from .export_reports import EXPORT_REPORTS, INCOMPLETE_RUNS, insert_export_reports
from .guard_decisions import GUARD_DECISIONS, write_guard_decisions
from .labels import LABEL_VALUES, LABELS, write_labels
from .messages import MESSAGES, insert_messages, load_messages
from .spans import SPANS, conflicting_spans, existing_keys, span_row
from .tool_calls import (
    TOOL_CALLS,
    delete_calls,
    episodes_of_traces,
    episodes_stored_elsewhere,
    foreign_calls_of_traces,
    insert_tool_calls,
    load_tool_calls,
    loopscope_spans_of_traces,
    rebind_traces,
    stored_dedup_keys,
    update_verdicts,
)
from .unknown_writes import RECONCILES, UNKNOWN_WRITES, write_unknown_writes

__all__ = [
    "DETECTIONS", "EPISODES", "EXPORT_REPORTS", "GUARD_DECISIONS", "INCOMPLETE_RUNS", "LABELS", "LABEL_VALUES", "MESSAGES",
    "RECONCILES", "SPANS",
    "TOOL_CALLS", "UNKNOWN_WRITES", "conflicting_spans", "delete_calls", "episodes_of_traces",
    "episodes_stored_elsewhere",
    "existing_keys", "foreign_calls_of_traces", "insert_export_reports", "insert_messages", "insert_tool_calls",
    "load_messages", "load_tool_calls", "loopscope_spans_of_traces", "name_agents",
    "rebind_traces", "recount_calls", "span_row", "stored_dedup_keys", "update_verdicts", "upsert_episodes",
    "write_detections", "write_guard_decisions", "write_labels", "write_unknown_writes",
]
