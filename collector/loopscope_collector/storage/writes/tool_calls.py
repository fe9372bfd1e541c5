"""The ``tool_calls`` table: calls stored with the collector's verdicts, and the look-ups the
pipeline makes before it stores more (episodes of traces, shadows, duplicates).

Only the pipeline thread calls these, inside its transaction, on its own cursor. The SQL is in
``sql/writes/tool_calls.sql``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any, Final, Protocol

import duckdb
import pyarrow as pa

from ...normalize.rows import ToolCallRow
from ..arrow import registered, schema
from ..queries import by_episode, insert_statements, statements

TOOL_CALLS: Final = schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("episode_id", pa.string()),
    ("service", pa.string()), ("agent", pa.string()), ("model", pa.string()),
    ("tool", pa.string()), ("call_id", pa.string()), ("kind", pa.string()),
    ("step", pa.int32()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
    ("convention", pa.string()), ("signature", pa.string()), ("args_text", pa.string()),
    ("output_hash", pa.string()), ("output_text", pa.string()), ("output_size", pa.int32()),
    ("content_captured", pa.bool_()), ("status", pa.string()), ("error_message", pa.string()),
    ("guard_mode", pa.string()), ("guard_action", pa.string()), ("guard_decision", pa.string()),
    ("guard_reason", pa.string()), ("guard_flags", pa.list_(pa.string())),
    ("progress", pa.string()), ("streak", pa.int32()), ("idempotency_key", pa.string()),
    ("write_status", pa.string()), ("intent", pa.string()), ("deadline_s", pa.float64()),
    ("deadline_stated", pa.bool_()),
    ("turn", pa.int32()), ("reconciles", pa.string()), ("found", pa.bool_()),
    ("tokens_in", pa.int64()),
    ("tokens_out", pa.int64()), ("cost_usd", pa.float64()), ("dedup_key", pa.string()),
    ("collector_progress", pa.string()), ("collector_streak", pa.int32()),
    ("collector", pa.string()), ("call_ordinal", pa.int32()),
])
_COLLECTOR_COLUMNS: Final = ("dedup_key", "collector_progress", "collector_streak", "collector")
"""The columns the collector fills (the rest are a ``ToolCallRow``'s fields of those names)."""
_ROW_COLUMNS: Final = tuple(name for name in TOOL_CALLS.names if name not in _COLLECTOR_COLUMNS)
_ROW_FIELDS: Final = frozenset(f.name for f in fields(ToolCallRow))
_SQL: Final = statements("tool_calls")


class CallVerdict(Protocol):
    """What the store keeps of detection's verdict on a call (``detection.CallDetection``)."""

    @property
    def row(self) -> ToolCallRow: ...
    @property
    def signature(self) -> str: ...
    @property
    def progress(self) -> str | None: ...
    @property
    def streak(self) -> int: ...


def insert_tool_calls(
    cur: duckdb.DuckDBPyConnection,
    rows: Sequence[ToolCallRow],
    verdicts: Mapping[str, CallVerdict],
    dedup_keys: Mapping[str, str],
    collector: str | None = None,
    on_conflict: str = "ignore",
) -> int:
    """Insert tool calls with the collector's verdicts, built column by column (no dict per
    row: this is the pipeline's widest table and its hottest insert); ``collector`` names
    the instance storing them (``episodes_stored_elsewhere``); ``on_conflict`` as
    ``queries.insert_statements`` takes it."""
    if not rows:
        return 0
    columns: dict[str, list[Any]] = {
        name: [getattr(row, name) for row in rows] for name in _ROW_COLUMNS
    }
    found = [verdicts.get(row.span_id) for row in rows]
    columns["signature"] = [  # the core's, under the policy, when it saw the arguments
        v.signature if v is not None and row.args_text is not None else row.signature
        for row, v in zip(rows, found, strict=True)]
    columns["dedup_key"] = [dedup_keys.get(row.span_id) for row in rows]
    columns["collector_progress"] = [(v.progress or "none") if v else None for v in found]
    columns["collector_streak"] = [v.streak if v else None for v in found]
    columns["collector"] = [collector] * len(rows)
    with registered(cur, "incoming_tool_calls", pa.table(columns, schema=TOOL_CALLS)) as batch:
        for sql in insert_statements(cur, "tool_calls", "incoming_tool_calls",
                                     on_conflict=on_conflict):
            cur.execute(sql)
    return batch.num_rows


def load_tool_calls(
    cur: duckdb.DuckDBPyConnection, episode_ids: Sequence[str]
) -> dict[str, list[ToolCallRow]]:
    """The stored tool calls of these episodes (to rebuild their detection state), in one
    query; episodes with none are absent from the result."""
    def row(data: dict[str, Any]) -> ToolCallRow:
        data["guard_flags"] = list(data.get("guard_flags") or [])
        return ToolCallRow(**data)

    return by_episode(cur, _SQL["load"], episode_ids, _ROW_FIELDS, row)


def episodes_stored_elsewhere(
    cur: duckdb.DuckDBPyConnection, episode_ids: Sequence[str], collector: str
) -> dict[str, str]:
    """Among these episodes, those with calls another collector instance stored, and that
    instance (one of them): an episode routed to two collectors."""
    if not episode_ids:
        return {}
    found = cur.execute(_SQL["episodes_stored_elsewhere"],
                        {"episode_ids": list(episode_ids), "me": collector}).fetchall()
    return dict(found)


def loopscope_spans_of_traces(
    cur: duckdb.DuckDBPyConnection, traces: Sequence[str]
) -> list[tuple[str, str, int, int]]:
    """(trace, tool, start, end) of the stored loopscope tool calls in these traces."""
    if not traces:
        return []
    found = cur.execute(_SQL["loopscope_spans_of_traces"], {"traces": list(traces)}).fetchall()
    return [(trace, tool, start, end) for trace, tool, start, end in found]


def foreign_calls_of_traces(
    cur: duckdb.DuckDBPyConnection, traces: Sequence[str]
) -> list[ToolCallRow]:
    """The stored tool calls of other instrumentations than loopscope's in these traces
    (their ids, episode, tool and times only): the candidates to be a loopscope call's
    shadow (``assembly.shadowed``)."""
    if not traces:
        return []
    found = cur.execute(_SQL["foreign_calls_of_traces"], {"traces": list(traces)}).fetchall()
    return [ToolCallRow(*row) for row in found]


def delete_calls(cur: duckdb.DuckDBPyConnection, rows: Sequence[ToolCallRow]) -> set[str]:
    """Delete these stored tool calls and their detections (a shadow of a loopscope call);
    an episode row made only for them goes too. Returns the episodes they belonged to."""
    if not rows:
        return set()
    keys = {"trace_id": [r.trace_id for r in rows], "span_id": [r.span_id for r in rows]}
    with registered(cur, "shadowed", keys):
        cur.execute(_SQL["delete_shadowed_calls"])
        cur.execute(_SQL["delete_shadowed_detections"])
    emptied = {r.episode_id for r in rows}
    with registered(cur, "emptied", {"episode_id": list(emptied)}):
        cur.execute(_SQL["delete_emptied_episodes"])
    return emptied


def stored_dedup_keys(cur: duckdb.DuckDBPyConnection, keys: Sequence[str]) -> set[str]:
    """The keys among ``keys`` that a stored tool call already has (one call, two reports)."""
    if not keys:
        return set()
    found = cur.execute(_SQL["stored_dedup_keys"], {"keys": list(keys)}).fetchall()
    return {row[0] for row in found}


def episodes_of_traces(cur: duckdb.DuckDBPyConnection, traces: Sequence[str]) -> dict[str, str]:
    """For traces already stored, the episode their calls belong to."""
    if not traces:
        return {}
    found = cur.execute(_SQL["episodes_of_traces"], {"traces": list(traces)}).fetchall()
    return dict(found)


_REBIND: Final = ("rebind_tool_calls", "rebind_detections", "rebind_guard_decisions",
                  "rebind_unknown_writes", "delete_bare_episode")


def rebind_traces(
    cur: duckdb.DuckDBPyConnection, roots: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """For each (trace id, episode id) in order, move the calls stored under the bare trace
    id to the episode (the first root of a trace takes them); returns the pairs that moved
    calls. The traces with such calls are looked up in one statement for the batch."""
    if not roots:
        return []
    bare = {row[0] for row in cur.execute(
        _SQL["bare_traces"], {"traces": list({t for t, _ in roots})}).fetchall()}
    # fetchall: DuckDB 2.0.1 refuses new work while a result is unfinished
    moved = []
    for trace_id, episode_id in roots:
        if trace_id in bare:
            bare.discard(trace_id)
            params = {"t": trace_id, "e": episode_id}
            for name in _REBIND:  # (each statement takes only the parameters it names)
                cur.execute(_SQL[name],
                            {k: v for k, v in params.items() if f"${k}" in _SQL[name]})
            moved.append((trace_id, episode_id))
    return moved


def update_verdicts(cur: duckdb.DuckDBPyConnection, verdicts: Sequence[CallVerdict]) -> None:
    """Rewrite the collector's verdict on calls stored earlier (after a re-evaluation)."""
    if not verdicts:
        return
    batch = pa.table({
        "trace_id": [v.row.trace_id for v in verdicts],
        "span_id": [v.row.span_id for v in verdicts],
        "progress": [v.progress or "none" for v in verdicts],
        "streak": pa.array([v.streak for v in verdicts], pa.int32()),
    })
    with registered(cur, "incoming_verdicts", batch):
        cur.execute(_SQL["update_verdicts"])
