"""What a failed store operation means, decided here, where the engine is known.

The pipeline and the receivers answer a failure by what it means, not by the engine's
exception types: the data itself cannot be stored (``is_data_error``: a 400, the client must
not retry), another collector's commit on the same lake won a race (``is_conflict``: store
the batch again), the store cannot be written now (``is_store_error``: a 503 and failing
health until it recovers), or the store ran out of memory for this batch
(``is_out_of_memory``: a 503 for this request only). ``StoreError`` is any error the engine
raises; ``StoreLocked`` one where the file cannot be opened or written (another process
holds it, or the disk refuses). ``Cursor`` is what a reader or writer is handed.
"""

from __future__ import annotations

from typing import ClassVar, Final, TypeAlias

import duckdb
import pyarrow as pa

__all__ = ["UNREADABLE_NOW", "Cursor", "PermanentStoreError", "RetryableStoreError", "StoreError",
           "StoreFailure", "StoreLocked", "classify", "is_conflict", "is_data_error",
           "is_out_of_memory", "is_retryable", "is_store_error"]

Cursor: TypeAlias = duckdb.DuckDBPyConnection
StoreError: Final = duckdb.Error
StoreLocked: Final = duckdb.IOException
UNREADABLE_NOW: Final = (duckdb.IOException, duckdb.FatalException)
"""What a store that cannot be read now raises (its file gone or locked, the database
invalidated): a read answers 503 and may be retried."""


def is_data_error(exc: BaseException) -> bool:
    """Whether the store refused the data itself (a retry fails the same way), rather than
    failed to write it (disk full, file gone: a retry may succeed)."""
    return isinstance(exc, _DATA_ERRORS) and "invalidated" not in str(exc)


_DATA_ERRORS = (
    duckdb.DataError, duckdb.IntegrityError, duckdb.InvalidInputException, pa.ArrowException,
    UnicodeError, OverflowError, RecursionError,
)


_CONFLICTS: Final = ("Transaction conflict", "Exceeded the maximum retry count")


def is_conflict(exc: BaseException) -> bool:
    """Whether a commit failed because other transactions on the same lake changed what it
    touched first (DuckLake: "Transaction conflict - attempting to delete from table … but
    another transaction has compacted it"; or its own retries of the catalog's commit ran
    out while many committed at once): storing the batch again succeeds."""
    return isinstance(exc, duckdb.Error) and any(c in str(exc) for c in _CONFLICTS)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether the store ran out of its memory for this work (``--store-memory``)."""
    return isinstance(exc, duckdb.OutOfMemoryException)


def is_store_error(exc: BaseException, *, lake: bool = False) -> bool:
    """Whether the store could not write (disk full, I/O error, file gone, database
    invalidated): health turns failing until it recovers. In a ``lake``, any DuckDB error
    that is not the data's: the catalog database or the data path failing comes as a plain
    ``duckdb.Error`` ("Failed to query most recent snapshot for DuckLake: ... server closed
    the connection")."""
    if isinstance(exc, duckdb.OutOfMemoryException):
        return False
    if lake and isinstance(exc, duckdb.Error) and not is_data_error(exc):
        return True
    return (isinstance(exc, duckdb.IOException | duckdb.FatalException
                       | duckdb.TransactionException | OSError)
            or "invalidated" in str(exc))


class StoreFailure(Exception):
    """A store operation failed, said by what it means rather than by the engine's exception
    (which is its ``__cause__``): ``retryable`` or not. What a client is answered for each
    (HTTP and gRPC statuses) is the receive stage's table, not the store's."""

    retryable: ClassVar[bool]


class RetryableStoreError(StoreFailure):
    """The same operation may succeed later: the store cannot be written or read now, ran
    out of memory for this work, or lost a commit race on a lake."""

    retryable = True


class PermanentStoreError(StoreFailure):
    """The data itself cannot be stored: the same operation fails the same way again."""

    retryable = False


def is_retryable(exc: BaseException) -> bool:
    """Whether the operation that raised ``exc`` may succeed if tried again later: every
    failure but the data's own (``is_data_error``)."""
    if isinstance(exc, StoreFailure):
        return exc.retryable
    return not is_data_error(exc)


def classify(exc: BaseException) -> StoreFailure:
    """``exc`` as the store's own failure (``raise classify(exc) from exc``)."""
    if isinstance(exc, StoreFailure):
        return exc
    kind = RetryableStoreError if is_retryable(exc) else PermanentStoreError
    return kind(str(exc) or type(exc).__name__)
