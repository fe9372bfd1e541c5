"""The embedded file's SQL dialect: the SQL that differs from a lake's
(``ducklake/dialect.py``). The schema's DDL (``sql/ddl``), the writers' statements
(``sql/writes``) and the named reads (``reads/sql/reads.sql``) are written in it as they are.
"""

from __future__ import annotations

__all__ = ["keyed_inserts"]


def keyed_inserts(table: str, view: str, *, on_conflict: str) -> list[str]:
    """The statement that inserts the rows of ``view`` into ``table`` by name: the table's
    primary key skips (or, with ``on_conflict="replace"``, replaces) the rows whose key is
    stored; with ``on_conflict="new"`` (the caller looked the keys up in this transaction:
    none is stored) a plain insert, which a stored key fails (``ConstraintException``). The
    conflict check costs DuckDB 1.4.4 about 7-14 ms a statement, whatever the rows
    (BENCHMARKS.md, "Where the rest of the gap is: a batch's fixed cost")."""
    verb = {"ignore": "insert or ignore", "replace": "insert or replace", "new": "insert"}[
        on_conflict]
    return [f"{verb} into {table} by name select * from {view}"]
