"""What ``loopscope lake import`` and ``lake maintain`` do (their command line is
``lake_command``'s). Import: an embedded store's history moved into a lake, so a team that
started on one machine keeps it when it moves to N collectors (docs/deploy.md); and
``loopscope lake maintain``: DuckLake's own housekeeping, for a schedule (cron) to run.

The DuckDB file is attached read-only beside the lake; each of the store's tables goes in by
name, in a transaction of its own, leaving out the rows whose key the lake holds already
(``queries.insert_statements``): importing twice adds nothing, and nothing the lake stored is
changed but each run's call facts, counted again over its calls (``recount_calls``). A file
from an older loopscope goes in too (columns it lacks are left empty); one from a newer
loopscope, or a file that is not a loopscope store, is refused before anything moves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

SOURCE: Final = "loopscope_import"
ORDER: Final = ("spans", "episodes", "tool_calls", "messages", "detections", "guard_decisions",
                "unknown_writes", "reconciles", "alerts", "labels", "export_reports",
                "incomplete_runs")
"""Every table of the store (``queries.TABLES``), spans first: what the others derive from."""

def maintain(db: Any, keep: str, *, merge_below: int | None = None) -> dict[str, int]:
    """Run DuckLake's housekeeping on the lake ``db`` (see ``MAINTAIN_HELP``); returns how many
    rows each step reported (files rewritten, files merged, snapshots expired, files
    deleted). ``merge_below``: merge only files smaller than that many bytes (a collector's
    frequent run: a file that size or larger is never rewritten again, so a run costs what
    the commits since the last one wrote, not the lake's size); None merges every file below
    DuckLake's ``target_file_size``."""
    from . import ALIAS

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


def import_file(db: Any, path: Path) -> dict[str, int]:
    """Insert the rows of the store at ``path`` that the lake ``db`` lacks; returns the rows
    added per table."""
    from ..queries import insert_statements
    from ..writes.episodes import recount_calls

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
        cur.execute("begin transaction")  # the runs' call facts, over the calls added too
        try:
            recount_calls(cur, None)
            cur.execute("commit")
        except BaseException:
            cur.execute("rollback")
            raise
        return moved
    finally:
        cur.execute(f"detach {SOURCE}")
        cur.close()


def _count(cur: Any, table: str) -> int:
    return int(cur.execute(f"select count(*) from {table}").fetchall()[0][0])
