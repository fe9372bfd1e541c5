"""The collector's DuckDB store: one file, one writer; or a DuckLake that N collectors write
and every reader reads (``storage.ducklake``). The named reads over either are ``reads``.

``open_database(path)`` opens (and migrates) the file read-write for the collector, which is
its only writer; ``open_database(path, read_only=True)`` opens a copy or a stopped
collector's file for reading after the fact. ``open_lake(lake)`` attaches a lake (and
migrates it), for writing and reading alike. Each reader thread takes its own ``cursor()``.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import threading
import time
from pathlib import Path
from typing import Final

import duckdb

from .ducklake import ALIAS as LAKE_ALIAS
from .ducklake import Lake, LakeError
from .ducklake import connect as lake_connect
from .port import Store
from .schema import LATEST, SchemaError, current_version, migrate

logger = logging.getLogger(__name__)

__all__ = ["Database", "Lake", "LakeError", "SchemaError", "Store", "open_database", "open_lake"]


class Database:
    """An open store. The read-write connection belongs to the pipeline thread."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str, read_only: bool,
                 memory_limit: str | None = None, lake: Lake | None = None) -> None:
        self.con = con
        self.path = path
        self.read_only = read_only
        self.memory_limit = memory_limit
        self.lake = lake
        """Where the lake is, for a store in a lake (``path`` then names it for people)."""
        self.left: str | None = None
        """Why the file at ``path`` is no longer this database (``leave_file``), or None."""
        self._lock = threading.Lock()

    @property
    def generation(self) -> object:
        """Changes when the store is reopened (``reopen``): cursors taken before are gone."""
        return self.con

    def leave_file(self, reason: str) -> None:
        """The file at ``path`` is not this database any more (another was moved or copied
        over it while it was open: ``health.StoreWatch``): nothing is written into it again.
        ``checkpoint`` and ``reopen`` refuse, and ``close`` does not checkpoint (DuckDB
        would write this database's blocks into the other file, undoing a restore)."""
        with self._lock:
            self.left = reason

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for the calling thread (DuckDB connections are not shared across threads).
        In a lake, the lake is its default database (``use`` holds for one connection)."""
        with self._lock:
            cur = self.con.cursor()
        if self.lake is not None:
            cur.execute(f"use {LAKE_ALIAS}")
        return cur

    def close(self) -> None:
        """Close the connection (checkpointing the write-ahead log when read-write, if the
        disk has room for it: ``checkpoint_shortfall``; else the log is replayed at the next
        open; never into a file this database left: ``leave_file``)."""
        with self._lock:
            if self.lake is None and not self.read_only and self.path != ":memory:":
                with contextlib.suppress(duckdb.Error):
                    if self.left is not None or checkpoint_shortfall(self.path) is not None:
                        self.con.execute("pragma disable_checkpoint_on_shutdown")
            self.con.close()

    def reopen(self) -> None:
        """Close and open the file again (DuckDB replays its write-ahead log): the way back
        after DuckDB invalidated the database. Cursors taken before are closed with it.

        Raises:
            duckdb.Error, SchemaError: as ``open_database``; the old connection stays closed.
            OSError: the file is not this database any more (``leave_file``); the
                connection stays open.
        """
        with self._lock:
            self._refuse_if_left()
            with contextlib.suppress(duckdb.Error):
                self.con.close()
            if self.lake is not None:
                self.con = lake_connect(self.lake, memory_limit=self.memory_limit,
                                        read_only=self.read_only)
                return
            self.con = _connect(self.path, read_only=self.read_only,
                                memory_limit=self.memory_limit)
            if not self.read_only:
                migrate(self.con)

    def export(self, path: str) -> None:
        """Write a copy of the open database (schema, keys and rows) to a new file ``path``."""
        with self._lock:
            cur = self.con.cursor()
        try:
            name = cur.execute("select current_database()").fetchall()[0][0].replace('"', '""')
            # DuckDB 1.4.4 binds no ATTACH path (a parse error; 2.0.1 binds one): quoted
            quoted = "'" + path.replace("'", "''") + "'"
            cur.execute(f"attach {quoted} as loopscope_export")
            try:
                cur.execute(f'copy from database "{name}" to loopscope_export')
            finally:
                cur.execute("detach loopscope_export")
        finally:
            cur.close()

    def checkpoint(self) -> None:
        """Write the write-ahead log into the file; raises when the disk cannot take it.
        (A lake has no log of its own: every commit is in the catalog.)"""
        if self.lake is not None:
            return
        with self._lock:
            self._refuse_if_left()
            self.con.execute("checkpoint")

    def _refuse_if_left(self) -> None:
        if self.left is not None:
            raise OSError(f"not writing into {self.path}: {self.left}")


MIGRATE_ATTEMPTS: Final = 5
"""Collectors starting together on one lake race to migrate it; the losers try again."""


def open_lake(lake: Lake, *, memory_limit: str | None = None,
              read_only: bool = False) -> Database:
    """Attach the lake (``storage.ducklake``) and bring its schema up to date; ``read_only``: a
    reader (``loopscope metrics``, the dashboard, exports), which changes nothing.

    Raises:
        LakeError: the extensions cannot be loaded.
        duckdb.Error: the catalog or the data path cannot be reached.
        SchemaError: the lake is from a newer loopscope, or (read-only) holds no loopscope
            store.
    """
    con = _attach_lake(lake, memory_limit=memory_limit, read_only=read_only)
    try:
        if read_only:
            _check_readable(con, str(lake), lake=True)
        else:
            for attempt in range(MIGRATE_ATTEMPTS):
                try:
                    migrate(con, lake=True)
                    break
                except duckdb.TransactionException:
                    if attempt == MIGRATE_ATTEMPTS - 1:
                        raise
    except BaseException:
        con.close()
        raise
    return Database(con, str(lake), read_only, memory_limit, lake=lake)


def _attach_lake(lake: Lake, *, memory_limit: str | None,
                 read_only: bool) -> duckdb.DuckDBPyConnection:
    """Attach ``lake``; collectors that start together on a new lake race to create
    DuckLake's own catalog tables, and the losers attach again once the winner has."""
    for attempt in range(MIGRATE_ATTEMPTS):
        try:
            return lake_connect(lake, memory_limit=memory_limit, read_only=read_only)
        except duckdb.Error as exc:
            if attempt == MIGRATE_ATTEMPTS - 1 or "Failed to initialize DuckLake" not in str(exc):
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("not reached")


