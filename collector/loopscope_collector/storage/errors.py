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

from typing import Final, TypeAlias

import duckdb
import pyarrow as pa

__all__ = ["UNREADABLE_NOW", "Cursor", "StoreError", "StoreLocked", "is_conflict",
           "is_data_error", "is_out_of_memory", "is_store_error"]

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
