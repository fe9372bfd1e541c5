"""The lake's SQL dialect: all the SQL that differs in a DuckLake from the embedded file
(``duckdb_file/dialect.py``), in one place.

DuckLake has no primary keys, no indexes and only literal defaults. So the schema's DDL is
rewritten (``lake_ddl``), the writers insert what is not stored yet rather than rely on a key
(``keyless_inserts``), fill the time stamps a default fills in a file, and upsert by MERGE
(``as_merge``). ``is_lake`` tells a cursor's dialect.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from typing import Final

import duckdb

__all__ = ["as_merge", "is_lake", "keyless_inserts", "lake_ddl"]

_PRIMARY_KEY: Final = re.compile(r",\s*primary key\s*\([^)]*\)|\s+primary key\b", re.IGNORECASE)
_INDEX: Final = re.compile(r"create\s+index[^;]*;", re.IGNORECASE)
_STAMP: Final = re.compile(r"\s+not null\s+default\s+current_timestamp", re.IGNORECASE)
_BOOLEAN_DEFAULT: Final = re.compile(r"default\s+(true|false)\b", re.IGNORECASE)


def lake_ddl(ddl: str) -> str:
    """A schema version's DDL as DuckLake takes it: no primary keys or indexes (the writers
    insert only what is not stored: ``keyless_inserts``), time stamps filled by the
    writers (``queries.STAMPED``) rather than by a default, boolean defaults as literals."""
    ddl = _PRIMARY_KEY.sub("", ddl)
    ddl = _INDEX.sub("", ddl)
    ddl = _STAMP.sub("", ddl)
    return _BOOLEAN_DEFAULT.sub(lambda m: f"default '{m.group(1).lower()}'", ddl)


_DIALECTS: Final[weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, bool]] = (
    weakref.WeakKeyDictionary())
"""``is_lake``'s answer per cursor: a cursor's default database is set once, when it is
opened (``ducklake.connect``, ``Database.cursor``), so DuckDB is asked once per cursor, not
in a statement of its own before each of a batch's writes."""


def is_lake(cur: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``cur``'s default database is a lake (the writers' dialect)."""
    known = _DIALECTS.get(cur)
    if known is None:
        found = cur.execute("select type from duckdb_databases() "
                            "where database_name = current_database()").fetchall()
        known = _DIALECTS[cur] = bool(found) and found[0][0] == "ducklake"
    return known


def keyless_inserts(table: str, view: str, keys: Sequence[str], *, stamp: str | None,
                    on_conflict: str) -> list[str]:
    """The statements that insert the rows of ``view`` into ``table`` by name without a key
    to conflict on: the rows whose ``keys`` are stored are left out (or, with
    ``on_conflict="replace"``, deleted first), one row per key is kept from the batch, and
    the time stamp column ``stamp`` (a default fills it in a file) is set to now."""
    match = " and ".join(f"t.{k} = i.{k}" for k in keys)
    stamped = f", now()::timestamp as {stamp}" if stamp else ""
    statements = []
    if on_conflict == "replace":
        statements.append(f"delete from {table} t where exists "
                          f"(select 1 from {view} i where {match})")
    statements.append(
        f"insert into {table} by name select * exclude (rn) from ("
        f"select *{stamped}, row_number() over (partition by {', '.join(keys)}) as rn "
        f"from {view} i where not exists (select 1 from {table} t where {match})"
        f") where rn = 1")
    return statements


def as_merge(upsert: str) -> str:
    """The upsert as a MERGE on the episode id, for a lake (no key to conflict on): the same
    columns, each by the same rule (``excluded`` names the incoming row in both)."""
    head, rules = upsert.split("on conflict (episode_id) do update set", 1)
    source = re.sub(r"\s+from incoming_episodes\s*$",
                    ", now()::timestamp as updated_at from incoming_episodes",
                    head.split("insert into episodes by name", 1)[1].rstrip())
    rules = rules.replace("updated_at = now()", "updated_at = now()::timestamp")
    return (f"merge into episodes using ({source}) as excluded "
            f"on episodes.episode_id = excluded.episode_id "
            f"when matched then update set {rules} when not matched then insert by name")
