"""The ``episodes`` table: episode rows made or updated from root spans and the calls seen.

Only the pipeline thread calls this, inside its transaction, on its own cursor. The SQL is in
``sql/writes/episodes.sql``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
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
    # the batch's new calls of the run, summed (the call facts: ddl/016_episodes_call_facts)
    ("tool_calls", pa.int32()), ("numbered_calls", pa.int32()),
    ("max_call_ordinal", pa.int32()), ("priced_calls", pa.int32()),
    ("calls_cost_usd", pa.float64()), ("calls_tokens_in", pa.int64()),
    ("calls_tokens_out", pa.int64()), ("calls_by_tool", pa.map_(pa.string(), pa.int32())),
])
_SQL: Final = statements("episodes")


_LAKE_UPSERT: Final = as_merge(_SQL["upsert"])


def _sum(total: Any, value: Any) -> Any:
    """A sum that stays None until a value is reported (SQL's sum over nulls)."""
    return total if value is None else value if total is None else total + value


def _add_call(row: dict[str, Any], call: ToolCallRow) -> None:
    """Add one new call to its run's call facts (the upsert adds them to the stored ones)."""
    row["tool_calls"] += 1
    if call.call_ordinal is not None:
        row["numbered_calls"] += 1
        highest = row["max_call_ordinal"]
        row["max_call_ordinal"] = (call.call_ordinal if highest is None
                                   else max(highest, call.call_ordinal))
    if call.cost_usd is not None:
        row["priced_calls"] += 1
    row["calls_cost_usd"] = _sum(row["calls_cost_usd"], call.cost_usd)
    row["calls_tokens_in"] = _sum(row["calls_tokens_in"], call.tokens_in)
    row["calls_tokens_out"] = _sum(row["calls_tokens_out"], call.tokens_out)
    row["calls_by_tool"][call.tool] = row["calls_by_tool"].get(call.tool, 0) + 1


_NO_CALLS: Final = {"tool_calls": 0, "numbered_calls": 0, "max_call_ordinal": None,
                    "priced_calls": 0, "calls_cost_usd": None, "calls_tokens_in": None,
                    "calls_tokens_out": None}


def upsert_episodes(
    cur: duckdb.DuckDBPyConnection, roots: Sequence[EpisodeRow], calls: Sequence[ToolCallRow]
) -> None:
    """Create or update episode rows from root spans and from the calls seen: ``calls`` are
    the batch's new calls (stored once each), added to their runs' call facts."""
    merged: dict[str, dict[str, Any]] = {}
    for call in calls:
        row = merged.setdefault(call.episode_id, {
            "episode_id": call.episode_id, "service": call.service, "trace_id": call.trace_id,
            "start_ns": call.start_ns, "end_ns": call.end_ns, "convention": call.convention,
            **_NO_CALLS, "calls_by_tool": {},
        })
        row["start_ns"] = min(row["start_ns"], call.start_ns)
        row["end_ns"] = max(row["end_ns"], call.end_ns)
        for name in ("agent", "model", "guard_mode"):
            if getattr(call, name) and not row.get(name):
                row[name] = getattr(call, name)
        _add_call(row, call)
    for root in roots:
        row = merged.setdefault(root.episode_id, {"episode_id": root.episode_id, **_NO_CALLS})
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
        [{name: row.get(name) or None if name == "calls_by_tool" else row.get(name)
          for name in EPISODES.names} for row in merged.values()],
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


def recount_calls(cur: duckdb.DuckDBPyConnection, episode_ids: Collection[str] | None) -> None:
    """Count the call facts of these runs (None: every run) again from their stored calls:
    after their calls were moved or deleted, an import, or the migration to version 16."""
    if episode_ids is None:
        # to_arrow_table: a relation has it on 1.4.4 and 2.0.1; 2.0.1 has no fetch_arrow_table
        ids = cur.sql("select episode_id from episodes").to_arrow_table()
    elif not episode_ids:
        return
    else:
        ids = pa.table({"episode_id": pa.array(list(episode_ids), pa.string())})
    with registered(cur, "recount_ids", ids):
        cur.execute(_SQL["recount_calls"])
