"""``loopscope lake import``: an embedded store's history moved into a lake, so a team that
started on one machine keeps it when it moves to N collectors (docs/deploy.md); and
``loopscope lake maintain``: DuckLake's own housekeeping, for a schedule (cron) to run.

The DuckDB file is attached read-only beside the lake; each of the store's tables goes in by
name, in a transaction of its own, leaving out the rows whose key the lake holds already
(``queries.insert_statements``): importing twice adds nothing, and nothing the lake stored is
changed. A file from an older loopscope goes in too (columns it lacks are left empty); one from
a newer loopscope, or a file that is not a loopscope store, is refused before anything moves.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

from ..lake_options import (
    MIN_KEEP,
    add_lake_options,
    check_keep,
    interval,
    open_named_lake,
    required_lake,
)

SOURCE: Final = "loopscope_import"
ORDER: Final = ("spans", "episodes", "tool_calls", "messages", "detections", "guard_decisions",
                "unknown_writes", "reconciles", "alerts", "labels")
"""Every table of the store (``queries.TABLES``), spans first: what the others derive from."""

LAKE_HELP = """\
Work with a DuckLake store that N collectors write (docs/deploy.md).

Example:
  loopscope lake import --db loopscope.duckdb --lake "$LAKE" --lake-data /shared/lake
  loopscope lake maintain --lake "$LAKE" --lake-data /shared/lake
"""

MAINTAIN_HELP = f"""\
DuckLake's own housekeeping over a lake that collectors write: rewrite the files that deletes
left mostly empty (ducklake_rewrite_data_files), merge the small Parquet files that frequent
commits leave (ducklake_merge_adjacent_files), expire snapshots older than
--keep (ducklake_expire_snapshots), and delete the files no snapshot needs any more once they
are older than --keep too (ducklake_cleanup_old_files; a reader still scanning them is given
that long, so --keep is at least {MIN_KEEP}: a shorter one needs --unsafe-keep, for a lake no
collector or reader uses). Safe beside running collectors and readers: each step is a DuckLake
transaction.
Each lake collector runs the same every --lake-maintain-every (default 5m); run this by hand or
from cron when no collector does (docs/deploy.md, "Housekeeping").

Example:
  loopscope lake maintain --lake "$LAKE" --lake-data /shared/lake --keep 1d
"""

HELP = """\
Move an embedded loopscope store (a DuckDB file) into a DuckLake.

Every table of the file goes into the lake, one transaction per table; rows the lake already
holds (by their key) are left out, so running it twice adds nothing and nothing in the lake is
changed. Stop the collector that writes the file first (or import a copy). Then start the
collectors with the same --lake and --lake-data (docs/deploy.md).

Example:
  loopscope lake import --db loopscope.duckdb \\
      --lake 'ducklake:postgres:dbname=loopscope host=db' --lake-data /shared/lake
