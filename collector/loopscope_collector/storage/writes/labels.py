"""The ``labels`` table: human labels of episodes and calls, the newest per episode and span.

``LABEL_VALUES`` is the table's vocabulary; a client's label is validated where it comes in
(``check_label``, beside the HTTP server).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypedDict

import duckdb
import pyarrow as pa

from ..arrow import schema
from ..queries import insert_rows

LABELS: Final = schema([
    ("episode_id", pa.string()), ("span_id", pa.string()), ("label", pa.string()),
    ("note", pa.string()),
])
LABEL_VALUES: Final = ("true_loop", "false_kill", "no_loop")


class Label(TypedDict):
    """One human label as the pipeline writes it: ``label`` is one of ``LABEL_VALUES``, or
    None to remove the episode's (``span_id`` ``""``) or the call's label."""

    episode_id: str
    span_id: str
    label: str | None
    note: str | None


def write_labels(cur: duckdb.DuckDBPyConnection, labels: Sequence[Label]) -> int:
    """Store human labels, in order; a new label for the same episode and span replaces the
    old one, and a label of ``None`` removes it (undo). Returns the labels stored."""
    stored = 0
    pending: list[Label] = []
    for label in labels:
        if label["label"] is not None:
            pending.append(label)
            continue
        if pending:
            stored += insert_rows(cur, "labels", pending, LABELS, on_conflict="replace")
            pending = []
        cur.execute("delete from labels where episode_id = $episode_id and span_id = $span_id",
                    {"episode_id": label["episode_id"], "span_id": label["span_id"]})
    if pending:
        stored += insert_rows(cur, "labels", pending, LABELS, on_conflict="replace")
    return stored
