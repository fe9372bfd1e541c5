"""The store's own errors: what a failed store operation means, decided here, where the
engine is known, and raised at the port's boundary (``Store.failures``, the open functions,
the named reads) so that no caller outside ``storage/`` sees an engine's exception.

Every failure is a ``StoreError``, permanent or retryable, and says which it is:

- ``PermanentStoreError``: the store refused the data itself (a retry fails the same way;
  the receivers answer 400, the client must not retry);
- ``RetryableStoreError``: the same operation may succeed later; of these,
  ``StoreOutOfMemory`` (the store ran out of its memory for this work, ``--store-memory``),
  ``StoreDown`` (it cannot be written or read now: disk full, I/O error, file gone, database
  invalidated, a lake's catalog away; health turns failing until it recovers), with
  ``StoreLocked`` (the file cannot be opened: another process holds it, or the disk refuses)
  and ``StoreConflict`` (another collector's commit on the same lake won a race: store the
  batch again) among them.

What a client is answered for each (HTTP and gRPC statuses) is the receive stage's one table
(``receive/answers.py``), not the store's. ``Cursor`` is what a reader or writer is handed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import ClassVar, TypeAlias

import duckdb
import pyarrow as pa

__all__ = ["Cursor", "PermanentStoreError", "RetryableStoreError", "StoreConflict",
           "StoreDown", "StoreError", "StoreLocked", "StoreOutOfMemory", "classify",
           "engine_failures", "kind_of", "store_failures"]

Cursor: TypeAlias = duckdb.DuckDBPyConnection


class StoreError(Exception):
    """A store operation failed, said by what it means rather than by the engine's exception
    (which is its ``__cause__``; ``kind`` names it, for logs and answers): ``retryable`` or
    not. Its message is the engine's."""

    retryable: ClassVar[bool] = True

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind or type(self).__name__
        """The type of the engine's error (``IOException``), or of this one."""


def kind_of(exc: BaseException) -> str:
    """What ``exc`` is, for a log or an answer: the engine's type for a store's error."""
    return exc.kind if isinstance(exc, StoreError) else type(exc).__name__


class PermanentStoreError(StoreError):
    """The data itself cannot be stored: the same operation fails the same way again."""

    retryable = False


class RetryableStoreError(StoreError):
    """The same operation may succeed later."""


class StoreOutOfMemory(RetryableStoreError):
    """The store ran out of its memory for this work (``--store-memory``)."""


class StoreDown(RetryableStoreError):
    """The store cannot be written or read now (disk full, I/O error, file gone, database
    invalidated; in a lake, the catalog database or the data path failing): health turns
    failing until it recovers."""


class StoreLocked(StoreDown):
    """The file cannot be opened or written: another process holds it (``held``), or the
    disk refuses."""

    @property
    def held(self) -> bool:
        """Whether another process holds the file's lock (a running collector)."""
        return "lock" in str(self).lower()


class StoreConflict(StoreDown):
    """A commit failed because other transactions on the same lake changed what it touched
    first (DuckLake: "Transaction conflict - attempting to delete from table … but another
    transaction has compacted it"; or its own retries of the catalog's commit ran out while
    many committed at once; or the catalog's PostgreSQL chose this commit as a deadlock's
    victim, "deadlock detected", when another collector's commit or housekeeping updated the
    same catalog rows in the other order): storing the batch again succeeds."""


_DATA_ERRORS = (
    duckdb.DataError, duckdb.IntegrityError, duckdb.InvalidInputException, pa.ArrowException,
    UnicodeError, OverflowError, RecursionError,
)
"""What the store raises for data it refuses (also from the Python side of a write: text
that does not encode, a number out of range, a value nested too deep)."""
_CONFLICTS = ("Transaction conflict", "Exceeded the maximum retry count", "deadlock detected")


def classify(exc: BaseException, *, lake: bool = False) -> StoreError | None:
    """``exc`` as the store's own error, or None for one that says nothing about the store
    (a bug, an interrupt). In a ``lake``, any engine error that is not the data's is the
    store's being down: the catalog database or the data path failing comes as a plain
    ``duckdb.Error`` ("Failed to query most recent snapshot for DuckLake: ... server closed
    the connection")."""
    if isinstance(exc, StoreError):
        return exc
    message, kind = str(exc) or type(exc).__name__, type(exc).__name__
    invalidated = "invalidated" in str(exc)
    if isinstance(exc, _DATA_ERRORS) and not invalidated:
        return PermanentStoreError(message, kind=kind)
    if isinstance(exc, duckdb.OutOfMemoryException):
        return StoreOutOfMemory(message, kind=kind)
    engine = isinstance(exc, duckdb.Error)
    if engine and any(c in str(exc) for c in _CONFLICTS):
        return StoreConflict(message, kind=kind)
    if isinstance(exc, duckdb.IOException):
        return StoreLocked(message, kind=kind)
    if (lake and engine) or invalidated or isinstance(
            exc, duckdb.FatalException | duckdb.TransactionException | OSError):
        return StoreDown(message, kind=kind)
    if engine:
        return RetryableStoreError(message, kind=kind)
    return None


def _engine_failure(exc: duckdb.Error, *, lake: bool) -> StoreError:
    failure = classify(exc, lake=lake)
    assert failure is not None  # (every engine error is the store's)
    return failure


@contextlib.contextmanager
def store_failures(*, lake: bool = False) -> Iterator[None]:
    """Raise what a failure inside means (``classify``), with the engine's error as its
    cause; an exception that says nothing about the store passes unchanged."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        failure = classify(exc, lake=lake)
        if failure is None:
            raise
        raise failure from exc


@contextlib.contextmanager
def engine_failures(*, lake: bool = False) -> Iterator[None]:
    """``store_failures`` for the engine's own errors only: what the code inside raises
    itself (``FileNotFoundError``, ``SchemaError``) passes unchanged. The open functions and
    the ``Store`` methods raise through it."""
    try:
        yield
    except duckdb.Error as exc:
        raise _engine_failure(exc, lake=lake) from exc
