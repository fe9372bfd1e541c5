"""A loopscope store built the way a collector builds one: scripted agents through the real
SDK, their spans through the collector's real ``Pipeline`` (with the spike alerts on)."""

from __future__ import annotations

import time
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
    """Move the runs into the past, each starting a minute after the one before ended (a
    run lasts as long as its script's clock says), and observe- and enforce-mode runs to two
    services, so the time and service charts have more than one bucket and line."""
    bounds: dict[str, list[int]] = {}
    for span in spans:
        seen = bounds.setdefault(span.trace_id, [span.start_ns, span.end_ns])
        seen[0], seen[1] = min(seen[0], span.start_ns), max(seen[1], span.end_ns)
    shifts: dict[str, int] = {}
    gap = 60_000_000_000
    total = sum(end - start + gap for start, end in bounds.values())
    # all in the past: a span dated past the collector's clock (and its allowed skew) is
    # counted by the alerts at the clock, not at its own time
    at = min(min(start for start, _ in bounds.values()) - 40 * gap,
             time.time_ns() - total - 5 * gap)
    # on a whole millisecond: the calls end a few nanoseconds into a microsecond, so an alert's
    # time (kept to the microsecond) falls just before the call that fired it, every run
    at -= at % 1_000_000
    for trace_id, (start, end) in bounds.items():
        shifts[trace_id] = at - start
        at += end - start + gap
    for span in spans:
        shift = shifts[span.trace_id]
        span.start_ns += shift
        span.end_ns += shift
        for event in span.events:
            event.time_ns += shift
        episode = str(span.attributes.get("loopscope.episode.id", ""))
        service = "support-agent" if episode.endswith("-enforce") else "shop-agent"
        # set here: the OTel global provider (and its resource) is the first test's
        span.resource = {**span.resource, "service.name": service}


def build_empty_store(path: Path) -> Path:
    """A migrated store with nothing in it."""
    open_database(path).close()
    return path


def scenario_bodies(shapes: tuple[str, ...], *, seed: int = 0,
                    service: str | None = None) -> list[bytes]:
    """One scripted run per scenario shape as the Import page sends it: Episode JSONL read by
    ``uploads.analyse``, then OTLP JSON export requests (``uploads.otlp_bodies``)."""
    import json

    from loopscope_dashboard import uploads

    episodes = generate(seed=seed, per_shape=1, shapes=shapes, faults=False)
    analysis = uploads.analyse(
        "runs.jsonl", "".join(json.dumps(e) + "\n" for e in episodes).encode())
    return uploads.otlp_bodies(analysis, service=service)
