"""What a receiver hands the pipeline (a ``Job``), what the pipeline counts (``Stats``), and
what a job that was not stored means for its client.

A job fails in one of four ways, and each is answered differently: the data itself cannot be
stored (``Rejected``: a 400, the client must not retry), the request alone needs more memory
to store than the store has (``TooLargeToStore``: a 413, the client must split it), the store
cannot be written now
(``storage.health.StoreUnavailable``: a 503 and failing health until it recovers), or the
pipeline is full or stopping (``Overloaded``, ``PipelineStopped``: a 503).
``storage.errors`` sorts an exception from a failed batch into these.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

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
            try:
                raise self.error
            finally:
                # As ``concurrent.futures.Future.result`` does: the error's traceback holds
                # this frame, and this frame the job that holds the error, a reference cycle
                # that would keep every frame the error passes through (the receiver's, with
                # the request's spans and body) until a full garbage collection.
                del self


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


CONFLICT_RETRIES: Final = 5
"""Commits in a row that may lose a race with other collectors on one lake before the batch
fails (each retry runs over the lake as the winner left it)."""


