"""``loopscope lake``'s command line: ``import`` an embedded store into a lake, ``maintain`` a
lake (the work is ``storage.ducklake.imports``'s). Light at import time: no store is imported until
a command runs, so ``loopscope --help`` works without the collector extra."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .lake_options import (
    MIN_KEEP,
    add_lake_options,
    check_keep,
    interval,
    open_named_lake,
    required_lake,
)

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
    from .storage.ducklake.imports import maintain

    db = open_named_lake(required_lake(args, "lake maintain"), "lake maintain")
    try:
        done = maintain(db, args.keep)
    finally:
        db.close()
    for step, count in done.items():
        print(f"{step:<24} {count:>8,}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """``loopscope lake import``."""
    from .storage import SchemaError, open_database
    from .storage.ducklake.imports import import_file
    from .storage.errors import StoreError

    lake = required_lake(args, "lake import")
    try:
        open_database(args.db, read_only=True).close()  # a loopscope store this version reads
    except (FileNotFoundError, SchemaError) as exc:
        print(f"loopscope lake import: error: {exc}", file=sys.stderr)
        return 1
    except StoreError as exc:
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
