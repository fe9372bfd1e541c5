"""What a receiver hands the pipeline (a ``Job``), what the pipeline counts (``Stats``), and
what a job that was not stored means for its client.

A job fails in one of four ways, and each is answered differently: the data itself cannot be
stored (``Rejected``: a 400, the client must not retry), the request alone needs more memory
to store than the store has (``TooLargeToStore``: a 413, the client must split it), the store
cannot be written now
(``storage.health.StoreUnavailable``: a 503 and failing health until it recovers), or the
pipeline is full or stopping (``Overloaded``, ``PipelineStopped``: a 503).
The store raises its own errors (``storage.errors``: permanent, out of memory, down); the
pipeline answers each with one of these.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from ..normalize.spans import SpanRecord
from ..storage.writes.labels import Label


class Overloaded(RuntimeError):
    """The pipeline cannot take the request now: what is queued would keep it waiting too
    long, or the queue is full; the client should retry later (503 + Retry-After, after
    ``retry_after_s`` when the pipeline can tell)."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


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
    queued_at: float = field(default_factory=time.monotonic)
    acknowledged: Callable[[], None] | None = None
    """Set once the receiver answered 200 before the batch (the request is in the spool:
    ``receive.spool``): called when the pipeline is done with the job. Such a job is never
    answered with an error: one that may pass is kept for a later batch (``settle``)."""
    attempts: int = 0
    """Batches that failed this acknowledged job while the store could be written."""
    seq: int = 0
    """The job's place in the order spans were submitted (``Pipeline.caught_up``)."""
    settled: bool = False
    """The pipeline is done with the job (``settle``) but may not have woken its receiver yet
    (``wake``): too late to acknowledge it."""

    def acknowledge(self, done: Callable[[], None]) -> bool:
        """The receiver answers 200 now (the request is spooled); ``done`` is called once the
        pipeline is done with the job. False when it is done already (then nothing is kept:
        the job's own outcome answers)."""
        with _FINISHING:
            if self.done.is_set() or self.settled:
                return False
            self.acknowledged = done
            return True

    def settle(self, *, keep_acknowledged: bool = False) -> bool:
        """The pipeline is done with the job (stored, or failed: ``error``); True when the
        job is done, its receiver to be woken by ``wake`` once the pipeline has freed the
        job's place in its queue (a client answered at once may send again at once). With
        ``keep_acknowledged`` (its error may pass), an acknowledged job is not done: its
        error is cleared and False returned (the pipeline keeps it for a later batch)."""
        with _FINISHING:
            if keep_acknowledged and self.acknowledged is not None:
                self.error = None
                return False
            self.settled = True
            return True

    def wake(self) -> None:
        """Wake the receiver of a settled job, whether it waits (``wait``) or asked to be
        called (``add_done_callback``)."""
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
    the same lake (``storage.errors.StoreConflict``)."""
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
    requests_lost: int = 0
    """Requests acknowledged (200, spooled) that the store then refused for good (a value it
    cannot hold, too large for its memory alone): logged, never stored."""
    spans_lost: int = 0


PRIOR_SPANS_PER_S: Final = 2000.0
"""The rate admission assumes before the pipeline has timed a batch (a collector just started):
about a 2-core machine's first, slowest batches (1,500 spans/s; 3,000-4,000 once warm). Taking
everything until then queued 19,000 spans in a burst, and the first batch's rate then answered
the next requests with a 20 s Retry-After."""


class Throughput:
    """How fast the pipeline stores spans, measured over its last ``WINDOW`` batches (spans
    stored per second of its work, the batches' fixed costs included), and so how long the
    spans queued take to store. Measured where the pipeline works: under load its batches
    grow, each one's fixed cost (transaction, look-ups, commit) is shared by more spans and
    the rate rises with them, so admission by this rate lets batches grow as far as the
    answers' bound allows. Thread-safe."""

    WINDOW: Final = 32

    def __init__(self) -> None:
        self._batches: deque[tuple[int, float]] = deque(maxlen=self.WINDOW)
        self._spans = 0
        self._seconds = 0.0
        self._waits: deque[tuple[float, float]] = deque()
        self._lock = threading.Lock()

    def record(self, spans: int, seconds: float) -> None:
        """A batch of ``spans`` took ``seconds`` to store, judge and commit."""
        with self._lock:
            if len(self._batches) == self._batches.maxlen:
                old_spans, old_seconds = self._batches[0]
                self._spans -= old_spans
                self._seconds -= old_seconds
            self._batches.append((spans, seconds))
            self._spans += spans
            self._seconds += seconds

    @property
    def spans_per_s(self) -> float | None:
        """Spans stored per second of the pipeline's work; None before a batch is measured."""
        with self._lock:
            return self._spans / self._seconds if self._spans and self._seconds > 0 else None

    def drain_s(self, spans: int) -> float:
        """How long ``spans`` queued take to store at the measured rate (``PRIOR_SPANS_PER_S``
        before a batch is measured)."""
        return spans / (self.spans_per_s or PRIOR_SPANS_PER_S)

    def waited(self, seconds: float, now: float) -> None:
        """A request's spans waited ``seconds`` from being queued until the pipeline was done
        with them."""
        with self._lock:
            self._waits.append((now, seconds))
            while self._waits and self._waits[0][0] < now - RECENT_S:
                self._waits.popleft()

    def longest_recent_wait_s(self, now: float) -> float:
        """The longest a request's spans waited, of those done in the last ``RECENT_S``."""
        with self._lock:
            return max((w for t, w in self._waits if t >= now - RECENT_S), default=0.0)


class AnswerTimes:
    """A histogram of how long export requests waited for their answers, by outcome
    (``stored``: 200; ``throttled``: told to retry later; ``refused``: any other answer), in
    Prometheus's cumulative buckets; the pipeline keeps one of how long spans waited to be
    stored too. Thread-safe."""

    BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

    def __init__(self) -> None:
        self._counts: dict[str, list[int]] = {}
        self._sums: dict[str, float] = {}
        self._lock = threading.Lock()

    def record(self, outcome: str, seconds: float) -> None:
        with self._lock:
            counts = self._counts.setdefault(outcome, [0] * (len(self.BUCKETS) + 1))
            counts[bisect.bisect_left(self.BUCKETS, seconds)] += 1
            self._sums[outcome] = self._sums.get(outcome, 0.0) + seconds

    def snapshot(self) -> dict[str, tuple[list[tuple[str, int]], float, int]]:
        """Per outcome: the cumulative (``le``, count) buckets ending in ``+Inf``, the sum of
        the seconds and the count."""
        with self._lock:
            out: dict[str, tuple[list[tuple[str, int]], float, int]] = {}
            for outcome, counts in sorted(self._counts.items()):
                running, buckets = 0, []
                for bound, count in zip((*self.BUCKETS, math.inf), counts, strict=True):
                    running += count
                    buckets.append(("+Inf" if bound == math.inf else f"{bound:g}", running))
                out[outcome] = (buckets, self._sums[outcome], running)
            return out


MAX_QUEUE_WAIT_S: Final = 1.2
"""The longest a request may be expected to wait to be stored for it to be taken while other spans
wait for the next batch: the time the spans queued ahead of it (the batch being stored included)
and its own take to store at the rate the pipeline measures (``Throughput``). Past it the request
is answered at once, 503 with a ``Retry-After`` of the time until the queue has drained enough to
take it (the time past this bound; at least the header's 1 s). A request that finds no spans
waiting is always taken (it heads the next batch, whatever the machine's speed). Under a sustained
overload, two batches in a row then take about this long together, so what is taken is stored
within about this (a flag reaches the store within about a second), a refusal comes at once, and
each batch's fixed cost is shared by as many spans as that bound allows. A spooled request is
answered 200 at once, before its batch; without a spool its 200 comes at the commit, within about
this. Not under the ``Retry-After``'s whole second: a client told to come back in 1 s found the
queue drained and the pipeline idle, so 0.8 s stored 0.73x what 1.2 s did under a closed loop of
four exporters (BENCHMARKS.md, "Answer time under overload", which measured 1.5 s too)."""
MAX_JOB_WAIT_S: Final = 5.0
"""The longest a request's spans wait in the queue for a batch to take them: past it they are
not stored and the request is answered 503 (retry later); not an acknowledged (spooled)
request's, which is kept until stored. So a request is either stored within
this and one batch, or not at all, and never stored after its client gave up on it
(OpenTelemetry's exporters wait 10 s by default); admission keeps the wait far below this, which
only a machine that suddenly slows down reaches."""
STOP_S: Final = 10.0
"""How long a stop waits for the pipeline to store what is queued before it stops after the
batch in progress (``Pipeline.stop``): admission keeps the queue to about
``MAX_QUEUE_WAIT_S`` of work, so only a machine that slowed down reaches it."""
SLOW_S: Final = 1.0
"""Answers that waited longer than this in the last ``RECENT_S`` make ``/healthz`` say
``slow``."""
RECENT_S: Final = 10.0


ACKNOWLEDGED_ATTEMPTS: Final = 5
"""Batches that may fail an acknowledged request, while the store can be written, before it
counts as lost (``Stats.requests_lost``): a request that fails alone again and again would
otherwise hold the pipeline for ever. While the store cannot be written it is kept however
long."""
CONFLICT_RETRIES: Final = 5
"""Commits in a row that may lose a race with other collectors on one lake before the batch
fails (each retry runs over the lake as the winner left it)."""
