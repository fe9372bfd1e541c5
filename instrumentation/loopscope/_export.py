"""What loopscope's exporter does when the collector is down, busy or slow, and what it counts.

An agent never waits on its telemetry, and the telemetry it can keep, it keeps. OpenTelemetry's
OTLP/HTTP exporter already retries a collector that throttles (429, 502, 503, 504, waiting
out ``Retry-After``) until its export timeout runs out. Around it, loopscope:

- tells apart why an attempt failed, from the HTTP session the exporter sends with
  (``_export_http.ObservedSession``): a refused connection means nothing listens (collector
  unreachable: not retried, and the batches of the next ``DOWN_BACKOFF_S`` are dropped at once,
  so a dead collector costs nothing); a throttling answer means it is busy (retried; the queue
  keeps new spans meanwhile, and a batch still answered busy when the export timeout runs
  out is sent again after the last ``Retry-After``, until the exit); no answer within the
  timeout means it is slow; anything else is a failure;
- logs each of these once as it begins, and once when spans go out again;
- keeps the batch processor's burst queue, but counts the spans it cannot hold instead of
  letting its deque drop them silently;
- bounds the flush at exit (``EXIT_FLUSH_S``): what is not sent by then is dropped and counted,
  but a batch being sent then is counted by its answer, if it comes within ``EXIT_ANSWER_S``
  more (the collector may store it: counting it dropped would count a stored span as lost);
- after spans were dropped, sends the counts (and the runs that lost spans) to the collector
  with the next batch that gets through (``_export_report``).

Every span handed to loopscope's exporter ends in exactly one counter of ``ExportStats``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Final, Literal

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from ._export_report import LossReport

logger = logging.getLogger("loopscope")

DOWN_BACKOFF_S: Final = 5.0
"""After a refused connection, batches are dropped at once for this long (then one is tried)."""
EXIT_FLUSH_S: Final = 5.0
"""At shutdown (process exit), the time given to send what is queued; the rest is dropped."""
EXIT_ANSWER_S: Final = 5.0
"""After ``EXIT_FLUSH_S``, the longest the batch then being sent waits for its answer, which
counts it (exported, or dropped at exit); with no answer by then it is dropped at exit (a
collector answers within about a second; one that keeps a request waiting longer may still
store it)."""
MAX_WAIT_S: Final = 60.0
"""The longest ``Retry-After`` a batch waits out before it is sent (a longer one is cut)."""
THROTTLING_STATUSES: Final = frozenset({429, 502, 503, 504})
"""The answers OTLP defines as retryable: the collector (or a proxy before it) is busy."""


@dataclass
class ExportStats:
    """What became of the spans loopscope's exporter was given: each is counted once (and
    ``started`` counts the spans begun, sampled, while loopscope's exporter was installed)."""

    started: int = 0
    """Spans started (OpenTelemetry's ``otel.sdk.span.started``, sampled ones)."""
    exported: int = 0
    """Acknowledged by the collector."""
    dropped_unreachable: int = 0
    """The connection was refused (nothing listens), or dropped at once after that."""
    dropped_throttled: int = 0
    """The collector kept answering busy (429/502/503/504) and the batch was given up: no
    longer counted (a batch answered busy is sent again until the exit, which counts it
    ``at_exit``); kept for the readers of earlier versions' counts."""
    dropped_timed_out: int = 0
    """No answer within the export timeout."""
    dropped_rejected: int = 0
    """Any other failure: an answer OTLP says not to retry (400, 401, 413, 500), or an error."""
    dropped_queue_full: int = 0
    """Ended while the queue already held ``OTEL_BSP_MAX_QUEUE_SIZE`` spans."""
    dropped_at_exit: int = 0
    """Still queued when the flush at exit ran out of time, or being sent then and not
    answered within ``EXIT_ANSWER_S`` more (or answered with a failure)."""
    failed_exports: int = 0
    """Batches the exporter tried to send and could not."""

    @property
    def dropped(self) -> int:
        """Spans dropped, for any reason."""
        return (self.dropped_unreachable + self.dropped_throttled + self.dropped_timed_out
                + self.dropped_rejected + self.dropped_queue_full + self.dropped_at_exit)

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict, ``dropped`` (their sum) included."""
        counts = {f.name: getattr(self, f.name) for f in fields(self)}
        return {"exported": self.exported, "dropped": self.dropped, **counts}

    def started_one(self) -> None:
        """Count a span started (on the agent's thread; ``+=`` under the GIL may miss one
        of two racing threads, which a count of started spans can afford)."""
        self.started += 1

    def summary(self) -> str:
        """One line for the log: ``exported 10, dropped 5 (throttled 3, at exit 2)``."""
        reasons = ", ".join(f"{f.name.removeprefix('dropped_').replace('_', ' ')} {n}"
                            for f in fields(self) if f.name.startswith("dropped_")
                            and (n := getattr(self, f.name)))
        return f"exported {self.exported}, dropped {self.dropped}" + (
            f" ({reasons})" if reasons else "")

    def reset(self) -> None:
        """All counters to zero."""
        for f in fields(self):
            setattr(self, f.name, 0)


@dataclass(frozen=True, slots=True)
class Attempt:
    """How one HTTP attempt of an export ended, as the exporter's session saw it."""

    kind: Literal["answered", "refused", "timed_out", "error"]
    status: int | None = None
    retry_after_s: float | None = None
    """The answer's ``Retry-After`` in seconds, when it had one that could be read."""
    detail: str = ""

    @property
    def throttled(self) -> bool:
        """The collector said it is busy: the exporter retries."""
        return self.kind == "answered" and self.status in THROTTLING_STATUSES


