"""The pipeline's batch writers: rows in, one Arrow-backed statement per table and batch.

Only the pipeline thread calls these, inside its transaction, on its own cursor.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import duckdb
import pyarrow as pa

from ..rows import EpisodeRow, ReconcileRow, ToolCallRow
from ..spans import SpanRecord
from .queries import insert_rows

if TYPE_CHECKING:
    from ..detection import EpisodeResult, Verdict

SPANS: Final = pa.schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("parent_span_id", pa.string()),
    ("name", pa.string()), ("service", pa.string()), ("start_ns", pa.int64()),
    ("end_ns", pa.int64()), ("kind", pa.int8()), ("status_code", pa.int8()),
    ("status_message", pa.string()), ("attributes", pa.string()), ("resource", pa.string()),
    ("events", pa.string()), ("scope", pa.string()),
])

TOOL_CALLS: Final = pa.schema([
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
    ("turn", pa.int32()), ("reconciles", pa.string()), ("found", pa.bool_()),
    ("tokens_in", pa.int64()),
    ("tokens_out", pa.int64()), ("cost_usd", pa.float64()), ("dedup_key", pa.string()),
    ("collector_progress", pa.string()), ("collector_streak", pa.int32()),
])

DETECTIONS: Final = pa.schema([
    ("episode_id", pa.string()), ("trace_id", pa.string()), ("span_id", pa.string()),
    ("ordinal", pa.int32()), ("detector", pa.string()), ("kind", pa.string()),
    ("severity", pa.string()), ("action", pa.string()), ("message", pa.string()),
])

GUARD_DECISIONS: Final = pa.schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("episode_id", pa.string()),
    ("service", pa.string()), ("tool", pa.string()), ("mode", pa.string()),
    ("action", pa.string()), ("decision", pa.string()), ("reason", pa.string()),
    ("flags", pa.list_(pa.string())), ("time_ns", pa.int64()),
])

UNKNOWN_WRITES: Final = pa.schema([
    ("idempotency_key", pa.string()), ("episode_id", pa.string()), ("service", pa.string()),
    ("tool", pa.string()), ("trace_id", pa.string()), ("span_id", pa.string()),
    ("unknown_at_ns", pa.int64()),
])

RECONCILES: Final = pa.schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("episode_id", pa.string()),
    ("service", pa.string()), ("reconcile_key", pa.string()), ("found", pa.bool_()),
    ("time_ns", pa.int64()),
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


_SPAN_CONTENT: Final = ("parent_span_id", "name", "start_ns", "end_ns", "kind", "status_code",
                        "status_message", "attributes", "resource", "events", "scope")


def conflicting_spans(cur: duckdb.DuckDBPyConnection, rows: Sequence[dict[str, Any]]) -> list[str]:
    """The span ids among ``rows`` (``span_row`` of spans whose key is already stored) whose
    stored content differs: the same span id sent again with something else in it."""
    if not rows:
        return []
    cur.register("incoming_again", pa.Table.from_pylist(list(rows), schema=SPANS))
    try:
        differs = " or ".join(f"s.{c}::varchar is distinct from i.{c}::varchar"
                              for c in _SPAN_CONTENT)  # fixed names, never input
        found = cur.execute(
            "select i.span_id from spans s join incoming_again i"
            f" on s.trace_id = i.trace_id and s.span_id = i.span_id where {differs}"
        ).fetchall()
    finally:
        cur.unregister("incoming_again")
    return [row[0] for row in found]


def insert_tool_calls(
    cur: duckdb.DuckDBPyConnection,
    rows: Sequence[ToolCallRow],
    verdicts: Mapping[str, Verdict],
    dedup_keys: Mapping[str, str],
) -> int:
    """Insert tool calls with the collector's verdicts, built column by column (no dict per
    row: this is the pipeline's widest table and its hottest insert)."""
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
    batch = pa.table(columns, schema=TOOL_CALLS)
    cur.register("incoming_tool_calls", batch)
    try:
        cur.execute("insert or ignore into tool_calls by name select * from incoming_tool_calls")
    finally:
        cur.unregister("incoming_tool_calls")
    return batch.num_rows


_ROW_COLUMNS: Final = tuple(
    name for name in TOOL_CALLS.names
    if name not in ("dedup_key", "collector_progress", "collector_streak")
)


_TOOL_FIELDS: Final = tuple(f for f in ToolCallRow.__slots__)  # type: ignore[attr-defined]


