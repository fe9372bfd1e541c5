"""The exporter's own counts, sent to the collector with the next batch that gets through.

Spans an agent's process drops never reach the collector, so the process says so itself:
after a span was dropped, the next batch the exporter sends carries one more span, named
``loopscope.export_report``, whose attributes are the process's counts so far (spans started,
exported — the report's own batch included —, dropped by reason) and the runs that lost spans
since the last report got through, each with how many. Batches go on carrying one until a
report that accounts for every span started (exported or dropped: none left in the queue or
in flight) was acknowledged, so the store's latest report equals the process's own counts
once the process has sent what it had, not only the counts as of the first batch after the
loss. It is an ordinary span on the process's resource (with a
``service.instance.id``: the process's, or one loopscope makes up), so any OTLP collector
takes it; loopscope's stores it per service and instance. The counts are cumulative, so a
report lost with its batch is made good by the next one; a run is named again until a report
naming it was acknowledged. Spans dropped at exit are reported only if a batch still gets
through after them, which at exit is seldom.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags

from . import conventions as c

if TYPE_CHECKING:
    from ._export import ExportStats

INSTANCE_ID: Final = str(uuid.uuid4())
"""This process's ``service.instance.id`` when its resource has none."""
MAX_RUNS: Final = 10_000
"""Runs remembered as having lost spans, awaiting a report (more are counted, not named)."""
RUNS_PER_REPORT: Final = 500
"""Runs named in one report (the rest in the next)."""
_IDS: Final = RandomIdGenerator()
_SCOPE: Final = InstrumentationScope("loopscope")


def run_of(span: ReadableSpan) -> str | None:
    """The run a span belongs to (``loopscope.episode.id``), if it says."""
    value = (span.attributes or {}).get(c.EPISODE_ID)
    return value if isinstance(value, str) and value else None


class LossReport:
    """What the next report says, and what was acknowledged.

    ``dropped`` is called from any thread (the agent's, when the queue is full); ``attach``
    and ``settle`` from the export thread, one export at a time.
    """

    def __init__(self, stats: ExportStats) -> None:
        self.stats = stats
        self._lock = threading.Lock()
        self._runs: dict[str, int] = {}
        self._acked_dropped = 0
        self._sent: tuple[int, dict[str, int], bool] | None = None
        self._accounted = True
        """The last report acknowledged accounted for every span started (none was owed
        before the first drop)."""

    def dropped(self, spans: Iterable[ReadableSpan]) -> None:
        """Remember the runs of ``spans``, which were dropped (their count is in ``stats``)."""
        with self._lock:
            for span in spans:
                run = run_of(span)
                if run is not None and (run in self._runs or len(self._runs) < MAX_RUNS):
                    self._runs[run] = self._runs.get(run, 0) + 1

    def attach(self, spans: Sequence[ReadableSpan]) -> Sequence[ReadableSpan]:
        """``spans``, plus a report when spans were dropped since the last one acknowledged,
        or when that one did not account for every span started yet."""
        with self._lock:
            stats = self.stats
            dropped = stats.dropped
            if not spans or (dropped == self._acked_dropped and not self._runs
                             and self._accounted):
                self._sent = None
                return spans
            runs = dict(list(self._runs.items())[:RUNS_PER_REPORT])
            exported = stats.exported + len(spans)  # (the report arrives only with them)
            self._sent = (dropped, runs, stats.started <= exported + dropped)
        return [*spans, self._span(spans[0].resource, runs, exported)]

    def settle(self, acknowledged: bool) -> None:
        """The batch with the last report attached was acknowledged, or not."""
        sent, self._sent = self._sent, None
        if sent is None or not acknowledged:
            return
        with self._lock:
            self._accounted = sent[2]
            self._acked_dropped = max(self._acked_dropped, sent[0])
            for run, count in sent[1].items():
                left = self._runs.get(run, 0) - count
                if left > 0:
                    self._runs[run] = left
                else:
                    self._runs.pop(run, None)

    def _span(self, resource: Resource, runs: dict[str, int], exported: int) -> ReadableSpan:
        stats = self.stats
        attributes: dict[str, int | str | list[str] | list[int]] = {
            c.SDK_SPANS_STARTED: stats.started,
            c.SDK_SPANS_EXPORTED: exported,
            **{c.SDK_SPANS_DROPPED + reason: getattr(stats, f"dropped_{reason}")
               for reason in c.DROP_REASONS},
            c.SERVICE_INSTANCE_ID: instance_of(resource),
        }
        if runs:
            attributes[c.SDK_INCOMPLETE_RUNS] = list(runs)
            attributes[c.SDK_INCOMPLETE_RUNS_DROPPED] = list(runs.values())
        now = time.time_ns()
        context = SpanContext(_IDS.generate_trace_id(), _IDS.generate_span_id(),
                              is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        if c.SERVICE_INSTANCE_ID not in resource.attributes:
            resource = Resource({c.SERVICE_INSTANCE_ID: INSTANCE_ID}).merge(resource)
        return ReadableSpan(name=c.EXPORT_REPORT, context=context, resource=resource,
                            attributes=attributes, start_time=now, end_time=now,
                            instrumentation_scope=_SCOPE)


def instance_of(resource: Resource) -> str:
    """The resource's ``service.instance.id``, else this process's made-up one."""
    value = resource.attributes.get(c.SERVICE_INSTANCE_ID)
    return str(value) if value else INSTANCE_ID