"""


def register(sub: Any) -> None:
    """Add ``lake`` (``import``, ``maintain``) to the ``loopscope`` command's subparsers."""
    lake = sub.add_parser("lake", help="a DuckLake store: import a file into it, maintain it",
                          description=LAKE_HELP,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = lake.add_subparsers(dest="lake_action", metavar="ACTION", required=True)
    p = actions.add_parser("import", help="move a DuckDB store's tables into a lake",
                           description=HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", metavar="FILE", required=True, help="the DuckDB store to import")
    add_lake_options(p, "the lake to import into")
    p.set_defaults(func=cmd_import)
    m = actions.add_parser("maintain", help="merge small files, expire old snapshots",
                           description=MAINTAIN_HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    add_lake_options(m, "the lake to maintain")
    m.add_argument("--keep", metavar="DURATION", default="1d", type=interval,
                   help="snapshots and unused files younger than this are kept: 6h, 1d; at "
                        f"least {MIN_KEEP}, so that a read or a batch still scanning a replaced "
                        "file finishes (default 1d)")
    m.add_argument("--unsafe-keep", action="store_true",
                   help=f"allow a --keep under {MIN_KEEP}: only when no read or write on the "
                        "lake lasts that long (no collector or reader uses it)")
    m.set_defaults(func=cmd_maintain)


def cmd_maintain(args: argparse.Namespace) -> int:
    """``loopscope lake maintain``."""
    check_keep(args.keep, option="--keep", unsafe=args.unsafe_keep, override="--unsafe-keep",
               command="lake maintain")
    db = open_named_lake(required_lake(args, "lake maintain"), "lake maintain")
    try:
        done = maintain(db, args.keep)
    finally:
        db.close()
    for step, count in done.items():
        print(f"{step:<24} {count:>8,}")
    return 0


def maintain(db: Any, keep: str, *, merge_below: int | None = None) -> dict[str, int]:
    """Run DuckLake's housekeeping on the lake ``db`` (see ``MAINTAIN_HELP``); returns how many
    rows each step reported (files rewritten, files merged, snapshots expired, files
    deleted). ``merge_below``: merge only files smaller than that many bytes (a collector's
    frequent run: a file that size or larger is never rewritten again, so a run costs what
    the commits since the last one wrote, not the lake's size); None merges every file below
    DuckLake's ``target_file_size``."""
    from .lake import ALIAS

    bound = "" if merge_below is None else f", max_file_size => {int(merge_below)}"
    steps = {
        "rewritten files": f"call ducklake_rewrite_data_files('{ALIAS}')",
        "merged files": f"call ducklake_merge_adjacent_files('{ALIAS}'{bound})",
        "expired snapshots": f"call ducklake_expire_snapshots('{ALIAS}', "
                             f"older_than => now() - interval '{keep}')",
        "deleted files": f"call ducklake_cleanup_old_files('{ALIAS}', "
                         f"older_than => now() - interval '{keep}')",
    }
    cur = db.cursor()
    try:
        # (as Arrow: the rows hold time stamps with a zone, which fetchall turns into Python
        # datetimes only with pytz; fetch_arrow_table: a lake runs on DuckDB 1.4.4 only)
        return {step: cur.execute(sql).fetch_arrow_table().num_rows
                for step, sql in steps.items()}
    finally:
        cur.close()


def cmd_import(args: argparse.Namespace) -> int:
    """``loopscope lake import``."""
    import duckdb

    from . import SchemaError, open_database

    lake = required_lake(args, "lake import")
    try:
        open_database(args.db, read_only=True).close()  # a loopscope store this version reads
    except (FileNotFoundError, SchemaError) as exc:
        print(f"loopscope lake import: error: {exc}", file=sys.stderr)
        return 1
    except duckdb.Error as exc:
        print(f"loopscope lake import: error: cannot open {args.db} read-only ({exc}); stop "
              "the collector writing it, or import a copy", file=sys.stderr)
        return 1
    db = open_named_lake(lake, "lake import")
    try:
        moved = import_file(db, Path(args.db))
    finally:
        db.close()
    for table, rows in moved.items():
        print(f"{table:<16} {rows:>10,} rows added")
    print(f"imported {args.db} into {lake}")
    return 0


def import_file(db: Any, path: Path) -> dict[str, int]:
    """Insert the rows of the store at ``path`` that the lake ``db`` lacks; returns the rows
    added per table."""
    from .queries import insert_statements

    cur = db.cursor()
    quoted = "'" + str(path).replace("'", "''") + "'"
    cur.execute(f"attach {quoted} as {SOURCE} (read_only)")
    try:
        moved = {}
        for table in ORDER:
            before = _count(cur, table)
            cur.execute("begin transaction")
            try:
                for sql in insert_statements(cur, table, f"{SOURCE}.main.{table}",
                                             stamped=True):
                    cur.execute(sql)
                cur.execute("commit")
            except BaseException:
                cur.execute("rollback")
                raise
            moved[table] = _count(cur, table) - before
        return moved
    finally:
        cur.execute(f"detach {SOURCE}")
        cur.close()


def _count(cur: Any, table: str) -> int:
    return int(cur.execute(f"select count(*) from {table}").fetchall()[0][0])
