"""The named reads, parsed from ``sql/reads.sql``: what the HTTP read API, the dashboard,
``loopscope metrics`` and exports run over a store.

A read is a ``-- name:`` block with ``$named`` parameters; the API accepts only names that
exist in ``READS`` and only the parameters the read uses, so a client can never send SQL.
Every parameter's type is declared once at the top of the file (``-- param NAME: TYPE``, with
the rule its values follow: ``params``), and query-string text is converted and checked by that
declaration, never by its look (``007`` stays text for a text parameter), so a value the read
cannot take is refused, naming the parameter, before the read runs. A read lists the
parameters it cannot do without (``-- requires: NAME``); any other parameter left out is bound
as NULL (each read treats NULL as "no filter"). Results are fetched in full before returning:
no half-read DuckDB result leaves this module (DuckDB 2.0.1
refuses a second query on a connection with a pending result).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Final, TypeVar

import pyarrow as pa

from ..storage.errors import Cursor, StoreError
from .params import BadValue, Param

if TYPE_CHECKING:
    from ..storage import Store

R = TypeVar("R")

_NAME_LINE = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_PARAM = re.compile(r"\$([a-z_][a-z0-9_]*)")
_DOC_LINE = re.compile(r"^--\s?(.*)$")
_TYPE_LINE = re.compile(r"^--[ \t]*param[ \t]+(\w+)[ \t]*:[ \t]*(\w+)(.*)$", re.MULTILINE)
_REQUIRES_LINE = re.compile(r"^--\s*requires:\s*(.+)$", re.MULTILINE)


class UnknownRead(KeyError):
    """A read name or parameter that does not exist, or a parameter value it cannot take."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class NamedRead:
    """One read: its SQL, the parameters it takes (with their declared types), those it
    requires, its one-line description, and each parameter's declaration (``params.Param``:
    its type and the rule its values follow)."""

    name: str
    sql: str
    params: tuple[str, ...]
    doc: str
    types: dict[str, str]
    required: tuple[str, ...] = ()
    declared: dict[str, Param] = field(default_factory=dict)

    def convert(self, text: Mapping[str, str]) -> dict[str, Any]:
        """Query-string values as the declared types of their parameters, each checked by
        its declaration's rule (a limit of at least 0, a sort the read knows, a price table
        that parses).

        Raises:
            UnknownRead: a parameter the read does not take, or a value it cannot take (the
                message names the parameter and what it takes).
        """
        self._check_names(text)
        values: dict[str, Any] = {}
        for key, value in text.items():
            param = self.declared.get(key) or Param(key, self.types[key])
            try:
                values[key] = param.convert(value)
            except BadValue as exc:
                shown = value if len(value) <= 60 else value[:57] + "..."
                wrong = f": {exc.detail}" if exc.detail else f", not {shown!r}"
                raise UnknownRead(f"parameter {key} of read {self.name!r} must be "
                                  f"{exc.takes}{wrong}") from None
        return values

    def _check_names(self, params: Mapping[str, Any]) -> None:
        extra = set(params) - set(self.params)
        if extra:
            takes = ", ".join(self.params) or "no parameters"
            raise UnknownRead(f"read {self.name!r} takes {takes}, not "
                              f"{', '.join(sorted(extra))}")
        missing = [p for p in self.required if params.get(p) is None]
        if missing:
            raise UnknownRead(f"read {self.name!r} requires {', '.join(missing)}")


_FRAGMENT: Final = re.compile(
    r"^--[ \t]*fragment:[ \t]*(\w+)[ \t]*\n((?:--[^\n]*\n)*)(.*?)^--[ \t]*end fragment[ \t]*\n?",
    re.MULTILINE | re.DOTALL,
)
"""A piece of SQL several reads share, written once at the top of reads.sql (its comment lines,
then its text, up to ``-- end fragment``); a read names it ``/*fragment NAME*/``."""


def _fragments(text: str) -> dict[str, str]:
    return {m.group(1): m.group(3).rstrip() for m in _FRAGMENT.finditer(text)}


def fragment(name: str) -> str:
    """The text of the ``reads.sql`` fragment ``name`` (for a test that holds a rule written
    in SQL equal to the same rule in Python).

    Raises:
        KeyError: reads.sql defines no such fragment.
    """
    return _fragments(files(__package__).joinpath("sql", "reads.sql").read_text(
        encoding="utf-8"))[name]


def _with_fragments(text: str) -> str:
    fragments = _fragments(text)
    text = _FRAGMENT.sub("", text)
    for name in re.findall(r"/\*fragment (\w+)\*/", text):
        if name not in fragments:
            raise ValueError(f"reads.sql uses /*fragment {name}*/ but defines no such fragment")
    for name, body in fragments.items():
        text = text.replace(f"/*fragment {name}*/", body)
    return text