def load_tool_calls(
    cur: duckdb.DuckDBPyConnection, episode_ids: Sequence[str]
) -> dict[str, list[ToolCallRow]]:
    """The stored tool calls of these episodes (to rebuild their detection state), in one
    query; episodes with none are absent from the result."""
    if not episode_ids:
        return {}
    columns = [c for c in _TOOL_FIELDS if c in TOOL_CALLS.names]
    cur.register("incoming_episode_ids", pa.table({"episode_id": list(episode_ids)}))
    try:
        result = cur.execute(
            f"select {', '.join('t.' + c for c in columns)} from tool_calls t"
            " join incoming_episode_ids i using (episode_id)"
        ).fetchall()
    finally:
        cur.unregister("incoming_episode_ids")
    rows: dict[str, list[ToolCallRow]] = {}
    for values in result:
        data = dict(zip(columns, values, strict=True))
        data["guard_flags"] = list(data.get("guard_flags") or [])
        row = ToolCallRow(**data)
        rows.setdefault(row.episode_id, []).append(row)
    return rows


def loopscope_spans_of_traces(
    cur: duckdb.DuckDBPyConnection, traces: Sequence[str]
) -> list[tuple[str, str, int, int]]:
    """(trace, tool, start, end) of the stored loopscope tool calls in these traces."""
    if not traces:
        return []
    cur.register("incoming_traces", pa.table({"trace_id": list(traces)}))
    try:
        return [tuple(row) for row in cur.execute(  # type: ignore[misc]
            "select t.trace_id, t.tool, t.start_ns, t.end_ns from tool_calls t"
            " join incoming_traces i using (trace_id) where t.convention = 'loopscope'"
        ).fetchall()]
    finally:
        cur.unregister("incoming_traces")


def foreign_calls_of_traces(
    cur: duckdb.DuckDBPyConnection, traces: Sequence[str]
) -> list[ToolCallRow]:
    """The stored tool calls of other instrumentations than loopscope's in these traces
    (their ids, episode, tool and times only): the candidates to be a loopscope call's
    shadow (``assembly.shadowed``)."""
    if not traces:
        return []
    cur.register("incoming_traces", pa.table({"trace_id": list(traces)}))
    try:
        found = cur.execute(
            "select t.trace_id, t.span_id, t.episode_id, t.service, t.tool, t.start_ns,"
            " t.end_ns, t.convention from tool_calls t"
            " join incoming_traces i using (trace_id) where t.convention <> 'loopscope'"
        ).fetchall()
    finally:
        cur.unregister("incoming_traces")
    return [ToolCallRow(*row) for row in found]


def delete_calls(cur: duckdb.DuckDBPyConnection, rows: Sequence[ToolCallRow]) -> set[str]:
    """Delete these stored tool calls and their detections (a shadow of a loopscope call);
    an episode row made only for them goes too. Returns the episodes they belonged to."""
    if not rows:
        return set()
    cur.register("shadowed", pa.table({"trace_id": [r.trace_id for r in rows],
                                       "span_id": [r.span_id for r in rows]}))
    try:
        for table in ("tool_calls", "detections"):  # fixed names, never input
            cur.execute(f"delete from {table} where (trace_id, span_id) in"
                        " (select trace_id, span_id from shadowed)")
    finally:
        cur.unregister("shadowed")
    emptied = {r.episode_id for r in rows}
    cur.register("emptied", pa.table({"episode_id": list(emptied)}))
    try:  # an episode row made only for the shadows (no root span, no calls left)
        cur.execute("delete from episodes where root_span_id is null"
                    " and episode_id in (select episode_id from emptied)"
                    " and not exists (select 1 from tool_calls t"
                    "                 where t.episode_id = episodes.episode_id)")
    finally:
        cur.unregister("emptied")
    return emptied


def stored_dedup_keys(cur: duckdb.DuckDBPyConnection, keys: Sequence[str]) -> set[str]:
    """The keys among ``keys`` that a stored tool call already has (one call, two reports)."""
    if not keys:
        return set()
    cur.register("incoming_dedup", pa.table({"dedup_key": list(keys)}))
    try:
        found = cur.execute(
            "select distinct t.dedup_key from tool_calls t join incoming_dedup i using (dedup_key)"
        ).fetchall()
    finally:
        cur.unregister("incoming_dedup")
    return {row[0] for row in found}


def episodes_of_traces(cur: duckdb.DuckDBPyConnection, traces: Sequence[str]) -> dict[str, str]:
    """For traces already stored, the episode their calls belong to."""
    if not traces:
        return {}
    cur.register("incoming_traces", pa.table({"trace_id": list(traces)}))
    try:
        found = cur.execute(
            "select t.trace_id, any_value(t.episode_id) from tool_calls t"
            " join incoming_traces i using (trace_id) group by t.trace_id"
        ).fetchall()
    finally:
        cur.unregister("incoming_traces")
    return dict(found)


