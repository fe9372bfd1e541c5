"""The ``detections`` table: the collector's flags, one row per flag on a call or a message.

Only the pipeline thread calls this, inside its transaction, on its own cursor. The SQL is in
``sql/writes/detections.sql``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Final, Protocol

import duckdb
import pyarrow as pa

from ...normalize.rows import MessageRow
from ..arrow import schema
from ..queries import insert_rows, statements
from .tool_calls import CallVerdict

DETECTIONS: Final = schema([
    ("episode_id", pa.string()), ("trace_id", pa.string()), ("span_id", pa.string()),
    ("ordinal", pa.int32()), ("detector", pa.string()), ("kind", pa.string()),
    ("severity", pa.string()), ("action", pa.string()), ("message", pa.string()),
])

_SQL: Final = statements("detections")


class FlagLike(Protocol):
    """A flag as the store keeps it (the core's ``Flag``)."""

    @property
    def detector(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def message(self) -> str: ...


class FlaggedVerdict(CallVerdict, Protocol):
    """A verdict with its place in the episode and its flags (``detection.CallDetection``)."""

    @property
    def ordinal(self) -> int: ...
    @property
    def flags(self) -> Sequence[FlagLike]: ...


class FlaggedMessage(Protocol):
    """A message's flags and the ordinal of the call after it (``detection.MessageDetection``)."""

    @property
    def row(self) -> MessageRow: ...
    @property
    def ordinal(self) -> int: ...
    @property
    def flags(self) -> Sequence[FlagLike]: ...


class EpisodeFlags(Protocol):
    """Detection's output for one episode after a batch (``detection.EpisodeResult``)."""

    @property
    def episode_id(self) -> str: ...
    @property
    def verdicts(self) -> Sequence[FlaggedVerdict]: ...
    @property
    def messages(self) -> Sequence[FlaggedMessage]: ...
    @property
    def reevaluated(self) -> bool: ...


def write_detections(cur: duckdb.DuckDBPyConnection,
                     results: Iterable[EpisodeFlags]) -> Counter[str]:
    """Store new flags; an episode that was re-evaluated has its flags replaced.

    Returns the flags this wrote that the store did not hold before, by kind (a flag is its
    call, detector and kind): what ``loopscope_loops_total`` adds. A re-evaluation writes an
    episode's flags again, and a batch retried after a failure is judged again from what was
    stored; counting what is stored, not what was judged, counts each flag once.
    """
    rows: list[dict[str, Any]] = []
    new: Counter[str] = Counter()
    results = list(results)
    replaced = _replace(cur, [r.episode_id for r in results if r.reevaluated])
    for result in results:
        before = replaced.get(result.episode_id, set()) if result.reevaluated else set()
        flagged: list[FlaggedVerdict | FlaggedMessage] = [*result.verdicts, *result.messages]
        for verdict in flagged:
            for flag in verdict.flags:
                rows.append({
                    "episode_id": result.episode_id, "trace_id": verdict.row.trace_id,
                    "span_id": verdict.row.span_id, "ordinal": verdict.ordinal,
                    "detector": flag.detector, "kind": flag.kind, "severity": flag.severity,
                    "action": flag.action, "message": flag.message,
                })
                if (verdict.row.span_id, flag.detector, flag.kind) not in before:
                    new[flag.kind] += 1
    insert_rows(cur, "detections", rows, DETECTIONS)
    return new


def _replace(
    cur: duckdb.DuckDBPyConnection, episode_ids: Sequence[str]
) -> dict[str, set[tuple[str, str, str]]]:
    """Delete the stored flags of these episodes (re-evaluated: their flags are written
    again); returns what each held, as (span id, detector, kind). Two statements for the
    batch (a lake's DELETE has no RETURNING)."""
    if not episode_ids:
        return {}
    params = {"episode_ids": list(episode_ids)}
    held: dict[str, set[tuple[str, str, str]]] = {}
    for episode_id, span_id, detector, kind in cur.execute(_SQL["of_episodes"],
                                                           params).fetchall():
        held.setdefault(episode_id, set()).add((span_id, detector, kind))
    cur.execute(_SQL["delete_episodes"], params)
    return held
