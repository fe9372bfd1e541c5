"""The embedded file's SQL dialect: the SQL that differs from a lake's
(``ducklake/dialect.py``). The schema's DDL (``sql/ddl``), the writers' statements
(``sql/writes``) and the named reads (``reads/sql/reads.sql``) are written in it as they are.
"""

from __future__ import annotations

__all__ = ["keyed_inserts"]


def keyed_inserts(table: str, view: str, *, on_conflict: str) -> list[str]:
    """The statement that inserts the rows of ``view`` into ``table`` by name: the table's
    primary key skips (or, with ``on_conflict="replace"``, replaces) the rows whose key is
    stored."""
    verb = "insert or ignore" if on_conflict == "ignore" else "insert or replace"
    return [f"{verb} into {table} by name select * from {view}"]