def rebind_trace(cur: duckdb.DuckDBPyConnection, trace_id: str, episode_id: str) -> bool:
    """Move calls stored under the bare trace id to ``episode_id``; True if any moved."""
    moved = cur.execute(
        "select count(*) from tool_calls where trace_id = $t and episode_id = $t",
        {"t": trace_id},
    ).fetchall()  # fetchall: DuckDB 2 refuses new work while a result is unfinished
    if not moved[0][0]:
        return False
    params = {"t": trace_id, "e": episode_id}
    for table in ("tool_calls", "detections", "guard_decisions", "unknown_writes"):
        cur.execute(f"update {table} set episode_id = $e "
                    "where trace_id = $t and episode_id = $t", params)
    cur.execute("delete from episodes where episode_id = $t", params)
    return True


def update_verdicts(cur: duckdb.DuckDBPyConnection, verdicts: Sequence[Verdict]) -> None:
    """Rewrite the collector's verdict on calls stored earlier (after a re-evaluation)."""
    if not verdicts:
        return
    batch = pa.table({
        "trace_id": [v.row.trace_id for v in verdicts],
        "span_id": [v.row.span_id for v in verdicts],
        "progress": [v.progress or "none" for v in verdicts],
        "streak": pa.array([v.streak for v in verdicts], pa.int32()),
    })
    cur.register("incoming_verdicts", batch)
    try:
        cur.execute(
            "update tool_calls set collector_progress = i.progress, collector_streak = i.streak"
            " from incoming_verdicts i"
            " where tool_calls.trace_id = i.trace_id and tool_calls.span_id = i.span_id"
        )
    finally:
        cur.unregister("incoming_verdicts")


def write_detections(cur: duckdb.DuckDBPyConnection, results: Iterable[EpisodeResult]) -> int:
    """Store new flags; an episode that was re-evaluated has its flags replaced."""
    rows: list[dict[str, Any]] = []
    for result in results:
        if result.reevaluated:
            cur.execute("delete from detections where episode_id = $e",
                        {"e": result.episode_id})
        for verdict in result.verdicts:
            for flag in verdict.flags:
                rows.append({
                    "episode_id": result.episode_id, "trace_id": verdict.row.trace_id,
                    "span_id": verdict.row.span_id, "ordinal": verdict.ordinal,
                    "detector": flag.detector, "kind": flag.kind, "severity": flag.severity,
                    "action": flag.action, "message": flag.message,
                })
    return insert_rows(cur, "detections", rows, DETECTIONS)


def write_guard_decisions(cur: duckdb.DuckDBPyConnection, rows: Iterable[ToolCallRow]) -> int:
    """Store the decisions in-process guards reported on their spans."""
    decisions = [{
        "trace_id": r.trace_id, "span_id": r.span_id, "episode_id": r.episode_id,
        "service": r.service, "tool": r.tool, "mode": r.guard_mode, "action": r.guard_action,
        "decision": r.guard_decision, "reason": r.guard_reason, "flags": r.guard_flags or None,
        "time_ns": r.start_ns,
    } for r in rows if r.guard_action is not None]
    return insert_rows(cur, "guard_decisions", decisions, GUARD_DECISIONS)


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
    cur.register("incoming_episodes", batch)
    try:
        cur.execute(_UPSERT_EPISODES)
    finally:
        cur.unregister("incoming_episodes")


