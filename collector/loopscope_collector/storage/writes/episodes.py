"""The ``episodes`` table: episode rows made or updated from root spans and the calls seen.

Only the pipeline thread calls this, inside its transaction, on its own cursor. The SQL is in
``sql/writes/episodes.sql``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import duckdb
import pyarrow as pa

from ...normalize.rows import EpisodeRow, ToolCallRow
from ..arrow import registered, schema
from ..ducklake.dialect import as_merge, is_lake
from ..queries import statements

EPISODES: Final = schema([
    ("episode_id", pa.string()), ("service", pa.string()), ("agent", pa.string()),
    ("model", pa.string()), ("task_type", pa.string()), ("trace_id", pa.string()),
    ("root_span_id", pa.string()), ("outcome", pa.string()), ("stop_reason", pa.string()),
    ("stop_diagnostic", pa.string()), ("guard_mode", pa.string()), ("convention", pa.string()),
    ("start_ns", pa.int64()), ("end_ns", pa.int64()), ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()), ("cost_usd", pa.float64()), ("scenario_loop", pa.bool_()),
    ("scenario_kind", pa.string()), ("scenario_first_loop_step", pa.int64()),
])
_SQL: Final = statements("episodes")


_LAKE_UPSERT: Final = as_merge(_SQL["upsert"])


def upsert_episodes(
    cur: duckdb.DuckDBPyConnection, roots: Sequence[EpisodeRow], calls: Sequence[ToolCallRow]
) -> None:
    """Create or update episode rows from root spans and from the calls seen."""
    merged: dict[str, dict[str, Any]] = {}
    for call in calls:
        row = merged.setdefault(call.episode_id, {
            "episode_id": call.episode_id, "service": call.service, "trace_id": call.trace_id,
            "start_ns": call.start_ns, "end_ns": call.end_ns, "convention": call.convention,
        })
        row["start_ns"] = min(row["start_ns"], call.start_ns)
        row["end_ns"] = max(row["end_ns"], call.end_ns)
        for name in ("agent", "model", "guard_mode"):
            if getattr(call, name) and not row.get(name):
                row[name] = getattr(call, name)
    for root in roots:
        row = merged.setdefault(root.episode_id, {"episode_id": root.episode_id})
        for name in ("service", "agent", "model", "task_type", "outcome", "stop_reason",
                     "stop_diagnostic", "guard_mode", "convention", "cost_usd",
                     "scenario_loop", "scenario_kind", "scenario_first_loop_step"):
            value = getattr(root, name)
            if value is not None:
                row[name] = value
        row["trace_id"], row["root_span_id"] = root.trace_id, root.span_id
        row["start_ns"] = min(row.get("start_ns", root.start_ns), root.start_ns)
        row["end_ns"] = max(row.get("end_ns", root.end_ns), root.end_ns)
        row["input_tokens"], row["output_tokens"] = root.input_tokens, root.output_tokens
    if not merged:
        return
    batch = pa.Table.from_pylist(
        [{name: row.get(name) for name in EPISODES.names} for row in merged.values()],
        schema=EPISODES,
    )
    with registered(cur, "incoming_episodes", batch):
        cur.execute(_LAKE_UPSERT if is_lake(cur) else _SQL["upsert"])


_AGENTS: Final = pa.schema([("trace_id", pa.string()), ("episode_id", pa.string()),
                           ("agent", pa.string())])


def name_agents(cur: duckdb.DuckDBPyConnection, agents: Mapping[str, tuple[str, str]]) -> None:
    """Name the stored runs that have no agent name: ``agents`` maps a trace id to (its
    episode id, the one agent name its spans carry)."""
    if not agents:
        return
    batch = pa.Table.from_pylist(
        [{"trace_id": t, "episode_id": e, "agent": a} for t, (e, a) in agents.items()],
        schema=_AGENTS)
    with registered(cur, "incoming_agents", batch):
        cur.execute(_SQL["name_agents"])
