"""Opening a lake as a ``Store``: attach it (collectors starting together race to create
DuckLake's catalog) and bring its schema up to date."""

from __future__ import annotations

import time
from typing import Final

import duckdb

from ..database import Database, check_readable
from ..errors import engine_failures
from ..schema import migrate
from . import Lake
from . import connect as lake_connect

__all__ = ["open_lake"]


MIGRATE_ATTEMPTS: Final = 5
"""Collectors starting together on one lake race to migrate it; the losers try again."""


def open_lake(lake: Lake, *, memory_limit: str | None = None,
              read_only: bool = False) -> Database:
    """Attach the lake (``storage.ducklake``) and bring its schema up to date; ``read_only``: a
    reader (``loopscope metrics``, the dashboard, exports), which changes nothing.

    Raises:
        LakeError: the extensions cannot be loaded.
        StoreError: the catalog or the data path cannot be reached.
        SchemaError: the lake is from a newer loopscope, or (read-only) holds no loopscope
            store.
    """
    with engine_failures(lake=True):
        return _open(lake, memory_limit=memory_limit, read_only=read_only)


def _open(lake: Lake, *, memory_limit: str | None, read_only: bool) -> Database:
    con = _attach_lake(lake, memory_limit=memory_limit, read_only=read_only)
    try:
        if read_only:
            check_readable(con, str(lake), lake=True)
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
