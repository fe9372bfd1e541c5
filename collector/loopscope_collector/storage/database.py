"""``Database``: the one ``Store`` class today, over a DuckDB connection to the embedded file
(``duckdb_file``) or to an attached lake (``ducklake``)."""

from __future__ import annotations

import contextlib
import threading
from contextlib import AbstractContextManager

import duckdb

from .duckdb_file.connect import checkpoint_shortfall, connect
from .ducklake import ALIAS as LAKE_ALIAS
from .ducklake import Lake
from .ducklake import connect as lake_connect
from .errors import engine_failures, store_failures
from .schema import LATEST, SchemaError, current_version, migrate

__all__ = ["Database", "check_readable"]


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

    def failures(self) -> AbstractContextManager[None]:
        """Raise the store's own errors (``errors.StoreError``) for what fails inside."""
        return store_failures(lake=self.lake is not None)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for the calling thread (DuckDB connections are not shared across threads).
        In a lake, the lake is its default database (``use`` holds for one connection)."""
        with engine_failures(lake=self.lake is not None):
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
            StoreError, SchemaError: as ``open_database``; the old connection stays closed.
            OSError: the file is not this database any more (``leave_file``); the
                connection stays open.
        """
        with self._lock, engine_failures(lake=self.lake is not None):
            self._refuse_if_left()
            with contextlib.suppress(duckdb.Error):
                self.con.close()
            if self.lake is not None:
                self.con = lake_connect(self.lake, memory_limit=self.memory_limit,
                                        read_only=self.read_only)
                return
            self.con = connect(self.path, read_only=self.read_only,
                                memory_limit=self.memory_limit)
            if not self.read_only:
                migrate(self.con)

    def export(self, path: str) -> None:
        """Write a copy of the open database (schema, keys and rows) to a new file ``path``."""
        with engine_failures(lake=self.lake is not None):
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
        with self._lock, engine_failures():
            self._refuse_if_left()
            self.con.execute("checkpoint")

    def _refuse_if_left(self) -> None:
        if self.left is not None:
            raise OSError(f"not writing into {self.path}: {self.left}")


def check_readable(con: duckdb.DuckDBPyConnection, name: str, *, lake: bool = False) -> None:
    """Raise ``SchemaError`` unless ``con`` holds a loopscope store this version reads."""
    version = current_version(con)
    if version == 0:
        what = "lake" if lake else "store"
        raise SchemaError(f"{name} is not a loopscope {what} (no schema_version table)")
    if version > LATEST:
        raise SchemaError(f"{name} has schema version {version}; this loopscope reads up to "
                          f"{LATEST}")
