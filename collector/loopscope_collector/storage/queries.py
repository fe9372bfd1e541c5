"""Every piece of SQL the store runs: named reads parsed from ``sql/reads.sql``, batch writers.

A read is a ``-- name:`` block with ``$named`` parameters; the API accepts only names that
exist in ``READS`` and only the parameters the read declares, so a client can never send SQL.
Missing parameters are bound as NULL (each read treats NULL as "no filter"). Results are
fetched in full before returning: no half-read DuckDB result leaves this module (DuckDB 2.x
refuses a second query on a connection with a pending result).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Final

import duckdb
import pyarrow as pa

_NAME_LINE = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_PARAM = re.compile(r"\$([a-z_][a-z0-9_]*)")
_DOC_LINE = re.compile(r"^--\s?(.*)$")


@dataclass(frozen=True, slots=True)
class NamedRead:
    """One read: its SQL, the parameters it takes and its one-line description."""

    name: str
    sql: str
    params: tuple[str, ...]
    doc: str


def _load_reads() -> dict[str, NamedRead]:
    text = files(__package__).joinpath("sql", "reads.sql").read_text(encoding="utf-8")
    _, *pairs = _NAME_LINE.split(text)
    reads: dict[str, NamedRead] = {}
    for name, body in zip(pairs[::2], pairs[1::2], strict=True):
        body = body.strip()
        doc = " ".join(
            m.group(1).strip() for line in body.splitlines() if (m := _DOC_LINE.match(line))
        )
        reads[name] = NamedRead(name, body.rstrip(";"), tuple(dict.fromkeys(_PARAM.findall(body))),
                                doc)
    return reads


READS: Final = _load_reads()  # parsed at import: a broken file fails at start-up


class UnknownRead(KeyError):
    """A read name or parameter that does not exist."""

    def __str__(self) -> str:
        return str(self.args[0])


def run_read(
    cur: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Run the named read with ``params``; returns finished rows as dicts.

    Raises:
        UnknownRead: no such read, or a parameter it does not declare.
    """
    read = READS.get(name)
    if read is None:
        raise UnknownRead(f"no read named {name!r}; reads: {', '.join(sorted(READS))}")
    extra = set(params) - set(read.params)
    if extra:
        raise UnknownRead(f"read {name!r} takes {', '.join(read.params) or 'no parameters'}, "
                          f"not {', '.join(sorted(extra))}")
    bound = {p: params.get(p) for p in read.params}
    result = cur.execute(read.sql, bound)
    columns = [d[0] for d in result.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in result.fetchall()]


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
    batch = pa.Table.from_pylist(list(rows), schema=schema)
    view = f"incoming_{table}"
    cur.register(view, batch)
    try:
        verb = "insert or ignore" if on_conflict == "ignore" else "insert or replace"
        cur.execute(f"{verb} into {table} by name select * from {view}")
    finally:
        cur.unregister(view)
    return batch.num_rows


def existing_keys(
    cur: duckdb.DuckDBPyConnection, pairs: Sequence[tuple[str, str]]
) -> set[tuple[str, str]]:
    """The (trace_id, span_id) pairs among ``pairs`` that are already stored."""
    if not pairs:
        return set()
    keys = pa.table({"trace_id": [p[0] for p in pairs], "span_id": [p[1] for p in pairs]})
    cur.register("incoming_keys", keys)
    try:
        found = cur.execute(
            "select s.trace_id, s.span_id from spans s"
            " join incoming_keys k on s.trace_id = k.trace_id and s.span_id = k.span_id"
        ).fetchall()
    finally:
        cur.unregister("incoming_keys")
    return {(t, s) for t, s in found}


TABLES: Final = frozenset({
    "spans", "tool_calls", "episodes", "detections", "guard_decisions", "unknown_writes",
    "reconciles", "alerts", "labels",
})
