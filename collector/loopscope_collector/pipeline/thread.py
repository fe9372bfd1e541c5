"""The pipeline: the one thread that owns the read-write DuckDB connection and detection state.

Receivers (HTTP, gRPC) decode a request and ``submit`` its spans; the pipeline takes what is
queued as one batch, stores it in one transaction, runs streaming detection, commits, and
then releases the jobs. A receiver with a spool (``receive.spool``) answers 200 once the
request is written there, before the batch, and marks the job ``acknowledged``: such a job is
never answered with an error, so the pipeline keeps it until it is stored (a batch that fails
because the store cannot be written now, or for a reason that may pass, leaves it queued for
the next: ``_held``), and counts and logs one the store refuses for good
(``Stats.requests_lost``). Without a spool the receiver acknowledges at the release: a 200
then means the spans are committed. Ingest is idempotent by (trace_id, span_id): spans already
stored are skipped, so a client's retry never double-counts. When spans wait for the next batch
and what is queued, with the request's spans, would take longer than ``MAX_QUEUE_WAIT_S`` to
store at the rate the pipeline measures (``Throughput``), or the queue is full, ``submit``
raises ``Overloaded`` and the receiver answers 503 with a Retry-After of the time until the
queue has drained enough to take the request. Batching is apart from admission: each batch
takes everything admitted (up to ``max_batch_spans``). Spans not acknowledged that waited
``MAX_JOB_WAIT_S`` for a batch are not stored (503): such a request is stored soon or not at
all.

A batch fails as a whole or not at all, in memory too (``BatchUndo``). When the store refuses
a batch's data, its requests are stored one by one, so only the request at fault is refused
(``Rejected``, a 400); when the store cannot be written (``storage.health``), every request gets
``StoreUnavailable`` (a 503) until the store recovers, but for the acknowledged ones, kept.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from loopscope.detect import Policy

from ..normalize import assembly
from ..normalize.rows import EpisodeRow, ReconcileRow, ToolCallRow
from ..normalize.spans import SpanRecord
from ..normalize.steps import Row
from ..storage import Store
from ..storage import writes as tables
from ..storage.ducklake.housekeeping import LakeHousekeeping
from ..storage.errors import (
    Cursor,
    PermanentStoreError,
    StoreConflict,
    StoreDown,
    StoreOutOfMemory,
    kind_of,
)
from ..storage.health import RECOVER_INTERVAL_S, StoreHealth, StoreUnavailable, StoreWatch
from ..storage.queries import insert_rows
from ..storage.writes.labels import Label
from ..store_settings import CHECKPOINT_BYTES
from .batch_undo import BatchUndo
from .detection import EpisodeResult, StreamingDetector
from .jobs import (
    ACKNOWLEDGED_ATTEMPTS,
    CONFLICT_RETRIES,
    MAX_JOB_WAIT_S,
    MAX_QUEUE_WAIT_S,
    RECENT_S,
    SLOW_S,
    STOP_S,
    AnswerTimes,
    Job,
    Overloaded,
    PipelineStopped,
    Rejected,
    Stats,
    Throughput,
    TooLargeToStore,
)
from .refusals import RefusalLog

logger = logging.getLogger(__name__)


class Pipeline:
    """Owns the store's write connection; see the module docstring."""

    def __init__(
        self,
        db: Store,
        *,
        policy: Policy | None = None,
        max_queue_spans: int = 100_000,
        max_batch_spans: int = 20_000,
        max_wait_s: float = 0.02,
        on_batch: Callable[[Pipeline, list[EpisodeResult]], None] | None = None,
        instance: str = "",
        housekeeping: LakeHousekeeping | None = None,
        max_queue_wait_s: float = MAX_QUEUE_WAIT_S,
        max_job_wait_s: float | None = MAX_JOB_WAIT_S,
        checkpoint_bytes: int = CHECKPOINT_BYTES,
    ) -> None:
        self.db = db
        self.housekeeping = housekeeping
        """A lake's housekeeping, run on this thread between batches (never racing its own
        commits): ``storage.ducklake.housekeeping``."""
        self.instance = instance
        """This collector's name among N on one lake (``--instance``), stored with each call."""
        self.detector = StreamingDetector(policy)
        self.max_queue_spans = max_queue_spans
        self.max_batch_spans = max_batch_spans
        self.max_wait_s = max_wait_s
        self.on_batch = on_batch
        self.stats = Stats()
        self.max_queue_wait_s = max_queue_wait_s
        self.max_job_wait_s = max_job_wait_s
        """``MAX_JOB_WAIT_S``; None: spans wait for a batch however long (an offline writer,
        which waits for its jobs itself)."""
        self.throughput = Throughput()
        self.answer_times = AnswerTimes()
        """How long export requests waited for their answers (the receivers record them)."""
        self.store_waits = AnswerTimes()
        """How long requests' spans waited from being queued to their batch's commit."""
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._queued = 0
        self._waiting = 0
        """Of the spans queued, those no batch has taken yet."""
        self._lock = threading.Lock()
        self._submitted = 0
        self._open: dict[int, None] = {}
        """The sequence numbers of the span jobs not yet done, oldest first (``caught_up``)."""
        self._progress = threading.Condition(self._lock)
        self._held: list[Job] = []
        """Acknowledged jobs a batch failed for a reason that may pass (the store down, a
        lost race): the next batch takes them first (pipeline thread only)."""
        self._new_rows = "new"
        """How a batch inserts the spans and tool calls it found new (``on_conflict``): their
        keys were looked up in the batch's transaction (``existing_keys``; a tool call's key is
        its span's), so without the key's conflict check ("new"), until a store breaks that
        ("ignore" from then on: ``_store_again_on_conflict``)."""
        self._stopping = False
        self._cut_short = False
        """Set by ``stop`` when finishing the queue takes too long: stop after this batch."""
        self._thread = threading.Thread(target=self._run, name="loopscope-pipeline", daemon=True)
        self._trace_episode: OrderedDict[str, str] = OrderedDict()
        self._dedup: OrderedDict[str, None] = OrderedDict()
        self._undo = BatchUndo()
        self.health = StoreHealth()
        self._watch = StoreWatch(db, self.health, checkpoint_bytes=checkpoint_bytes)
        self.refusals = RefusalLog(logger)
        self.misroutes = RefusalLog(logger, verb="was sent", items="misrouted episode(s)")

    # -- receivers' side ------------------------------------------------------------------

    def start(self) -> Pipeline:
        """Start the pipeline thread."""
        self._thread.start()
        return self

    def submit(self, spans: list[SpanRecord]) -> Job:
        """Queue a request's spans; returns the job to ``wait`` on.

        Raises:
            Overloaded: the queue holds ``max_queue_spans`` spans already, or spans wait for
                the next batch and what is queued would keep this request waiting over
                ``max_queue_wait_s``.
            PipelineStopped: the collector is shutting down.
            StoreUnavailable: the store cannot be written now (see ``health``).
        """
        job = Job(spans)
        with self._lock:
            if self._stopping:
                raise PipelineStopped("the collector is shutting down")
            if not self.health.ok:
                raise StoreUnavailable(self.health.reason)
            self._admit(len(spans))
            self._submitted += 1
            job.seq = self._submitted
            self._open[job.seq] = None
            self._queued += len(spans)
            self._waiting += len(spans)
            self.stats.queue_spans = self._queued
            self.stats.spans_received += len(spans)
        self._queue.put(job)
        return job

    def caught_up(self, timeout: float) -> bool:
        """Wait until every request submitted before now is done (stored, or failed), for at
        most ``timeout`` and not while the store cannot be written: a named read waits so,
        and sees every request acknowledged before it (a 200 comes before the batch when the
        request is spooled). Whether it caught up."""
        with self._progress:
            target = self._submitted
            return self._progress.wait_for(
                lambda: not self._open or next(iter(self._open)) > target
                or not self.health.ok, timeout)

    def admit(self, spans: int) -> None:
        """Raise ``Overloaded`` if a request of ``spans`` spans would be refused now, as
        ``submit`` would refuse it: a receiver asks before it builds the spans' records, so a
        request refused under overload costs no more than its parse (``submit`` asks again)."""
        with self._lock:
            self._admit(spans)

    def _admit(self, spans: int) -> None:
        """``admit``, under the lock; counts a refusal."""
        if self._queued and self._queued + spans > self.max_queue_spans:
            self.stats.requests_overloaded += 1
            raise Overloaded(f"{self._queued} spans queued")
        if not self._waiting:
            return  # it heads the next batch, whatever the machine's speed
        wait_s = self.throughput.drain_s(self._queued + spans)
        if wait_s > self.max_queue_wait_s:
            self.stats.requests_overloaded += 1
            # retry once the queue has drained enough to take it, not once it is empty
            raise Overloaded(f"{self._queued} spans queued would keep this request "
                             f"waiting about {wait_s:.1f} s",
                             retry_after_s=wait_s - self.max_queue_wait_s)

    def submit_labels(self, labels: list[Label]) -> Job:
        """Queue human labels (validated by the caller: see ``labels.check_label``);
        they are written by the pipeline thread, the store's only writer."""
        job = Job([], labels=labels)
        with self._lock:
            if self._stopping:
                raise PipelineStopped("the collector is shutting down")
            if not self.health.ok:
                raise StoreUnavailable(self.health.reason)
        self._queue.put(job)
        return job

    @property
    def recovered(self) -> str | None:
        """Where the open store was saved once its file was found replaced or overwritten
        (``storage.health``); None otherwise."""
        return self._watch.recovered

    def queue_wait_s(self) -> float:
        """How long the spans queued now take to store (as the pipeline measures batches)."""
        return self.throughput.drain_s(self._queued)

    def slow(self) -> str | None:
        """Why the pipeline keeps clients waiting, or None while it answers in time: a
        request's spans waited over ``SLOW_S`` in the last ``RECENT_S`` seconds."""
        waited = self.throughput.longest_recent_wait_s(time.monotonic())
        if waited <= SLOW_S:
            return None
        return (f"exports waited up to {waited:.1f} s to be stored in the last "
                f"{RECENT_S:.0f} s; {self._queued} spans queued now "
                f"(about {self.queue_wait_s():.1f} s to store)")

    def count_rejected(self, status: int) -> None:
        """Count a request refused for its content with HTTP ``status`` (any receiver thread)
        whose spans were counted and logged already: the store refused them (``Rejected``)."""
        with self._lock:
            self.stats.requests_rejected[str(status)] += 1

    def refuse(self, status: int, receiver: str, reason: str, spans: int = 0) -> None:
        """A receiver refused a request for its content before it reached the pipeline (it
        does not decode, or holds a value the store cannot): count the request by ``status``
        and its ``spans`` (as many as could be counted), and log why (rate-limited:
        ``RefusalLog``). Any receiver thread."""
        with self._lock:
            self.stats.requests_rejected[str(status)] += 1
            self.stats.spans_rejected += spans
        self.refusals.refused(f"{receiver} ({status}, {spans} span(s)): {reason}", spans)

    def stop(self, timeout: float = STOP_S) -> None:
        """Finish what is queued, then stop the thread. If that takes over ``timeout`` (a
        busy machine), stop after the batch in progress (``_leave_queued``): the store is
        never closed under a batch. What is left is not stored: acknowledged requests stay
        in the spool (stored at the next start), the others are answered 503."""
        with self._lock:
            self._stopping = True
        self._queue.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            with self._lock:
                queued = self._queued
            logger.warning("loopscope collector: %d queued span(s) not stored %g s after the "
                           "stop began; stopping after the batch in progress (acknowledged "
                           "requests left are stored from the spool at the next start)",
                           queued, timeout)
            self._cut_short = True
            self._thread.join()
        self.refusals.summarise()
        self.misroutes.summarise()

    # -- the pipeline thread --------------------------------------------------------------

    @property
    def cursor(self) -> Cursor:
        """The pipeline thread's own cursor: for ``on_batch`` hooks, which run on that thread
        after the batch's commit (each statement commits by itself). Not for other threads."""
        return self._cur

    def _run(self) -> None:
        self._cur = self.db.cursor()
        self.detector.load = lambda ids: self._load_steps(self._cur, ids)
        while True:
            jobs, last = self._next_batch()
            jobs = self._expire(jobs)
            writable = self._writable()
            if jobs and writable:
                self._process_jobs(jobs)
            elif jobs:
                self._finish(jobs, StoreUnavailable(self.health.reason))
            if last or self._cut_short:
                if not last:
                    self._leave_queued()
                try:
                    self._watch.stop()
                except Exception:
                    logger.exception("loopscope collector: checking the store at stop failed")
                return
            if writable and self.housekeeping is not None:
                self.housekeeping.tick()

    def _writable(self) -> bool:
        """Watch the store (``StoreWatch``); take a new cursor when it was reopened."""
        generation = self.db.generation
        writable = self._watch.check()
        if self.db.generation is not generation:
            self._cur = self.db.cursor()
        return writable

    def _expire(self, jobs: list[Job]) -> list[Job]:
        """Fail (503) the jobs whose spans waited over ``max_job_wait_s`` for this batch;
        returns the others."""
        if self.max_job_wait_s is None:
            return jobs
        since = time.monotonic() - self.max_job_wait_s
        expired = [job for job in jobs
                   if job.spans and job.queued_at < since and job.acknowledged is None]
        if not expired:
            return jobs
        with self._lock:
            self.stats.requests_overloaded += len(expired)
        self._finish(expired, Overloaded(
            f"not stored: waited over {self.max_job_wait_s:g} s for the store",
            retry_after_s=self.queue_wait_s()))
        return [job for job in jobs if job not in expired]

    def _leave_queued(self) -> None:
        """The stop is cut short (``stop``): the jobs still queued or kept are not stored;
        an acknowledged one is left as it is (its spool record is replayed at the next
        start), the others get a 503."""
        jobs, self._held = self._held, []
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                jobs.append(job)
        self._finish([job for job in jobs if job.acknowledged is None], StoreUnavailable(
            "the collector stopped before storing these spans; retry"))

    def _finish(self, jobs: list[Job], error: Exception) -> None:
        for job in jobs:
            job.error = error
        self._release(jobs)

    def _next_batch(self) -> tuple[list[Job], bool]:
        """The jobs of the next batch: those kept from a failed one first (``_held``, tried
        again after a new job arrives or ``RECOVER_INTERVAL_S``), then what is queued; and
        whether the pipeline stops after it. Only a pipeline that was idle until a job came
        waits ``max_wait_s`` for more (a burst's other requests); one that finds jobs queued
        is behind, and takes what is queued at once."""
        held, self._held = self._held, []
        gather_s, woke = 0.0, False
        try:
            first = self._queue.get_nowait()
        except queue.Empty:
            gather_s = self.max_wait_s
            try:  # wake up now and then: the store is watched while idle too
                first = self._queue.get(timeout=RECOVER_INTERVAL_S)
            except queue.Empty:
                first, woke = None, True
        if first is None:  # woken, or the stop (then the kept jobs get one more try)
            with self._lock:
                self._waiting -= sum(len(job.spans) for job in held)
            return held, not woke
        jobs = [*held, first]
        size = sum(len(job.spans) for job in jobs)
        deadline = time.monotonic() + gather_s
        while size < self.max_batch_spans:
            remaining = deadline - time.monotonic()
            try:
                job = self._queue.get(timeout=remaining) if remaining > 0 else (
                    self._queue.get_nowait())
            except queue.Empty:
                break
            if job is None:
                self._queue.put(None)  # seen again after this batch
                break
            jobs.append(job)
            size += len(job.spans)
        with self._lock:
            self._waiting -= size
        return jobs, False

    def _process_jobs(self, jobs: list[Job]) -> None:
        started = time.monotonic()
        try:
            results = self._store_jobs(jobs)
            if self.on_batch is not None:
                try:
                    self.on_batch(self, results)
                except Exception:
                    logger.exception("loopscope collector: after-batch hook failed")
        finally:
            if spans := sum(len(job.spans) for job in jobs):  # (measured before the answers)
                self.throughput.record(spans, time.monotonic() - started)
            self._release(jobs)

    def _release(self, jobs: list[Job]) -> None:
        """The jobs are done (stored or failed): free their queue space, wake their receivers.
        An acknowledged job (spooled: its client has its 200) that failed for a reason that
        may pass is kept for the next batch instead (``_held``: the store down, or a lost
        race, or anything else up to ``ACKNOWLEDGED_ATTEMPTS`` times while the store can be
        written); one the store refused for good is counted and logged as lost."""
        now = time.monotonic()
        done: list[Job] = []
        kept: list[Job] = []
        for job in jobs:
            (done if job.settle(keep_acknowledged=self._may_pass(job)) else kept).append(job)
        self._held += kept
        with self._lock:
            for job in done:
                self._open.pop(job.seq, None)
            self._progress.notify_all()
            self._queued -= sum(len(j.spans) for j in done)
            self._waiting += sum(len(j.spans) for j in kept)
            self.stats.queue_spans = self._queued
            self.stats.batches += 1
        for job in done:  # woken once their place is free: a client's next request fits
            job.wake()
        for job in done:
            if job.spans:
                self.throughput.waited(now - job.queued_at, now)
                if job.error is None:
                    self.store_waits.record("stored", now - job.queued_at)
            if job.acknowledged is not None:
                if job.error is not None:
                    self._lost(job)
                job.acknowledged()

    def _may_pass(self, job: Job) -> bool:
        """Whether a failed job may be stored by a later batch (an acknowledged one is then
        kept): the store cannot be written now, or the batch failed for another reason
        (a lost race, memory shared with a batch) fewer than ``ACKNOWLEDGED_ATTEMPTS``
        times."""
        if not isinstance(job.error, (StoreUnavailable, Overloaded)):
            return False
        if self.health.ok:
            job.attempts += 1
        return job.attempts < ACKNOWLEDGED_ATTEMPTS

    def _lost(self, job: Job) -> None:
        """An acknowledged request the store refused for good: counted and logged."""
        with self._lock:
            self.stats.requests_lost += 1
            self.stats.spans_lost += len(job.spans)
        logger.error("loopscope collector: %d acknowledged span(s) were not stored: %s",
                     len(job.spans), job.error)

    def _store_jobs(self, jobs: list[Job]) -> list[EpisodeResult]:
        """Store the jobs as one batch; if that fails for another reason than the store's own
        (the data, or the batch's size), store them one by one, so only the request at fault
        fails. Sets each job's error."""
        try:
            return self._store_again_on_conflict(jobs)
        except Exception as exc:
            if len(jobs) == 1 or isinstance(exc, StoreDown):
                self._fail(jobs, exc)
                return []
            logger.warning("loopscope collector: a batch of %d requests failed (%s: %s); "
                           "storing them one by one", len(jobs), kind_of(exc), exc)
        results: list[EpisodeResult] = []
        for job in jobs:
            if not self.health.ok:
                job.error = StoreUnavailable(self.health.reason)
                continue
            try:
                results += self._store_again_on_conflict([job])
            except Exception as exc:
                self._fail([job], exc)
        return results

    def _store_again_on_conflict(self, jobs: Sequence[Job]) -> list[EpisodeResult]:
        """``_store``, again when its commit lost a race with another collector's on the same
        lake (``StoreConflict``: it rewrote or merged the files this batch deletes from): the
        batch rolled back with its in-memory state, and runs over the lake as it is now. The
        store is not at fault: only ``CONFLICT_RETRIES`` lost races in a row count as its
        failure."""
        for _ in range(CONFLICT_RETRIES):
            try:
                return self._store(jobs)
            except StoreConflict as exc:
                with self._lock:
                    self.stats.commit_conflicts += 1
                logger.debug("loopscope collector: a commit lost a race on the lake; storing "
                             "the batch again: %s", str(exc).split("\n")[-1])
            except PermanentStoreError as exc:
                if not (self._new_rows == "new" and "violates primary key" in str(exc)):
                    raise  # (the data's own fault: a NOT NULL, a value out of range...)
                self._new_rows = "ignore"  # (for good: the batch again, with the key checks)
                logger.warning("loopscope collector: a key this batch inserts was stored "
                               "already, though its look-up said not (a tool call stored "
                               "without its span?); inserting with key checks from now on: "
                               "%s", str(exc).split("\n")[0])
        return self._store(jobs)  # (the last attempt: a conflict now fails the batch)

    def _fail(self, jobs: list[Job], exc: Exception) -> None:
        spans = sum(len(j.spans) for j in jobs)
        if isinstance(exc, PermanentStoreError):
            self.refusals.refused(f"a request of {spans} span(s) (400): the store cannot hold "
                                  f"its data: {exc}", spans)
            error: Exception = Rejected(f"the store cannot hold this request's data: {exc}")
            with self._lock:
                self.stats.spans_rejected += spans
        elif isinstance(exc, StoreOutOfMemory) and len(jobs) == 1:
            # Alone (``_store_jobs`` stores a batch that fails so request by request): the
            # same request runs out of memory again; the client must split it.
            limit = self.db.memory_limit or "default"
            self.refusals.refused(f"a request of {spans} span(s) (413): the store ran out of "
                                  f"memory storing it alone (--store-memory {limit})", spans)
            error = TooLargeToStore(
                f"the store ran out of memory for this request's {spans} spans alone "
                f"(--store-memory {limit}): send smaller batches, or raise --store-memory")
            with self._lock:
                self.stats.spans_rejected += spans
        elif isinstance(exc, StoreDown):
            logger.debug("loopscope collector: a batch of %d spans failed; not acknowledged: "
                         "%s: %s", spans, kind_of(exc), exc)
            self._watch.failed(exc)  # logged once, when health turns
            error = StoreUnavailable(f"{kind_of(exc)}: {exc}")
        else:  # out of memory in a batch, or a bug: this request fails, the store is not at fault
            logger.error("loopscope collector: a request of %d spans failed; not acknowledged: "
                         "%s: %s", spans, kind_of(exc), str(exc).split("\n", 1)[0])
            if isinstance(exc, StoreOutOfMemory):
                error = StoreUnavailable(
                    f"the store ran out of memory for these {spans} spans (--store-memory "
                    f"{self.db.memory_limit or 'default'}); retry later, or send smaller "
                    "batches")
            else:
                error = StoreUnavailable(f"not stored ({kind_of(exc)}); retry later")
        for job in jobs:
            job.error = error

    def _store(self, jobs: Sequence[Job]) -> list[EpisodeResult]:
        """One transaction for the jobs' spans and labels; on rollback the in-memory state
        is restored too (``BatchUndo``), so a retry is judged as if this never happened.
        What fails in the store is raised as the store's own error (``storage.errors``)."""
        with self.db.failures():
            results = self._store_batch(jobs)
        return results

    def _store_batch(self, jobs: Sequence[Job]) -> list[EpisodeResult]:
        cur = self._cur
        spans = [s for j in jobs for s in j.spans]
        unique, twins = assembly.unique_spans(spans)
        self._undo = undo = BatchUndo()
        cur.execute("begin transaction")
        try:
            stored = tables.existing_keys(cur, list(unique))
            new = [s for k, s in unique.items() if k not in stored]
            again = [tables.span_row(s) for k, s in unique.items() if k in stored]
            conflicts = tables.conflicting_spans(cur, again) + [
                t.span_id for t in twins
                if tables.span_row(t) != tables.span_row(unique[(t.trace_id, t.span_id)])]
            insert_rows(cur, "spans", [tables.span_row(s) for s in new], tables.SPANS,
                        on_conflict=self._new_rows)
            results = self._derive(cur, new)
            tables.write_labels(cur, [label for j in jobs for label in j.labels])
            self._watch.verify()  # the file is still the store: acknowledge nothing into another
            cur.execute("commit")
        except Exception:
            with contextlib.suppress(Exception):  # a failed commit has already rolled back
                cur.execute("rollback")
            undo.undo(self.detector.forget)
            raise
        undo.commit()
        try:
            self._watch.after_commit()
        except Exception as exc:  # the batch is stored (in the log): it is acknowledged
            self._watch.failed(exc)
        self._count_conflicts(conflicts)
        self.stats.spans_stored += len(new)
        self.stats.spans_duplicate += len(spans) - len(new)
        for job in jobs:
            job.stored = len(job.spans)
        return results

    def _count_conflicts(self, span_ids: list[str]) -> None:
        """A span id sent again with other content: the first content is kept; say so."""
        if span_ids:
            self.stats.spans_conflicting += len(span_ids)
            logger.warning("loopscope collector: %d span(s) sent again with different content; "
                           "the first version is kept (span ids: %s)", len(span_ids),
                           ", ".join(span_ids[:5]) + (" ..." if len(span_ids) > 5 else ""))

    def _derive(
        self, cur: Cursor, spans: Sequence[SpanRecord]
    ) -> list[EpisodeResult]:
        reading = assembly.read_spans(spans, lambda keys: self._seen_keys(cur, keys))
        for key in reading.dedup_keys.values():
            self._remember(self._dedup, key, None)
        tool_rows, episodes, reconciles = reading.calls, reading.roots, reading.reconciles
        moved = self._resolve_episodes(cur, tool_rows, episodes)
        tool_rows, shadowed = self._drop_shadows(cur, tool_rows)
        by_episode: dict[str, list[Row]] = {episode: [] for episode in shadowed}
        steps: list[Row] = [*tool_rows, *reading.messages]
        for row in steps:
            by_episode.setdefault(row.episode_id, []).append(row)
        task_types = {e.episode_id: e.task_type for e in episodes}
        unseen = [e for e in by_episode if not self.detector.has(e)]
        stored = self._load_steps(cur, unseen)  # one query per table for the whole batch
        self._check_routing(cur, [e for e in unseen if e in stored])
        self._undo.episodes.update(by_episode)
        results = [
            self.detector.add(episode_id, rows, task_type=task_types.get(episode_id),
                              stored=stored.get(episode_id, ()) if episode_id in unseen
                              else None)
            for episode_id, rows in by_episode.items()
        ]
        verdicts = {v.row.span_id: v for r in results for v in r.verdicts}
        tables.insert_tool_calls(cur, tool_rows, verdicts, reading.dedup_keys,
                                 self.instance or None, on_conflict=self._new_rows)
        tables.insert_messages(cur, reading.messages)
        tables.insert_export_reports(cur, reading.reports)
        new_ids = {t.span_id for t in tool_rows}
        tables.update_verdicts(cur, [v for r in results if r.reevaluated for v in r.verdicts
                                     if v.row.span_id not in new_ids])
        new_flags = tables.write_detections(cur, results)
        tables.write_guard_decisions(cur, tool_rows)
        tables.upsert_episodes(cur, episodes, tool_rows)
        tables.recount_calls(cur, moved | shadowed)  # (stored calls moved or deleted: rare)
        named = {row.trace_id for row in tool_rows if row.agent} | {
            root.trace_id for root in episodes if root.agent}
        unnamed = [t for t in reading.trace_agents if t not in named]  # (upsert named those)
        if unnamed:  # (a run stored unnamed takes the name a later span brings)
            owners = self._episodes_of(cur, unnamed)
            tables.name_agents(cur, {t: (owners[t], name)
                                     for t, name in reading.trace_agents.items() if t in owners})
        reconciles += [  # the core saw these calls look an UNKNOWN write up
            ReconcileRow(v.row.trace_id, v.row.span_id, v.row.episode_id, v.row.service, key,
                         v.row.found if v.row.reconciles else None, v.row.start_ns)
            for r in results for v in r.verdicts
            if v.row.span_id in new_ids for key in v.reconciled
        ]
        tables.write_unknown_writes(cur, tool_rows, reconciles)
        self._undo.on_commit.append(lambda: self._count(tool_rows, results, new_flags))
        return results

    @staticmethod
    def _load_steps(
        cur: Cursor, episode_ids: Sequence[str]
    ) -> dict[str, list[Row]]:
        """The stored steps (tool calls, then messages) of these episodes."""
        steps: dict[str, list[Row]] = {}
        for found in (tables.load_tool_calls(cur, episode_ids),
                      tables.load_messages(cur, episode_ids)):
            for episode_id, rows in found.items():
                steps.setdefault(episode_id, []).extend(rows)
        return steps

    def _check_routing(self, cur: Cursor, episode_ids: Sequence[str]) -> None:
        """Episodes new to this collector whose calls another instance stored: the router in
        front sent one episode to two collectors (each judges only what it holds). Counted
        (``loopscope_episodes_misrouted_total``) and logged, rate-limited, once the batch
        commits. Not a rule about the calls (detection is the core's): a fact about routing."""
        if not self.instance or not episode_ids:
            return
        elsewhere = tables.episodes_stored_elsewhere(cur, episode_ids, self.instance)
        if elsewhere:
            self._undo.on_commit.append(lambda: self._misrouted(elsewhere))

    def _misrouted(self, elsewhere: dict[str, str]) -> None:
        with self._lock:
            self.stats.episodes_misrouted += len(elsewhere)
        for episode_id, other in elsewhere.items():
            self.misroutes.refused(
                f"episode {episode_id!r}, whose calls collector {other!r} stored (this one is "
                f"{self.instance!r}): each judges only the calls it holds; route every span "
                "of an episode to one collector (by trace id, or by loopscope.episode.id)")

    def _seen_keys(self, cur: Cursor, keys: Sequence[str]) -> set[str]:
        """The MCP keys an earlier batch kept: in memory, else in the store."""
        for key in tables.stored_dedup_keys(cur, [k for k in keys if k not in self._dedup]):
            self._remember(self._dedup, key, None)
        return {k for k in keys if k in self._dedup}

    def _drop_shadows(
        self, cur: Cursor, rows: list[ToolCallRow]
    ) -> tuple[list[ToolCallRow], set[str]]:
        """One call reported by loopscope's guard and by another instrumentation is one call
        (``assembly``, rule 4): a shadow is dropped when it arrives, deleted when it arrived
        first (children end, and are exported, before their parents). Returns the rows to
        keep and the episodes whose stored calls changed (to be re-evaluated).
        """
        ours = assembly.windows(rows)
        foreign_traces = list({r.trace_id for r in rows if r.convention != assembly.LOOPSCOPE})
        covers = tables.loopscope_spans_of_traces(cur, foreign_traces) + ours
        dropped = {r.span_id for r in assembly.shadowed(rows, covers)}
        kept = [r for r in rows if r.span_id not in dropped]
        earlier = tables.foreign_calls_of_traces(cur, list({w[0] for w in ours}))
        changed = tables.delete_calls(cur, assembly.shadowed(earlier, ours))
        for episode_id in changed:
            self.detector.forget(episode_id)
        return kept, changed

    def _resolve_episodes(
        self, cur: Cursor, rows: list[ToolCallRow], episodes: list[EpisodeRow]
    ) -> set[str]:
        """Fill empty episode ids (``assembly``, rule 5), from this batch, memory and the
        store; a root that reveals a conversation id moves the calls stored under its trace.
        Returns the episodes that calls were moved to."""
        revealed = assembly.resolve_episodes(rows, episodes,
                                             lambda traces: self._episodes_of(cur, traces))
        for trace_id, episode_id in revealed.items():
            self._remember(self._trace_episode, trace_id, episode_id)
        # the root revealed a conversation id for calls stored under the trace
        moved: set[str] = set()
        for trace_id, episode_id in tables.rebind_traces(cur, [
                (ep.trace_id, ep.episode_id) for ep in episodes
                if ep.episode_id != ep.trace_id]):
            self.detector.forget(trace_id)
            self.detector.forget(episode_id)
            moved.add(episode_id)
        return moved

    def _episodes_of(self, cur: Cursor, traces: Sequence[str]) -> dict[str, str]:
        unknown = [t for t in traces if t not in self._trace_episode]
        for trace_id, episode_id in tables.episodes_of_traces(cur, unknown).items():
            self._remember(self._trace_episode, trace_id, episode_id)
        return {t: self._trace_episode[t] for t in traces if t in self._trace_episode}

    def _remember(self, cache: OrderedDict[str, Any], key: str, value: Any,
                  limit: int = 100_000) -> None:
        self._undo.remember(cache, key, value, limit)

    def _count(self, rows: list[ToolCallRow], results: list[EpisodeResult],
               new_flags: Counter[str]) -> None:
        """Move the counters by what the batch's commit stored: its new calls, the verdict
        each was stored with, and the flags the store did not hold before
        (``write_detections``). Never by what detection judged: a re-evaluated episode (or
        a batch retried after a failure) is judged again, but stored once."""
        stats = self.stats
        stats.tool_calls += len(rows)
        for row in rows:
            if row.guard_action:
                stats.guard_actions[row.guard_action] += 1
        new_ids = {row.span_id for row in rows}
        for result in results:
            for verdict in result.verdicts:
                if verdict.progress is None and verdict.row.span_id in new_ids:
                    stats.no_progress_steps += 1
            stats.episodes_reevaluated += result.reevaluated
            stats.detection_failures += result.failed is not None
        stats.loops_by_kind.update(new_flags)

    def snapshot(self) -> dict[str, Any]:
        """The counters as plain data."""
        data = asdict(self.stats)
        data["detection_active_episodes"] = self.detector.active
        plain: dict[str, Any] = json.loads(json.dumps(data, default=dict))
        return plain
