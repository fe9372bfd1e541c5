"""``loopscope export``'s command line: a store's whole tables as Parquet or CSV files.

The dashboard's download buttons give the table a page shows; this gives every row of the
store's tables (tool calls, episodes, detections, guard decisions, alerts, labels, ...), one
file per table, read from a DuckDB file opened read-only (a copy, or a stopped collector's),
or from a DuckLake (every collector's rows; ``--lake``). The writing is
``storage.export.export_tables``. Registered by the collector's commands (``cli.register``),
which add ``--prometheus-rules``. Light at import time: no store is imported until the command
runs, so ``loopscope --help`` works without the collector extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loopscope.exit_codes import EXIT_BAD_INPUT, EXIT_OK

from .lake_options import add_lake_options, lake_of
from .store_tables import FORMATS, TABLES

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
    from .storage import LakeError, SchemaError, open_database, open_lake
    from .storage.errors import StoreError
    from .storage.export import export_tables

    lake = None if args.db else lake_of(args, "export")
    try:
        db = (open_lake(lake, read_only=True) if lake is not None
              else open_database(args.db, read_only=True))
    except (FileNotFoundError, SchemaError, LakeError) as exc:
        print(f"loopscope export: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except StoreError as exc:  # StoreLocked: a running collector holds the lock
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
