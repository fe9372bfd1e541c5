"""An agent process's export report (``loopscope.export_report``): the SDK's own counts.

loopscope's exporter adds this span to the next batch it sends after it dropped spans
(``loopscope._export_report``): cumulative counts of spans started, exported and dropped by
reason, and the runs that lost spans since its last report got through. Read leniently: a
count that is not a non-negative integer counts 0, and a malformed run list is ignored.
"""

from __future__ import annotations

from loopscope import conventions as c

from .common import as_int, text
from .rows import ExportReportRow
from .spans import SpanRecord


def is_export_report(span: SpanRecord) -> bool:
    """Whether ``span`` is an export report."""
    return span.name == c.EXPORT_REPORT and c.SDK_SPANS_EXPORTED in span.attributes


def read_export_report(span: SpanRecord) -> ExportReportRow:
    """The report's counts; its instance is the resource's ``service.instance.id``, else the
    one the report names."""
    attrs = span.attributes
    runs = attrs.get(c.SDK_INCOMPLETE_RUNS)
    counts = attrs.get(c.SDK_INCOMPLETE_RUNS_DROPPED)
    lost: dict[str, int] = {}
    if isinstance(runs, list) and isinstance(counts, list) and len(runs) == len(counts):
        for run, count in zip(runs, counts, strict=True):
            if isinstance(run, str) and run:
                lost[run] = lost.get(run, 0) + _count(count)
    return ExportReportRow(
        trace_id=span.trace_id,
        span_id=span.span_id,
        service=span.service_name,
        instance=text(span.resource.get(c.SERVICE_INSTANCE_ID))
        or text(attrs.get(c.SERVICE_INSTANCE_ID)) or "",
        time_ns=span.end_ns or span.start_ns,
        started=_count(attrs.get(c.SDK_SPANS_STARTED)),
        exported=_count(attrs.get(c.SDK_SPANS_EXPORTED)),
        dropped={reason: _count(attrs.get(c.SDK_SPANS_DROPPED + reason))
                 for reason in c.DROP_REASONS},
        runs=lost,
    )


def _count(value: object) -> int:
    number = as_int(value)
    return number if number is not None and number > 0 else 0
