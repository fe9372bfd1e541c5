"""Opening the embedded file as a ``Store`` (and migrating it)."""

from __future__ import annotations

from pathlib import Path

from ..database import Database, check_readable
from ..errors import engine_failures
from ..schema import LATEST, SchemaError, current_version, migrate
from .connect import (
    _migrate_file,
    _recovered_beside,
    _set_aside_interrupted_migration,
    connect,
    logger,
)

__all__ = ["open_database"]


def open_database(path: str | Path, *, read_only: bool = False,
                  memory_limit: str | None = None) -> Database:
    """Open the store at ``path`` (``:memory:`` for tests).

    ``memory_limit`` caps DuckDB's own memory (its cache of the file's blocks, and the work
    of a batch), as DuckDB's ``memory_limit`` setting, such as ``"512MB"``; by default DuckDB
    takes up to 80% of the machine's memory.

    Raises:
        SchemaError: the file is from a newer loopscope, or (read-only) is not a loopscope
            store at all.
        FileNotFoundError: (read-only) there is no such file.
        StoreLocked: the file is locked by another process (a running collector: ``held``),
            or cannot be opened.
        StoreError: DuckDB cannot open it otherwise.
    """
    path = str(path)
    if read_only and not Path(path).exists():
        raise FileNotFoundError(f"no such DuckDB file: {path}")
    with engine_failures():
        return _open(path, read_only=read_only, memory_limit=memory_limit)


def _open(path: str, *, read_only: bool, memory_limit: str | None) -> Database:
    if read_only:
        con = connect(path, read_only=True)
        try:
            check_readable(con, path)
        except SchemaError:
            con.close()
            raise
        return Database(con, path, True)
    if path == ":memory:":
        con = connect(path, read_only=False, memory_limit=memory_limit)
        migrate(con)
        return Database(con, path, False, memory_limit)
    _set_aside_interrupted_migration(path)
    recovered = _recovered_beside(path)
    try:
        con = connect(path, read_only=False, memory_limit=memory_limit)
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