EPISODES: Final = pa.schema([
    ("episode_id", pa.string()), ("service", pa.string()), ("agent", pa.string()),
    ("model", pa.string()), ("task_type", pa.string()), ("trace_id", pa.string()),
    ("root_span_id", pa.string()), ("outcome", pa.string()), ("stop_reason", pa.string()),
    ("stop_diagnostic", pa.string()), ("guard_mode", pa.string()), ("convention", pa.string()),
    ("start_ns", pa.int64()), ("end_ns", pa.int64()), ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()), ("cost_usd", pa.float64()), ("scenario_loop", pa.bool_()),
    ("scenario_kind", pa.string()), ("scenario_first_loop_step", pa.int64()),
])
_UPSERT_EPISODES: Final = """
insert into episodes (episode_id, service, agent, model, task_type, trace_id, root_span_id,
    outcome, stop_reason, stop_diagnostic, guard_mode, convention, start_ns, end_ns,
    input_tokens, output_tokens, cost_usd, scenario_loop, scenario_kind, scenario_first_loop_step)
select episode_id, coalesce(service, 'unknown_service'), agent, model, task_type, trace_id,
    root_span_id, outcome, stop_reason, stop_diagnostic, guard_mode, convention, start_ns,
    end_ns, coalesce(input_tokens, 0), coalesce(output_tokens, 0), cost_usd, scenario_loop,
    scenario_kind, scenario_first_loop_step
from incoming_episodes
on conflict (episode_id) do update set
    service = coalesce(excluded.service, episodes.service),
    agent = coalesce(excluded.agent, episodes.agent),
    model = coalesce(excluded.model, episodes.model),
    task_type = coalesce(excluded.task_type, episodes.task_type),
    trace_id = coalesce(episodes.trace_id, excluded.trace_id),
    root_span_id = coalesce(excluded.root_span_id, episodes.root_span_id),
    outcome = coalesce(excluded.outcome, episodes.outcome),
    stop_reason = coalesce(excluded.stop_reason, episodes.stop_reason),
    stop_diagnostic = coalesce(excluded.stop_diagnostic, episodes.stop_diagnostic),
    guard_mode = coalesce(excluded.guard_mode, episodes.guard_mode),
    convention = coalesce(episodes.convention, excluded.convention),
    start_ns = least(excluded.start_ns, episodes.start_ns),
    end_ns = greatest(excluded.end_ns, episodes.end_ns),
    input_tokens = greatest(excluded.input_tokens, episodes.input_tokens),
    output_tokens = greatest(excluded.output_tokens, episodes.output_tokens),
    cost_usd = coalesce(excluded.cost_usd, episodes.cost_usd),
    scenario_loop = coalesce(excluded.scenario_loop, episodes.scenario_loop),
    scenario_kind = coalesce(excluded.scenario_kind, episodes.scenario_kind),
    scenario_first_loop_step = coalesce(excluded.scenario_first_loop_step,
                                        episodes.scenario_first_loop_step),
    updated_at = now()
"""


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
            "update unknown_writes set resolved_at_ns = $t, resolution = $how"
            " where resolved_at_ns is null and unknown_at_ns <= $t"
            " and (idempotency_key = $k or span_id in (select span_id from tool_calls"
            "      where call_id = $k and trace_id = $trace))",
            {"t": r.time_ns, "k": r.key, "trace": r.trace_id,
             "how": "reconciled_lookup" if r.found is None
             else "reconciled_found" if r.found else "reconciled_absent"},
        )
    for c in calls:
        if c.write_status == "ok" and c.idempotency_key:
            cur.execute(
                "update unknown_writes set resolved_at_ns = $t, resolution = 'retried_ok'"
                " where resolved_at_ns is null and idempotency_key = $k and unknown_at_ns <= $t",
                {"t": c.end_ns, "k": c.idempotency_key},
            )


LABELS: Final = pa.schema([
    ("episode_id", pa.string()), ("span_id", pa.string()), ("label", pa.string()),
    ("note", pa.string()),
])
LABEL_VALUES: Final = ("true_loop", "false_kill", "no_loop")


def check_label(data: Any) -> dict[str, Any]:
    """A human label from a client, validated: raises ``ValueError`` naming the bad field."""
    if not isinstance(data, dict):
        raise ValueError("a label must be a JSON object")
    episode_id = data.get("episode_id")
    if not isinstance(episode_id, str) or not episode_id:
        raise ValueError("episode_id: required, a non-empty string")
    span_id = data.get("span_id") or ""
    if not isinstance(span_id, str):
        raise ValueError("span_id: must be a string ('' labels the whole episode)")
    label = data.get("label")
    if label not in LABEL_VALUES:
        raise ValueError(f"label: must be one of {', '.join(LABEL_VALUES)}, not {label!r}")
    note = data.get("note")
    if note is not None and not isinstance(note, str):
        raise ValueError("note: must be a string")
    unknown = set(data) - {"episode_id", "span_id", "label", "note"}
    if unknown:
        raise ValueError(f"unknown field(s): {', '.join(sorted(unknown))}")
    for name, value in (("episode_id", episode_id), ("span_id", span_id), ("note", note)):
        if isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(f"{name}: a lone surrogate at character {exc.start}, which is "
                                 "not valid Unicode") from None
    return {"episode_id": episode_id, "span_id": span_id, "label": label,
            "note": (note or "")[:2000] or None}


def write_labels(cur: duckdb.DuckDBPyConnection, labels: Sequence[dict[str, Any]]) -> int:
    """Store human labels; a new label for the same episode and span replaces the old one."""
    return insert_rows(cur, "labels", labels, LABELS, on_conflict="replace")
