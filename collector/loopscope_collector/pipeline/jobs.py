"""What a receiver hands the pipeline (a ``Job``), what the pipeline counts (``Stats``), and
what a job that was not stored means for its client.

A job fails in one of four ways, and each is answered differently: the data itself cannot be
stored (``Rejected``: a 400, the client must not retry), the request alone needs more memory
to store than the store has (``TooLargeToStore``: a 413, the client must split it), the store
cannot be written now
(``storage.health.StoreUnavailable``: a 503 and failing health until it recovers), or the
pipeline is full or stopping (``Overloaded``, ``PipelineStopped``: a 503).
``is_data_error`` and ``is_store_error`` sort an exception from a failed batch into these.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import duckdb
import pyarrow as pa

from ..normalize.spans import SpanRecord
from ..storage.writes.labels import Label


class Overloaded(RuntimeError):
    """The pipeline's queue is full; the client should retry later (503 + Retry-After)."""


class PipelineStopped(RuntimeError):
    """The pipeline is shutting down and accepts nothing more."""


class Rejected(ValueError):
    """The store refused this request's data (HTTP 400, gRPC INVALID_ARGUMENT): a retry of
    the same data would fail the same way."""


class TooLargeToStore(ValueError):
    """This request, stored alone, ran the store out of memory (``--store-memory``): HTTP
    413, gRPC RESOURCE_EXHAUSTED. A retry of it fails the same way (the pipeline stores a
    batch that runs out of memory request by request, so the request was alone); the client
    must send smaller batches."""


_FINISHING = threading.Lock()


@dataclass(eq=False)
class Job:
    """One request's spans (or human labels), and the event its receiver waits on."""

    spans: list[SpanRecord]
    labels: list[Label] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    stored: int = 0
    duplicates: int = 0

    callbacks: list[Callable[[], None]] = field(default_factory=list)

    def finish(self) -> None:
        """The pipeline is done with the job (stored, or failed: ``error``): wake its
        receiver, whether it waits (``wait``) or asked to be called (``add_done_callback``)."""
        with _FINISHING:
            self.done.set()
            callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback()

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the pipeline thread, or here if the job is done already)
        once the job is finished; then ``wait(0)`` answers at once."""
        with _FINISHING:
            if not self.done.is_set():
                self.callbacks.append(callback)
                return
        callback()

    def wait(self, timeout: float) -> None:
        """Block until the spans are committed; re-raise the pipeline's error, if any."""
        if not self.done.wait(timeout):
            raise TimeoutError(f"spans not stored within {timeout:.0f} s")
        if self.error is not None:
            raise self.error


@dataclass
class Stats:
    """Counters the collector exposes on /metrics (read from any thread)."""

    spans_received: int = 0
    spans_stored: int = 0
    spans_duplicate: int = 0
    spans_rejected: int = 0
    spans_conflicting: int = 0
    """Spans whose id was stored already with other content (the first is kept)."""
    commit_conflicts: int = 0
    """Batches stored again because their commit lost a race with another collector's on
    the same lake (``is_conflict``)."""
    episodes_misrouted: int = 0
    """Episodes this collector was sent whose calls another collector instance had stored:
    the router in front sends one episode to two collectors (docs/deploy.md)."""
    requests_overloaded: int = 0
    requests_rejected: Counter[str] = field(default_factory=Counter)
    """Requests answered 4xx for their content (malformed, too large, unstorable), by code."""
    batches: int = 0
    tool_calls: int = 0
    no_progress_steps: int = 0
    episodes_reevaluated: int = 0
    detection_failures: int = 0
    """Episodes of a batch whose detection failed (stored without verdicts)."""
    loops_by_kind: Counter[str] = field(default_factory=Counter)
    guard_actions: Counter[str] = field(default_factory=Counter)
    queue_spans: int = 0


def is_data_error(exc: BaseException) -> bool:
    """Whether the store refused the data itself (a retry fails the same way), rather than
    failed to write it (disk full, file gone: a retry may succeed)."""
    return isinstance(exc, _DATA_ERRORS) and "invalidated" not in str(exc)


_DATA_ERRORS = (
    duckdb.DataError, duckdb.IntegrityError, duckdb.InvalidInputException, pa.ArrowException,
    UnicodeError, OverflowError, RecursionError,
)


CONFLICT_RETRIES: Final = 5
"""Commits in a row that may lose a race with other collectors on one lake before the batch
fails (each retry runs over the lake as the winner left it)."""


_CONFLICTS: Final = ("Transaction conflict", "Exceeded the maximum retry count")


def is_conflict(exc: BaseException) -> bool:
    """Whether a commit failed because other transactions on the same lake changed what it
    touched first (DuckLake: "Transaction conflict - attempting to delete from table … but
    another transaction has compacted it"; or its own retries of the catalog's commit ran
    out while many committed at once): storing the batch again succeeds."""
    return isinstance(exc, duckdb.Error) and any(c in str(exc) for c in _CONFLICTS)


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
