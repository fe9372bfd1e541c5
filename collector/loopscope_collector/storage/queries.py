"""The store's SQL for writers: the statements of ``sql/writes/TABLE.sql`` and the batch
insert every writer shares. (The named reads are a stage of their own: ``reads``.)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from importlib.resources import files
from typing import Any, Final, TypeVar

import duckdb
import pyarrow as pa

from .arrow import registered
from .duckdb_file.dialect import keyed_inserts
from .ducklake.dialect import is_lake, keyless_inserts

R = TypeVar("R")

_NAME_LINE = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def statements(table: str) -> dict[str, str]:
    """The named statements of ``sql/writes/TABLE.sql``: ``-- name:`` blocks, as in
    ``reads.sql``, that the writers of that table run (read at import: a broken file fails at
    start-up)."""
    text = files(__package__).joinpath("sql", "writes", f"{table}.sql").read_text(
        encoding="utf-8")
    _, *pairs = _NAME_LINE.split(text)
    return {name: body.strip().rstrip(";")
            for name, body in zip(pairs[::2], pairs[1::2], strict=True)}


def by_episode(
    cur: duckdb.DuckDBPyConnection, sql: str, episode_ids: Sequence[str],
    fields: Collection[str], make: Callable[[dict[str, Any]], R],
) -> dict[str, list[R]]:
    """The rows ``sql`` returns for these episodes (it takes them as ``$episode_ids``), each
    made by ``make`` from its ``fields`` columns, grouped by episode id in one query; episodes
    with none are absent from the result."""
    if not episode_ids:
        return {}
    result = cur.execute(sql, {"episode_ids": list(episode_ids)})
    columns = [d[0] for d in result.description or ()]
    found = result.fetchall()
    keep = [i for i, name in enumerate(columns) if name in fields]
    grouped: dict[str, list[R]] = {}
    for values in found:
        data = {columns[i]: values[i] for i in keep}
        grouped.setdefault(str(data["episode_id"]), []).append(make(data))
    return grouped


def insert_rows(
    cur: duckdb.DuckDBPyConnection,
    table: str,
    rows: Sequence[Mapping[str, Any]],
    schema: pa.Schema,
    *,
    on_conflict: str = "ignore",
) -> int:
    """Insert a batch in one statement through Arrow; rows whose key exists are ignored.

    ``table`` must be one of the store's own tables (never from input). Returns the number
    of rows handed to DuckDB.
    """
    if table not in TABLES:
        raise ValueError(f"not a loopscope table: {table!r}")
    if not rows:
        return 0
    view = f"incoming_{table}"
    with registered(cur, view, pa.Table.from_pylist(list(rows), schema=schema)) as batch:
        for sql in insert_statements(cur, table, view, on_conflict=on_conflict):
            cur.execute(sql)
    return batch.num_rows


def insert_statements(
    cur: duckdb.DuckDBPyConnection, table: str, view: str, *, on_conflict: str = "ignore",
    stamped: bool = False,
) -> list[str]:
    """The statements that insert the rows of ``view`` into ``table`` by name, skipping (or
    with ``on_conflict="replace"``, replacing) rows whose key is stored; ``"new"``: the caller
    found none of the keys stored in this transaction (a file's one writer: no key check; a
    lake, which other collectors write, still leaves stored keys out).

    In a DuckDB file the table's primary key does it (``duckdb_file.dialect``). A lake has
    no keys (``ducklake.dialect``): the rows whose key is stored are left out (or deleted
    first), one row per key is kept from the batch, and the time stamp a default fills in a
    file is set (unless ``stamped``: the rows bring theirs, from another store).
    """
    if table not in TABLES:
        raise ValueError(f"not a loopscope table: {table!r}")
    if not is_lake(cur):
        return keyed_inserts(table, view, on_conflict=on_conflict)
    return keyless_inserts(table, view, TABLES[table],
                           stamp=None if stamped else STAMPED.get(table),
                           on_conflict=on_conflict)


TABLES: Final[dict[str, tuple[str, ...]]] = {
    "spans": ("trace_id", "span_id"), "tool_calls": ("trace_id", "span_id"),
    "episodes": ("episode_id",), "detections": ("episode_id", "span_id", "detector"),
    "guard_decisions": ("trace_id", "span_id"), "unknown_writes": ("idempotency_key", "span_id"),
    "reconciles": ("trace_id", "span_id"), "alerts": ("alert_id",),
    "labels": ("episode_id", "span_id"), "messages": ("trace_id", "span_id"),
    "export_reports": ("trace_id", "span_id"),
    "incomplete_runs": ("trace_id", "span_id", "episode_id"),
}
"""The store's own tables (never a name from input) and their keys (the primary keys of the
DDL, which a lake does not hold)."""
STAMPED: Final = {"spans": "received_at", "episodes": "updated_at",
                  "detections": "detected_at", "labels": "labelled_at"}
"""The time stamp each table's DDL fills with ``default current_timestamp`` in a file."""
