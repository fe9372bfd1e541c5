"""A loopscope store built the way a collector builds one: scripted agents through the real
SDK, their spans through the collector's real ``Pipeline`` (with the spike alerts on)."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from loopscope.offline.demo import drive
from loopscope.offline.scenarios import generate
from loopscope.testing import capture_spans
from loopscope_collector.alerts.manager import AlertManager
from loopscope_collector.alerts.settings import AlertSettings
from loopscope_collector.normalize.spans import SpanRecord
from loopscope_collector.pipeline.thread import Pipeline
from loopscope_collector.receive.decode import decode_request
from loopscope_collector.storage import open_database

SHAPES = ("healthy_lookup", "read_spin", "oscillation", "param_jitter", "poll_legit",
          "write_timeout_reconciled", "write_duplicate", "repeat_same_error")
"""Loops, legitimate look-alikes, UNKNOWN writes and guard decisions."""


class _QuietSink:
    destination = "webhook hooks.example.com"  # as the Alerts page names a webhook

    def send(self, alert: object) -> None:
        """Keep alerts out of the test log; the store has them."""


def build_store(path: Path) -> Path:
    """Drive the scenario agents in observe and enforce mode into a new store at ``path``."""
    scripts = generate(seed=0, per_shape=1, shapes=SHAPES, faults=False)
    with capture_spans(service_name="shop-agent", capture_content=True,
                       policy={"budgets": {"tool_calls": 40}}) as captured:
        for mode in ("observe", "enforce"):
            for script in scripts:
                drive(script, mode=mode, service="shop")
        sdk_spans = list(captured.spans())
    body = encode_spans(sdk_spans).SerializeToString()
    spans = decode_request(body, content_type="application/x-protobuf", content_encoding=None,
                           max_bytes=len(body) + 1)
    _spread(spans)
    db = open_database(path)
    alerts = AlertManager(AlertSettings(min_volume=5, threshold=0.3, window_s=3600,
                                        bucket_s=60), _QuietSink())
    pipeline = Pipeline(db, on_batch=alerts).start()
    try:
        pipeline.submit(spans).wait(60)
    finally:
        pipeline.stop(60)
        db.close()
    return path


def _spread(spans: list[SpanRecord]) -> None:
    """Move each run a minute apart into the past, and observe- and enforce-mode runs to two
    services, so the time and service charts have more than one bucket and line. Within a
    run, the moments its spans record keep their order a second apart: the scripted agents
    call their tools back to back, microseconds apart, and a replay would take calls that
    close for the parallel calls of one model turn, which the guard did not see them as."""
    order: dict[str, int] = {}
    moments: dict[str, dict[int, int]] = {}
    for span in spans:
        times = moments.setdefault(span.trace_id, {})
        for t in (span.start_ns, span.end_ns, *(e.time_ns for e in span.events)):
            times[t] = 0
    for times in moments.values():
        first = min(times)
        for n, t in enumerate(sorted(times)):
            times[t] = first + n * 1_000_000_000
    for span in spans:
        index = order.setdefault(span.trace_id, len(order))
        shift = (index - 40) * 60_000_000_000
        times = moments[span.trace_id]
        span.start_ns = times[span.start_ns] + shift
        span.end_ns = times[span.end_ns] + shift
        for event in span.events:
            event.time_ns = times[event.time_ns] + shift
        episode = str(span.attributes.get("loopscope.episode.id", ""))
        service = "support-agent" if episode.endswith("-enforce") else "shop-agent"
        # set here: the OTel global provider (and its resource) is the first test's
        span.resource = {**span.resource, "service.name": service}


def build_empty_store(path: Path) -> Path:
    """A migrated store with nothing in it."""
    open_database(path).close()
    return path
