"""The storage port: what the rest of the collector may ask of a store, whichever engine
holds it.

``Store`` is the one shape the pipeline (``pipeline/thread.py``), the named reads
(``reads/named.py``), health (``health.py``), metrics and the offline commands are handed:
cursors for transactions, look-ups, batch writes (``writes/``) and named reads (``reads/``),
and the life of the store (checkpoint, reopen, export, close). Two engines implement it
today, each opened by its own function: the embedded DuckDB file (``open_database``) and the
DuckLake (``open_lake``, ``ducklake/``). What a failure of either means is decided in
``errors.py``: the open functions, the methods below and whatever runs inside
``failures()`` raise the store's own errors (``StoreError``: permanent or retryable, and
which), never an engine's exception for a caller to look at.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from .errors import Cursor

if TYPE_CHECKING:
    from .ducklake import Lake

__all__ = ["Store"]


class Store(Protocol):
    """An open store: the embedded file or a lake.

    A cursor is a transaction scope of its own (``begin`` / ``commit`` / ``rollback`` on it),
    taken once per thread; the pipeline thread alone writes, through ``writes/``.
    """

    path: str
    """The file, or the lake named for people."""
    read_only: bool
    memory_limit: str | None
    """The engine's own memory cap (``--store-memory``), or None for its default."""
    lake: Lake | None
    """Where the lake is, for a store in a lake; None for the embedded file."""
    left: str | None
    """Why the file is no longer this store (``leave_file``), or None."""

    @property
    def generation(self) -> object:
        """Changes when the store is reopened: cursors taken before are closed with it."""
        ...

    def cursor(self) -> Cursor:
        """A cursor for the calling thread."""
        ...

    def failures(self) -> AbstractContextManager[None]:
        """Around work on this store's cursors: what fails inside is raised as the store's
        own error (``errors.StoreError``, with the engine's as its cause)."""
        ...

    def leave_file(self, reason: str) -> None:
        """Nothing is written into the file again (another was put over it)."""
        ...

    def checkpoint(self) -> None:
        """Make every commit durable in the store itself (raises when it cannot now)."""
        ...

    def reopen(self) -> None:
        """Close and open again: the way back after the engine gave up on the store."""
        ...

    def export(self, path: str) -> None:
        """Write a copy of the store (schema, keys and rows) to a new file ``path``."""
        ...

    def close(self) -> None:
        ...