class ResilientExporter(SpanExporter):
    """Wraps the OTLP exporter: tells why exports fail, counts what is lost, and never waits on
    a collector that refuses connections.

    ``export`` runs on the batch processor's thread (or a ``force_flush`` caller's; the batch
    processor never runs two at once). ``note`` is called by the exporter's HTTP session on
    that thread, once per attempt. ``begin_exit``, ``abandon`` and ``give_up`` come from
    ``shutdown``.
    """

    def __init__(self, inner: SpanExporter, stats: ExportStats, *, endpoint: str,
                 timeout_s: float) -> None:
        self.inner = inner
        self.stats = stats
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.handed = 0
        """Spans the batch processor has handed over (every ``export`` call's)."""
        self.report = LossReport(stats)
        self._lock = threading.Lock()
        self._attempt: Attempt | None = None
        self._state = "ok"
        self._told_busy_drop = False
        self._down_until = 0.0
        self._not_before = 0.0
        self._in_flight = 0
        self._exit_deadline = math.inf
        self._exiting = threading.Event()
        self._abandoned = False
        self._inner_shut = False

    def note(self, attempt: Attempt) -> None:
        """Record how an HTTP attempt ended (called by the session); tell a throttling
        collector's first answer as "collector busy, retrying"."""
        self._attempt = attempt
        if attempt.throttled:
            wait = attempt.retry_after_s
            self._not_before = time.monotonic() + min(wait or 0.0, MAX_WAIT_S)
            after = f"Retry-After {wait:g} s" if wait is not None else "backing off"
            self._tell("busy", "loopscope: collector busy, retrying (HTTP %s at %s, %s); "
                       "spans wait in the queue (the agent is unaffected)",
                       attempt.status, self.endpoint, after)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export, or drop at once while the collector refuses connections or past the exit
        deadline. After a batch gave up on a busy collector, wait out its ``Retry-After``."""
        count = len(spans)
        with self._lock:
            self.handed += count
            if self._abandoned:  # counted as dropped at exit by ``abandon``
                return SpanExportResult.FAILURE
            now = time.monotonic()
            if now >= self._exit_deadline:
                self.stats.dropped_at_exit += count
                self.report.dropped(spans)
                return SpanExportResult.FAILURE
            if now < self._down_until:
                self.stats.dropped_unreachable += count
                self.report.dropped(spans)
                return SpanExportResult.FAILURE
            self._in_flight = count
        while True:
            result = self._send(spans)
            if not self._send_again():
                break
            self.report.settle(False)
        with self._lock:
            counted = not self._in_flight  # (``give_up`` counted it while it was sent)
            self._in_flight = 0
            if not counted:
                self._count(result, count)
                if result is not SpanExportResult.SUCCESS:
                    self.report.dropped(spans)
        self.report.settle(result is SpanExportResult.SUCCESS)
        return result

    def _send(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """One export of ``spans`` (the OTLP exporter's, retrying within its timeout), after
        the last ``Retry-After`` is waited out (a wait cut short by the exit)."""
        wait = self._not_before - time.monotonic()
        if wait > 0:
            self._exiting.wait(wait)
        self._attempt = None
        try:
            return self.inner.export(self.report.attach(spans))
        except Exception:
            logger.debug("loopscope: span export raised", exc_info=True)
            return SpanExportResult.FAILURE

    def _send_again(self) -> bool:
        """Whether the batch just sent was still answered busy when the export timeout ran
        out, and is to be sent again: the collector is up and said when to come back, so the
        batch is kept (new spans wait in the queue meanwhile, and those it has no room for
        are dropped and counted as ``queue_full``), until the exit's deadline."""
        attempt = self._attempt
        with self._lock:
            again = (attempt is not None and attempt.throttled and self._in_flight > 0
                     and not self._abandoned and time.monotonic() < self._exit_deadline)
        if again and not self._told_busy_drop:
            self._told_busy_drop = True
            logger.warning("loopscope: collector still busy after the %g s export timeout; "
                           "the batch is kept and sent again after its Retry-After (new spans "
                           "wait in the queue; what it has no room for is dropped and counted)",
                           self.timeout_s)
        return again

    def _count(self, result: SpanExportResult, count: int) -> None:
        stats, attempt = self.stats, self._attempt
        if result is SpanExportResult.SUCCESS:
            stats.exported += count
            self._not_before = 0.0
            self._tell("ok", "loopscope: collector accepting spans again; so far %s",
                       stats.summary())
            return
        stats.failed_exports += 1
        if time.monotonic() >= self._exit_deadline:
            stats.dropped_at_exit += count
        elif attempt is not None and attempt.kind == "refused":
            stats.dropped_unreachable += count
            self._down_until = time.monotonic() + DOWN_BACKOFF_S
            self._tell("unreachable", "loopscope: collector unreachable at %s (connection "
                       "refused); spans are dropped until it is back, tried again every %g s "
                       "(the agent is unaffected)", self.endpoint, DOWN_BACKOFF_S)
        elif attempt is not None and attempt.throttled:  # (only once the batch is given up)
            stats.dropped_throttled += count
        elif attempt is not None and attempt.kind == "timed_out":
            stats.dropped_timed_out += count
            self._tell("slow", "loopscope: collector slow: no answer from %s within the %g s "
                       "export timeout; %d spans dropped (the agent is unaffected)",
                       self.endpoint, self.timeout_s, count)
        else:
            stats.dropped_rejected += count
            why = ("see the OpenTelemetry exporter's log" if attempt is None
                   else f"HTTP {attempt.status}"
                   if attempt.kind == "answered" else attempt.detail or attempt.kind)
            self._tell("failing", "loopscope: span export to %s failed (%s); %d spans dropped "
                       "(the agent is unaffected)", self.endpoint, why, count)

    def _tell(self, state: str, message: str, *args: object) -> None:
        """Log ``message`` when the collector's state changes to ``state`` (an ``ok`` after
        another state at INFO, the others at WARNING)."""
        if state == self._state:
            return
        previous, self._state = self._state, state
        if state != "busy":
            self._told_busy_drop = False
        if state != "ok":
            logger.warning(message, *args)
        elif previous != "ok":
            logger.info(message, *args)

    def begin_exit(self, within_s: float) -> None:
        """From now on, batches not sent within ``within_s`` are dropped (counted at exit);
        a wait for ``Retry-After`` ends now."""
        with self._lock:
            self._exit_deadline = time.monotonic() + within_s
        self._exiting.set()

    def drop_at_exit(self, count: int) -> None:
        """Count ``count`` spans that ended after the shutdown began as dropped at exit."""
        with self._lock:
            self.stats.dropped_at_exit += count

    def abandon(self, queued: int) -> int:
        """Give up on the ``queued`` spans still in the queue: count them as dropped at exit
        (batches handed over from now on are not sent) and stop the OTLP exporter's retries.
        The batch being sent, if any, is still counted by its answer (``export``) unless
        ``give_up`` comes first. Returns how many were counted."""
        with self._lock:
            if self._abandoned:
                return 0
            self._abandoned = True
            lost = max(queued, 0)
            self.stats.dropped_at_exit += lost
        self._shut_inner()
        return lost

    def give_up(self) -> int:
        """Count the batch still being sent as dropped at exit (no answer came in time; the
        export thread, left behind, counts nothing more). Returns how many were counted."""
        with self._lock:
            lost, self._in_flight = self._in_flight, 0
            self.stats.dropped_at_exit += lost
        return lost

    def shutdown(self) -> None:
        """Shut the wrapped exporter down (once)."""
        self._exiting.set()
        self._shut_inner()

    def _shut_inner(self) -> None:
        with self._lock:
            if self._inner_shut:
                return
            self._inner_shut = True
        try:
            self.inner.shutdown()
        except Exception:
            logger.debug("loopscope: exporter shutdown raised", exc_info=True)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered here."""
        return True


class ExportProcessor(SpanProcessor):
    """loopscope's span pipeline to a collector: OpenTelemetry's ``BatchSpanProcessor`` (the
    burst queue, its batching and its worker thread) in front of a ``ResilientExporter``.

    ``on_end`` runs on the agent's thread: it hands the span to the batch processor unless the
    queue is full, in which case the span is dropped and counted (the batch processor's deque
    would drop one silently). The queue's length is known without looking inside it: spans
    handed in minus spans the exporter was given is never less than what the queue holds.
    ``shutdown`` gives the queue ``EXIT_FLUSH_S`` to go out and counts the rest (a batch being
    sent then, by its answer within ``EXIT_ANSWER_S``).
    """

    def __init__(self, exporter: ResilientExporter, *, max_queue: int,
                 schedule_delay_millis: float | None = None) -> None:
        self.exporter = exporter
        self.stats = exporter.stats
        self.max_queue = max_queue
        self.batch: SpanProcessor = BatchSpanProcessor(
            exporter, max_queue_size=max_queue, schedule_delay_millis=schedule_delay_millis)
        self._lock = threading.Lock()
        self._accepted = 0
        self._told_full = False
        self._closed = False

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Count a sampled span started."""
        if span.context and span.context.trace_flags.sampled:
            self.stats.started_one()

    def on_end(self, span: ReadableSpan) -> None:
        """Queue a sampled span for export, or count it dropped when the queue is full."""
        if not (span.context and span.context.trace_flags.sampled):
            return
        with self._lock:
            if self._closed:  # (a span ending while the processor is replaced or shut down)
                self.exporter.drop_at_exit(1)
                self.exporter.report.dropped((span,))
                return
            queued = self._accepted - self.exporter.handed
            if queued >= self.max_queue:
                self.stats.dropped_queue_full += 1
                self.exporter.report.dropped((span,))
                if not self._told_full:
                    self._told_full = True
                    logger.warning("loopscope: the span queue is full (%d spans wait for the "
                                   "collector); new spans are dropped while it is full",
                                   self.max_queue)
                return
            if queued < self.max_queue // 2:
                self._told_full = False
            self._accepted += 1
            self.batch.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export everything queued now (on the caller's thread)."""
        return self.batch.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Send what is queued within ``EXIT_FLUSH_S``, then drop (and count) the rest; a
        batch being sent then is counted by its answer, if it comes within ``EXIT_ANSWER_S``.

        Called at process exit (the provider's ``atexit``) or when a second ``instrument()``
        replaces this processor; returns within ``EXIT_FLUSH_S`` (and ``EXIT_ANSWER_S`` when a
        batch is still being sent then) whatever the collector does: the batch processor's own
        shutdown runs on a thread of its own, which is left behind if it is still sending.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        before = self.stats.dropped_at_exit
        self.exporter.begin_exit(EXIT_FLUSH_S)
        flusher = threading.Thread(target=self.batch.shutdown, name="loopscope-exit-flush",
                                   daemon=True)
        try:
            flusher.start()
        except RuntimeError:  # no new thread this late in the interpreter's shutdown
            self.batch.shutdown()
        else:
            flusher.join(EXIT_FLUSH_S)
            if flusher.is_alive():
                self.exporter.abandon(self._accepted - self.exporter.handed)
                flusher.join(EXIT_ANSWER_S)  # (the batch being sent: its answer counts it)
                if flusher.is_alive():
                    self.exporter.give_up()
        lost = self.stats.dropped_at_exit - before
        if lost:
            logger.warning("loopscope: %d spans were not sent within %g s at shutdown and are "
                           "dropped; this process: %s", lost, EXIT_FLUSH_S,
                           self.stats.summary())