def _check_readable(con: duckdb.DuckDBPyConnection, name: str, *, lake: bool = False) -> None:
    """Raise ``SchemaError`` unless ``con`` holds a loopscope store this version reads."""
    version = current_version(con)
    if version == 0:
        what = "lake" if lake else "store"
        raise SchemaError(f"{name} is not a loopscope {what} (no schema_version table)")
    if version > LATEST:
        raise SchemaError(f"{name} has schema version {version}; this loopscope reads up to "
                          f"{LATEST}")

def open_database(path: str | Path, *, read_only: bool = False,
                  memory_limit: str | None = None) -> Database:
    """Open the store at ``path`` (``:memory:`` for tests).

    ``memory_limit`` caps DuckDB's own memory (its cache of the file's blocks, and the work
    of a batch), as DuckDB's ``memory_limit`` setting, such as ``"512MB"``; by default DuckDB
    takes up to 80% of the machine's memory.

    Raises:
        SchemaError: the file is from a newer loopscope, or (read-only) is not a loopscope
            store at all.
        duckdb.IOException: the file is locked by another process (a running collector).
    """
    path = str(path)
    if read_only:
        if not Path(path).exists():
            raise FileNotFoundError(f"no such DuckDB file: {path}")
        con = _connect(path, read_only=True)
        try:
            _check_readable(con, path)
        except SchemaError:
            con.close()
            raise
        return Database(con, path, True)
    if path == ":memory:":
        con = _connect(path, read_only=False, memory_limit=memory_limit)
        migrate(con)
        return Database(con, path, False, memory_limit)
    _set_aside_interrupted_migration(path)
    recovered = _recovered_beside(path)
    try:
        con = _connect(path, read_only=False, memory_limit=memory_limit)
    except SchemaError as exc:
        if recovered:
            raise SchemaError(f"{exc}; {recovered}") from None
        raise
    if recovered:
        logger.warning("loopscope: %s", recovered)
    try:
        if current_version(con) > LATEST:
            migrate(con)  # refuses a store from a newer loopscope, changing nothing
        if current_version(con) < LATEST:
            _migrate_file(con, path)
    except BaseException:
        con.close()
        raise
    return Database(con, path, False, memory_limit)


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
    con.execute("checkpoint")
    marker = Path(path + MIGRATING)
    with marker.open("w", encoding="utf-8") as handle:
        handle.write("loopscope: a schema migration of this store is in progress\n")
        handle.flush()
        os.fsync(handle.fileno())
    migrate(con)
    con.execute("checkpoint")
    marker.unlink()


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


CHECKPOINT_BYTES: Final = 16 * 1024 * 1024
"""The write-ahead log is checkpointed into the file past this size (DuckDB's own default),
by the pipeline thread rather than by DuckDB at a commit: see ``checkpoint_shortfall``."""
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


def _connect(path: str, *, read_only: bool,
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
