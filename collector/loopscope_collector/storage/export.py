"""A store's whole tables as Parquet or CSV files, for other tools (``loopscope export``,
whose command line is ``export_command``'s: a command is not storage's)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..store_tables import FORMATS, TABLES

if TYPE_CHECKING:
    import pyarrow as pa

    from . import Database


def export_tables(db: Database, out: Path, fmt: str,
                  tables: Sequence[str] = TABLES) -> list[tuple[str, Path, int]]:
    """Write each of ``tables`` (names from ``TABLES`` only) to ``out``; returns
    (table, file, rows) per table."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for table in tables:
        if table not in TABLES:  # never a name from input into SQL
            raise ValueError(f"not a loopscope table: {table!r}")
        data = _table(db, table)
        path = out / f"{table}.{fmt}"
        if fmt == "parquet":
            pq.write_table(data, path)
        else:
            pacsv.write_csv(_flat(data), path)
        written.append((table, path, data.num_rows))
    return written


def _table(db: Database, table: str) -> pa.Table:
    """The whole table as Arrow, read on its own cursor and finished before returning."""
    cur = db.cursor()
    try:
        # to_arrow_table: a relation has it on 1.4.4 and 2.0.1; 2.0.1 has no fetch_arrow_table
        data: pa.Table = cur.sql(f"select * from {table}").to_arrow_table()
        return data
    finally:
        cur.close()


def _flat(data: pa.Table) -> pa.Table:
    """List, struct and map columns as JSON text: CSV holds one value per cell."""
    import pyarrow as pa

    columns: list[pa.Array[Any] | pa.ChunkedArray[Any]] = []
    for name in data.column_names:
        column: pa.Array[Any] | pa.ChunkedArray[Any] = data.column(name)
        if pa.types.is_nested(column.type):
            column = pa.array([None if v is None else json.dumps(v, ensure_ascii=False,
                                                                 default=str)
                               for v in column.to_pylist()], type=pa.string())
        columns.append(column)
    return pa.table(columns, names=data.column_names)
