"""The embedded store's file: connecting to it (``connect``, refusing what DuckDB would not
store into), migrating it so that a crash at any instant leaves a file that opens, and whether
its disk has room to checkpoint (``checkpoint_shortfall``)."""

from __future__ import annotations

import glob
import logging
import os
import time
from pathlib import Path
from typing import Final

import duckdb

from ..schema import LATEST, SchemaError, current_version, migrate

logger = logging.getLogger(__name__)


RECOVERED: Final = ".recovered-"
"""Beside a store, ``<db>.recovered-<time>``: the database a collector saved when it found
another file moved or copied over its store (``health.StoreWatch``)."""


def _recovered_beside(path: str) -> str:
    """What a collector that left ``path`` saved beside it (``RECOVERED``), said for the
    next start; empty when nothing is there."""
    found = sorted(glob.glob(glob.escape(path) + RECOVERED + "*"))
    if not found:
        return ""
    files = " and ".join(found)
    return (f"the collector that had {path} open found it replaced or overwritten, left it "
            f"as found and saved every span it had acknowledged to {files}; those spans are "
            f"not in {path}: start with --db {found[-1]} to go on with them, and move "
            f"{'these files' if len(found) > 1 else 'that file'} away once done")


MIGRATING: Final = ".migrating"
"""Beside a store while its schema changes: ``_migrate_file``."""


def _migrate_file(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Migrate the store at ``path`` so that a crash at any instant leaves a file that opens.

    DuckDB 1.4.4 cannot replay DDL whose defaults bind a function (``default
    current_timestamp``) from its write-ahead log after a crash ("GetDefaultDatabase with no
    default database set", duckdb#19712; 2.0.1 replays it). So the log is checkpointed
    first (it then holds no acknowledged row), a marker is written beside the file, the
    migrations run, the log is checkpointed again and the marker removed. A marker found at
    the next open says the log holds schema changes only: ``_set_aside_interrupted_migration``.
    """
    started, version = time.monotonic(), current_version(con)
    if version:  # a store an older loopscope wrote (a new one is made in a moment, silently)
        logger.warning("loopscope: upgrading the store %s from schema version %d to %d "
                       "(a store of a million calls takes about half a minute); a stop "
                       "meanwhile is safe: the upgrade runs again at the next start",
                       path, version, LATEST)
    con.execute("checkpoint")
    marker = Path(path + MIGRATING)
    with marker.open("w", encoding="utf-8") as handle:
        handle.write("loopscope: a schema migration of this store is in progress\n")
        handle.flush()
        os.fsync(handle.fileno())
    migrate(con)
    con.execute("checkpoint")
    marker.unlink()
    if version:
        logger.warning("loopscope: the store %s is upgraded to schema version %d (%.1f s)",
                       path, LATEST, time.monotonic() - started)


def _set_aside_interrupted_migration(path: str) -> None:
    """A migration of ``path`` was cut off (its marker is there): its write-ahead log holds
    schema changes and no acknowledged row, so it is moved aside (not deleted) and the
    migration runs again from the last checkpoint."""
    marker = Path(path + MIGRATING)
    if not marker.exists():
        return
    wal = Path(path + ".wal")
    if wal.exists():
        aside = wal.with_name(f"{wal.name}.interrupted-migration-{time.strftime('%Y%m%dT%H%M%S')}")
        os.replace(wal, aside)
        logger.warning("a schema migration of %s was cut off; its write-ahead log (schema "
                       "changes only, no data) is moved to %s and the migration runs again",
                       path, aside)
    marker.unlink()


CHECKPOINT_MARGIN: Final = 8 * 1024 * 1024


def checkpoint_shortfall(path: str) -> str | None:
    """Why the disk of the store at ``path`` has no room to checkpoint its write-ahead log
    now, or None when it has.

    DuckDB 1.4.4 does not come back from its own checkpoint at a commit failing half-way for
    a full disk: once space is freed the store still refuses writes (first seen as "Corrupt
    database file: computed checksum ..."; 2.0.1 comes back, as
    test_a_checkpoint_without_room_fails_health_and_the_collector_recovers_once_freed shows
    on both with DuckDB's checkpoint left on). So DuckDB's own checkpoint at a commit is off
    (``_connect``) and the pipeline's starts only with the log's size free on the disk, and
    a margin (the blocks it writes hold at most the log's data), which also names the
    shortfall for whoever frees the space. A log that cannot be checkpointed keeps every
    commit: it is replayed at the next open.
    """
    try:
        wal = os.stat(f"{path}.wal").st_size
    except FileNotFoundError:
        return None
    disk = os.statvfs(os.path.dirname(os.path.abspath(path)))
    free, need = disk.f_bavail * disk.f_frsize, wal + CHECKPOINT_MARGIN
    if free >= need:
        return None
    mib = 1024 * 1024
    return (f"no room to checkpoint the store's {wal // mib} MiB write-ahead log into {path}: "
            f"{free // mib} MiB free on its disk, {need // mib} MiB needed; free space there")


DUCKDB_MAGIC: Final = b"DUCK"
"""A DuckDB database file has these bytes at offset 8."""
STORAGE_VERSION: Final = "v1.0.0"
"""The storage format of every file a read-write store writes, whichever DuckDB runs: the one
DuckDB 1.4.4 writes itself, the oldest the collector extra takes and the lake's. DuckDB 2.x
would otherwise write its own format, which 1.4.4 cannot open ("version number 999"), and a
store moves between the two (``lake import --db`` runs on the lake's DuckDB)."""


def connect(path: str, *, read_only: bool,
             memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """Connect to a DuckDB *file*, refusing anything DuckDB would not store into.

    DuckDB reads a path named like data (``runs.jsonl``, ``x.csv``, ...) as that data, on an
    in-memory database: every write would be acknowledged and lost. So an existing file must
    be a DuckDB file, and the database opened must be backed by ``path``.

    Raises:
        SchemaError: ``path`` is not (and cannot become) a DuckDB database file.
    """
    if path != ":memory:":
        file = Path(path)
        if file.is_dir():
            raise SchemaError(f"{path} is a directory, not a DuckDB file")
        if file.is_file() and file.stat().st_size == 0:  # DuckDB 1.4 opens none
            raise SchemaError(f"{path} is an empty file, not a DuckDB file (was it "
                              "truncated?); remove it, or give the store a new name")
        if file.is_file():
            with file.open("rb") as handle:
                head = handle.read(16)
            if head[8:12] != DUCKDB_MAGIC:
                raise SchemaError(f"{path} is not a DuckDB file (is it the wrong file?); "
                                  "give the store a new name, such as loopscope.duckdb")
    config: dict[str, str | bool | int | float | list[str]] = (
        {"memory_limit": memory_limit} if memory_limit else {})
    if not read_only:  # the files it writes, itself and ``export``'s, in STORAGE_VERSION
        config["storage_compatibility_version"] = STORAGE_VERSION
    if not read_only and path != ":memory:":  # for DuckDB 1.4.4: ``checkpoint_shortfall``
        config["checkpoint_threshold"] = "1TB"
    con = duckdb.connect(path, read_only=read_only, config=config)
    if path != ":memory:":
        backing = con.execute(
            "select path from duckdb_databases() where database_name = current_database()"
        ).fetchall()
        if not backing or not backing[0][0]:
            con.close()
            raise SchemaError(f"DuckDB would read {path} as data rather than store into it "
                              "(names ending in .jsonl, .csv, .parquet, ...); give the store a "
                              "name ending in .duckdb")
    return con