def _load_reads() -> dict[str, NamedRead]:
    text = files(__package__).joinpath("sql", "reads.sql").read_text(encoding="utf-8")
    text = _with_fragments(text)
    header, *pairs = _NAME_LINE.split(text)
    declared = {name: Param.declared(name, type_, rule)
                for name, type_, rule in _TYPE_LINE.findall(header)}
    types = {name: param.type for name, param in declared.items()}
    reads: dict[str, NamedRead] = {}
    for name, body in zip(pairs[::2], pairs[1::2], strict=True):
        body = body.strip()
        required = tuple(p.strip() for m in _REQUIRES_LINE.findall(body) for p in m.split(","))
        doc = " ".join(
            m.group(1).strip() for line in body.splitlines()
            if (m := _DOC_LINE.match(line)) and not _REQUIRES_LINE.match(line)
        )
        params = tuple(dict.fromkeys(_PARAM.findall(body)))
        undeclared = [p for p in params if p not in types]
        if undeclared:
            raise ValueError(f"reads.sql: read {name!r} uses ${', $'.join(undeclared)} "
                             "without a '-- param NAME: TYPE' line at the top of the file")
        reads[name] = NamedRead(name, body.rstrip(";"), params, doc,
                                {p: types[p] for p in params}, required,
                                {p: declared[p] for p in params})
    return reads


READS: Final = _load_reads()  # parsed at import: a broken file fails at start-up


def run_read(
    cur: Cursor, name: str, params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Run the named read with ``params``; returns finished rows as dicts.

    Raises:
        UnknownRead: no such read, a parameter it does not take, or one it requires missing.
    """
    named, bound = _bound(name, params)
    result = cur.execute(named.sql, bound)
    columns = [d[0] for d in result.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in result.fetchall()]


def _bound(name: str, params: Mapping[str, Any]) -> tuple[NamedRead, dict[str, Any]]:
    """The read named ``name`` and its parameters as bound (NULL for each one left out)."""
    named = READS.get(name)
    if named is None:
        raise UnknownRead(f"no read named {name!r}; reads: {', '.join(sorted(READS))}")
    named._check_names(params)
    return named, {p: params.get(p) for p in named.params}


def read(db: Store, name: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Run a named read on a fresh cursor of ``db`` (any thread); returns finished rows.

    Raises:
        UnknownRead: as ``run_read``.
        StoreError: the store failed (``StoreDown``: it cannot be read now).
    """
    with db.failures():
        cur = db.cursor()
        try:
            rows = run_read(cur, name, params or {})
        finally:
            cur.close()
    return rows


def read_table(db: Store, name: str, params: Mapping[str, Any] | None = None) -> pa.Table:
    """``read``, columnar: the same rows as one Arrow table, fetched in full (what the read
    API sends a client that accepts Arrow: no row is made a Python object on the way).

    Raises:
        UnknownRead: as ``run_read``.
        StoreError: as ``read``.
    """
    named, bound = _bound(name, params or {})
    with db.failures():
        cur = db.cursor()
        try:
            if hasattr(cur, "fetch_arrow_table"):
                # DuckDB 1.4.4: a relation with parameters runs ~8x slower than the
                # statement (replay_calls over a million calls: 0.32 s against 0.04 s)
                table = cur.execute(named.sql, bound).fetch_arrow_table()
            else:  # 2.0.1 has no fetch_arrow_table, and runs the relation as fast
                table = cur.sql(named.sql, params=bound).to_arrow_table()
        finally:
            cur.close()
    return table


@contextlib.contextmanager
def snapshot(db: Store) -> Iterator[Callable[[str, Mapping[str, Any]], list[dict[str, Any]]]]:
    """A ``read(name, params)`` whose reads all see one state of ``db``: one cursor in one
    read transaction (over a lake, one DuckLake snapshot, looked up once rather than per
    read), so rows of several reads agree with each other.

    Raises:
        UnknownRead: as ``run_read``.
        StoreError: the store failed (opening the snapshot, or a read in it).
    """
    cur = db.cursor()
    try:
        with db.failures():
            cur.execute("begin transaction")
        try:
            yield partial(_read_in, db, cur)
        finally:
            with contextlib.suppress(StoreError), db.failures():
                cur.execute("rollback")  # it only read
    finally:
        cur.close()


def _read_in(db: Store, cur: Cursor, name: str, params: Mapping[str, Any]
             ) -> list[dict[str, Any]]:
    with db.failures():
        rows = run_read(cur, name, params)
    return rows
