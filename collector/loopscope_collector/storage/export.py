"""``loopscope export``: a store's whole tables as Parquet or CSV files, for other tools.

The dashboard's download buttons give the table a page shows; this gives every row of the
store's tables (tool calls, episodes, detections, guard decisions, alerts, labels, ...), one
file per table, read from a DuckDB file opened read-only (a copy, or a stopped collector's),
or from a DuckLake (every collector's rows; ``--lake``).
Registered by the collector's commands (``cli.register``), which add ``--prometheus-rules``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from loopscope.exit_codes import EXIT_BAD_INPUT, EXIT_OK

from ..lake_options import add_lake_options, lake_of

if TYPE_CHECKING:
    import pyarrow as pa

    from . import Database

FORMATS: Final = ("parquet", "csv")
TABLES: Final = ("episodes", "tool_calls", "messages", "detections", "guard_decisions",
                 "unknown_writes", "reconciles", "alerts", "labels", "spans")
"""What ``export`` writes by default, in this order (the store's own tables)."""

EXPORT_HELP = """\
Write a loopscope store's tables as Parquet or CSV files, one file per table.

Opens the DuckDB file read-only (a copy, or the file of a stopped collector; a running
collector holds the lock: use `loopscope metrics --collector` or the dashboard's downloads).
Writes DIR/TABLE.parquet or DIR/TABLE.csv for each table (default: every table). In CSV,
list and JSON columns are written as JSON text.

With --prometheus-rules FILE it writes (also, or instead) the collector's no-progress spike
alert as Prometheus alerting rules over the collector's /metrics, for the --alert-* settings
the collector runs with (the same options and defaults as `loopscope collector`); check it
with `promtool check rules FILE`. docs/grafana-dashboard.json charts the same metrics.

Example:
  loopscope export --db loopscope.duckdb --format parquet --out exported/
  loopscope export --db copy.duckdb --format csv --table episodes --table tool_calls
  loopscope export --lake 'ducklake:postgres:dbname=loopscope host=db' --lake-data /shared/lake
  loopscope export --prometheus-rules loopscope-rules.yml --alert-window 120
"""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add ``export`` to the ``loopscope`` command's subparsers; returns its parser."""
    p = sub.add_parser("export", help="write a store's tables as Parquet or CSV files",
                       description=EXPORT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", metavar="FILE", help="DuckDB store (read-only) whose tables to write")
    add_lake_options(p, "instead of --db: write the tables of this DuckLake")
    p.add_argument("--format", choices=FORMATS, default="parquet",
                   help="file format (default: parquet)")
    p.add_argument("--out", metavar="DIR", default=".",
                   help="folder to write into, created when missing (default: .)")
    p.add_argument("--table", action="append", choices=TABLES, metavar="TABLE",
                   help=f"a table to write (repeatable; default: all of {', '.join(TABLES)})")
    p.set_defaults(func=cmd_export)
    return p


def cmd_export(args: argparse.Namespace) -> int:
    """``loopscope export``."""
    from . import LakeError, SchemaError, open_database, open_lake

    lake = None if args.db else lake_of(args, "export")
    try:
        db = (open_lake(lake, read_only=True) if lake is not None
              else open_database(args.db, read_only=True))
    except (FileNotFoundError, SchemaError, LakeError) as exc:
        print(f"loopscope export: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # duckdb.IOException: a running collector holds the lock
        print(f"loopscope export: cannot open {lake or args.db} read-only ({exc})",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        written = export_tables(db, Path(args.out), args.format, args.table or TABLES)
    finally:
        db.close()
    for table, path, rows in written:
        print(f"{table:<16} {rows:>9,} rows  {path}")
    return EXIT_OK


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
