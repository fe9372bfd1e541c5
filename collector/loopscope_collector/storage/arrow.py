"""Arrow batches as views the SQL can read: one helper for every statement that joins a batch.

DuckDB reads a registered Arrow table in place (no copy). A name registered on a cursor stays
until it is unregistered, so each use registers, runs its SQL and unregisters, also when the
SQL fails (keeping the SQL's error, not the cleanup's): ``registered`` is that block, written
once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import pyarrow as pa


def schema(columns: Iterable[tuple[str, pa.DataType]]) -> pa.Schema:
    """``pa.schema`` of (name, type) pairs, typed as such: against ``pa.schema``'s union of
    accepted forms a type checker joins ``string()`` and ``int64()`` to ``object``."""
    return pa.schema(columns)


@contextmanager
def registered(
    cur: duckdb.DuckDBPyConnection, name: str, batch: pa.Table | Mapping[str, Sequence[Any]]
) -> Iterator[pa.Table]:
    """``batch`` (an Arrow table, or columns by name) readable as the view ``name`` on ``cur``
    inside the ``with`` block, and gone after it; yields the Arrow table.

    ``name`` is one of the store's own fixed names, never input.
    """
    table = batch if isinstance(batch, pa.Table) else pa.table(dict(batch))
    cur.register(name, table)
    try:
        yield table
    except BaseException:
        # The SQL failed, and inside a transaction that failure aborted it: DuckDB then
        # refuses every statement, ``unregister`` too. Its error must not replace the one
        # that says what went wrong (a data error would pass for a failing store). The view
        # left behind is replaced by the next ``register`` of its name.
        with contextlib.suppress(duckdb.Error):
            cur.unregister(name)
        raise
    cur.unregister(name)
