"""Schema migrations: the DDL files in ``sql/ddl``, applied in ``_order``, once each.

Each file is one schema version (its number). ``migrate`` applies the versions a database has
not seen, each in its own transaction, and records them in ``schema_version``; a database
from a newer loopscope is refused rather than misread.
"""

from __future__ import annotations

import contextlib
from importlib.resources import files
from typing import Final

import duckdb

from .ducklake.dialect import lake_ddl

DDL = files(__package__).joinpath("sql", "ddl")


def _migrations() -> list[tuple[int, str, str]]:
    order = DDL.joinpath("_order").read_text(encoding="utf-8").splitlines()
    names = [line.strip() for line in order if line.strip() and not line.startswith("#")]
    return [(int(name.split("_", 1)[0]), name, DDL.joinpath(name).read_text(encoding="utf-8"))
            for name in names]


MIGRATIONS: Final = _migrations()  # read at import: a missing file fails at start-up
LATEST: Final = MIGRATIONS[-1][0]
CALL_FACTS: Final = 16
"""The version that keeps each run's call facts on its row (016_episodes_call_facts.sql):
migrating to it counts them for the runs already stored."""


class SchemaError(RuntimeError):
    """The database's schema cannot be used by this version of loopscope."""


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    """The schema version of the open database (0 for an empty one)."""
    exists = con.execute(
        "select count(*) from information_schema.tables where table_name = 'schema_version'"
    ).fetchall()  # fetchall: DuckDB 2.0.1 refuses new work while a result is unfinished
    if not exists[0][0]:
        return 0
    version = con.execute("select max(version) from schema_version").fetchall()[0][0]
    return int(version) if version is not None else 0


def migrate(con: duckdb.DuckDBPyConnection, *, lake: bool = False) -> int:
    """Bring the schema up to ``LATEST``; returns the version it started from.

    ``lake``: the database is a DuckLake (its DDL in the lake's dialect:
    ``ducklake.dialect.lake_ddl``). Collectors that start together on one lake race to
    migrate it: DuckLake lets one commit and fails the others, which then find the version
    applied and go on.
    """
    stamp = "" if lake else " not null default current_timestamp"
    key = "" if lake else " primary key"
    con.execute(
        "create table if not exists schema_version ("
        f" version integer{key}, name varchar not null, applied_at timestamp{stamp})"
    )
    start = current_version(con)
    if start > LATEST:
        raise SchemaError(
            f"this database has schema version {start}, newer than this loopscope "
            f"understands ({LATEST}); upgrade loopscope"
        )
    for version, name, ddl in MIGRATIONS:
        if version <= current_version(con):
            continue
        con.execute("begin transaction")
        try:
            con.execute(lake_ddl(ddl) if lake else ddl)
            if version == CALL_FACTS:  # count the runs stored before it (one pass)
                from .writes.episodes import recount_calls
                recount_calls(con, None)
            con.execute("insert into schema_version (version, name, applied_at) "
                        "values ($v, $n, now()::timestamp)", {"v": version, "n": name})
            con.execute("commit")
        except Exception:
            with contextlib.suppress(duckdb.Error):  # a failed commit has rolled back
                con.execute("rollback")
            if not lake or current_version(con) < version:
                raise
    return start
