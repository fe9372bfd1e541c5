"""No-progress spike alerts: the detector on an injected clock, the manager on a real pipeline
and store, the sinks, and a real collector process posting to a local webhook."""

from __future__ import annotations

import json
import os
import string
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from collector_process import CollectorProcess, eventually, free_port, start_collector
from otlp_requests import episode_request, request, tool_span

from loopscope_collector.alerts.manager import (
    Alert,
    AlertManager,
    AlertSettings,
    SpikeDetector,
)
from loopscope_collector.alerts.sinks import FanOutSink, WebhookSink, slack_text
from loopscope_collector.pipeline.thread import Pipeline
from loopscope_collector.receive.decode import decode_proto_request
from loopscope_collector.storage import open_database

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000.0  # a bucket boundary (multiple of 5 s)


def traffic(detector: SpikeDetector, start: float, seconds: int, *, rate: float,
            per_s: int = 2, streak: int = 0) -> list[Alert]:
    """``per_s`` steps a second for ``seconds``, a fraction ``rate`` of them without progress
    (spread evenly), evaluating after each second; returns the alerts raised."""
    alerts = []
    done = stuck = 0
    for sec in range(seconds):
        for i in range(per_s):
            no_progress = stuck < round(rate * (done + 1))
            stuck += no_progress
            done += 1
            detector.observe(start + sec + i / per_s, no_progress=no_progress,
                             episode_id=f"ep{done % 7}", streak=streak if no_progress else 0)
        if (alert := detector.evaluate(start + sec + 1)) is not None:
            alerts.append(alert)
    return alerts


def test_fires_on_a_spike_above_baseline_times_factor() -> None:
    """A quiet 5% baseline for 20 minutes, then 30%: under the 50% threshold, but 6x the
    baseline and above the 20% floor."""
    detector = SpikeDetector("svc", AlertSettings(threshold=0.9))
    assert traffic(detector, T0, 1200, rate=0.05) == []
    alerts = traffic(detector, T0 + 1200, 60, rate=0.3, streak=4)
    assert [a.state for a in alerts] == ["firing"]
    alert = alerts[0]
    assert alert.service == "svc" and alert.resolved_at is None
    assert alert.baseline == pytest.approx(0.05, abs=0.01)
    assert 0.15 <= alert.rate <= 0.9 and alert.volume >= 20
    assert alert.episodes_in_streak >= 1 and alert.episodes >= alert.episodes_in_streak
    assert "3x its baseline 5%" in alert.message and "svc" in alert.message


def test_fires_above_the_fixed_threshold_without_a_baseline() -> None:
    detector = SpikeDetector("svc")
    alerts = traffic(detector, T0, 30, rate=0.6)
    assert [a.state for a in alerts] == ["firing"]
    assert alerts[0].baseline is None and alerts[0].rate >= 0.5
    assert "above the threshold 50%" in alerts[0].message


def test_does_not_fire_under_the_minimum_volume() -> None:
    """Every step stuck, but only 10 in any 60 s window (min volume 20)."""
    detector = SpikeDetector("svc")
    alerts = []
    for i in range(100):  # one step every 6 s
        detector.observe(T0 + 6 * i, no_progress=True)
        if (alert := detector.evaluate(T0 + 6 * i + 0.5)) is not None:
            alerts.append(alert)
    assert alerts == []
    assert detector.window(T0 + 600)[1] < 20


def test_cooldown_suppresses_a_second_firing() -> None:
    detector = SpikeDetector("svc", AlertSettings(cooldown_s=300))
    first = traffic(detector, T0, 30, rate=1.0)
    assert [a.state for a in first] == ["firing"]
    assert [a.state for a in traffic(detector, T0 + 30, 90, rate=0.0)] == ["resolved"]
    assert traffic(detector, T0 + 120, 60, rate=1.0) == []  # 120-180 s after firing
    again = traffic(detector, T0 + 180, 200, rate=1.0)  # the cooldown ends at 300 s
    assert [a.state for a in again] == ["firing"]
    assert again[0].fired_at >= first[0].fired_at + 300 and again[0].id != first[0].id


def test_resolves_when_the_rate_falls_back() -> None:
    detector = SpikeDetector("svc")
    (fired,) = traffic(detector, T0, 30, rate=0.8)
    assert detector.firing == fired
    (resolved,) = traffic(detector, T0 + 30, 120, rate=0.0)
    assert resolved.state == "resolved" and resolved.id == fired.id
    assert resolved.fired_at == fired.fired_at and resolved.resolved_at is not None
    # the rate must have been low for a whole bucket (5 s), with hysteresis below 50%
    assert resolved.resolved_at > fired.fired_at + 5 and resolved.rate < 0.5 * 0.8
    assert "resolved" in resolved.message and detector.firing is None
    assert resolved.resolved_because == (f"the no-progress rate fell to {resolved.rate:.0%}, "
                                         "under 40% (80% of the 50% it fired at), for 5 s")


def test_silence_resolves_as_the_clock_moves_on() -> None:
    detector = SpikeDetector("svc")
    (fired,) = traffic(detector, T0, 30, rate=1.0)
    assert detector.evaluate(T0 + 60) is None  # the spike is still in the window
    assert detector.evaluate(T0 + 100) is None  # window empty: calm starts
    resolved = detector.evaluate(T0 + 105)
    assert resolved is not None and resolved.state == "resolved" and resolved.volume == 0
    assert resolved.id == fired.id
    assert resolved.resolved_because == (
        "the service's tool calls fell to 0 in the last 60 s, under 16 (80% of the 20 needed "
        "to judge a rate), for 5 s")


def test_a_steady_high_but_normal_baseline_does_not_fire_by_factor() -> None:
    """30% stuck is this service's normal: 45% is 1.5x, under the 3x factor and under 50%."""
    detector = SpikeDetector("svc")
    assert traffic(detector, T0, 1800, rate=0.3) == []
    assert detector.baseline == pytest.approx(0.3, abs=0.02)
    assert traffic(detector, T0 + 1800, 120, rate=0.45) == []


def test_firing_periods_stay_out_of_the_baseline() -> None:
    detector = SpikeDetector("svc", AlertSettings(threshold=0.9, cooldown_s=0))
    traffic(detector, T0, 1200, rate=0.05)
    (fired,) = traffic(detector, T0 + 1200, 600, rate=0.5)
    assert fired.baseline == pytest.approx(0.05, abs=0.01)
    assert detector.baseline == pytest.approx(fired.baseline, abs=1e-9)  # 10 min later


def test_steps_older_than_the_window_are_dropped() -> None:
    detector = SpikeDetector("svc")
    detector.evaluate(T0 + 600)
    assert detector.observe(T0, no_progress=True) is False
    assert detector.observe(T0 + 590, no_progress=True) is True


@pytest.mark.parametrize(("settings", "says"), [
    ({"window_s": 0}, "window_s"),
    ({"window_s": 2, "bucket_s": 5}, "window_s"),
    ({"threshold": 1.5}, "threshold"),
    ({"min_volume": 0}, "min_volume"),
    ({"cooldown_s": -1}, "cooldown_s"),
])
def test_settings_are_checked_at_setup(settings: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        AlertSettings(**settings)


# -- sinks ------------------------------------------------------------------------------------


def _alert(state: str = "firing") -> Alert:
    return Alert(id="a1", service="svc", state=state, rate=0.9, baseline=None,  # type: ignore[arg-type]
                 volume=30, episodes_in_streak=2, episodes=3, message="stuck", fired_at=T0)


class Broken:
    def send(self, alert: Alert) -> None:
        raise RuntimeError("boom")


class Recording:
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def send(self, alert: Alert) -> None:
        self.alerts.append(alert)


def test_fan_out_isolates_a_failing_sink() -> None:
    recording = Recording()
    FanOutSink((Broken(), recording)).send(_alert())
    assert [a.id for a in recording.alerts] == ["a1"]


def test_webhook_counts_failures_and_never_raises() -> None:
    sink = WebhookSink(f"http://127.0.0.1:{free_port()}/hook", timeout_s=1)  # nobody listens
    sink.send(_alert())
    sink.close()
    assert sink.failures == 1 and sink.sent == 0


def test_webhook_rejects_a_url_that_is_not_http() -> None:
    with pytest.raises(ValueError, match="http"):
        WebhookSink("ftp://example.com/hook")


def test_slack_text_names_state_and_service() -> None:
    assert slack_text(_alert()).startswith(":rotating_light: *FIRING* loopscope `svc`: stuck")
    assert "*RESOLVED*" in slack_text(_alert("resolved"))


def healthy_request(start_ns: int, *, episodes: int = 10, calls: int = 4) -> Any:
    """Episodes whose every call finds something new (distinct words, not just numbers)."""
    spans = []
    for e in range(episodes):
        trace_id = os.urandom(16)
        for c in range(calls):
            word = "".join(string.ascii_lowercase[(e * calls + c) // 26 ** k % 26]
                           for k in range(3))
            spans.append(tool_span(trace_id, os.urandom(8), tool="search",
                                   args=f'{{"q": "{word}"}}', result=f"found {word}",
                                   start_ns=start_ns + (e * calls + c) * 10_000_000))
    return request(spans)


# -- the manager on a real pipeline and store -------------------------------------------------


def test_manager_writes_history_and_counts_on_the_pipeline_thread(tmp_path: Path) -> None:
    """Spans a minute old (a replay): the alert fires on span time, is stored, then resolves
    when healthy traffic follows; a re-sent batch is not counted twice."""
    recording = Recording()
    manager = AlertManager(AlertSettings(min_volume=10, window_s=30), recording)
    db = open_database(str(tmp_path / "store.duckdb"))
    pipeline = Pipeline(db, on_batch=manager).start()
    base = int((time.time() - 120) * 1e9)
    try:
        spin, _ = episode_request(30, repeat=True, start_ns=base)
        pipeline.submit(decode_proto_request(spin)).wait(30)
        pipeline.submit(decode_proto_request(spin)).wait(30)  # a retry: duplicates, skipped
        assert [a.state for a in recording.alerts] == ["firing"]
        assert manager.counts() == [("load", "firing", 1)] and manager.firing == 1
        for offset in (60, 70):
            healthy = healthy_request(base + offset * 1_000_000_000)
            pipeline.submit(decode_proto_request(healthy)).wait(30)
    finally:
        pipeline.stop()
    assert [a.state for a in recording.alerts] == ["firing", "resolved"]
    assert manager.counts() == [("load", "firing", 1), ("load", "resolved", 1)]
    rows = db.cursor().execute(
        "select alert_id, service, state, resolved_at is not null, volume from alerts"
    ).fetchall()
    db.close()
    assert rows == [(recording.alerts[0].id, "load", "resolved", True, 30)]


def test_an_alert_resolves_while_the_service_is_silent(tmp_path: Path) -> None:
    """No traffic after the spike: the ticker wakes the pipeline (an empty batch) and the
    service's clock moves on with the wall clock until the window is empty."""
    recording = Recording()
    manager = AlertManager(AlertSettings(min_volume=10, window_s=1, bucket_s=0.2), recording)
    db = open_database(str(tmp_path / "store.duckdb"))
    pipeline = Pipeline(db, on_batch=manager).start()
    manager.start_ticker(pipeline)
    try:
        spin, _ = episode_request(20, repeat=True, start_ns=time.time_ns())
        pipeline.submit(decode_proto_request(spin)).wait(30)
        assert [a.state for a in recording.alerts] == ["firing"]
        eventually(lambda: len(recording.alerts) == 2)
    finally:
        manager.close()
        pipeline.stop()
        db.close()
    assert recording.alerts[1].state == "resolved" and recording.alerts[1].volume == 0
    assert manager.firing == 0


def test_far_future_span_times_are_clamped_to_the_wall_clock(tmp_path: Path) -> None:
    recording = Recording()
    manager = AlertManager(AlertSettings(min_volume=10), recording, clock=lambda: T0)
    db = open_database(str(tmp_path / "store.duckdb"))
    pipeline = Pipeline(db, on_batch=manager).start()
    try:
        spin, _ = episode_request(20, repeat=True, start_ns=int((T0 + 86_400) * 1e9))
        pipeline.submit(decode_proto_request(spin)).wait(30)
    finally:
        pipeline.stop()
        db.close()
    assert [a.state for a in recording.alerts] == ["firing"]
    assert recording.alerts[0].fired_at <= T0 + manager.settings.max_clock_skew_s


# -- a real collector process -----------------------------------------------------------------


class Webhook:
    """A local HTTP endpoint that records the JSON bodies POSTed to it."""

    def __init__(self) -> None:
        bodies: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.bodies = bodies
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def collector(tmp_path: Path, webhook: Webhook) -> Iterator[CollectorProcess]:
    proc = start_collector(tmp_path / "store.duckdb", extra=[
        "--webhook", webhook.url, "--alert-min-volume", "10", "--alert-threshold", "0.5",
        "--alert-window", "30"])
    yield proc
    proc.stop()


def _metric(collector: CollectorProcess, line_start: str) -> str | None:
    text = collector.get("/metrics")
    return next((line for line in text.splitlines() if line.startswith(line_start)), None)


def test_a_spinning_service_alerts_to_the_webhook_metrics_and_history(
    collector: CollectorProcess, webhook: Webhook
) -> None:
    """30 identical calls (29 without progress) fire one alert for service "load"; healthy
    traffic later in span time resolves it."""
    base = int((time.time() - 120) * 1e9)
    spin, _ = episode_request(30, repeat=True, start_ns=base)
    assert collector.post(spin.SerializeToString())[0] == 200

    body = eventually(lambda: webhook.bodies and webhook.bodies[0])
    assert "*FIRING*" in body["text"] and "`load`" in body["text"]
    assert body["alert"]["service"] == "load" and body["alert"]["state"] == "firing"
    assert body["alert"]["rate"] >= 0.5 and body["alert"]["volume"] == 30
    assert eventually(lambda: _metric(collector, 'loopscope_alerts_total{service="load"')) == (
        'loopscope_alerts_total{service="load",state="firing"} 1')
    assert _metric(collector, "loopscope_alert_sink_failures_total") == (
        "loopscope_alert_sink_failures_total 0")
    assert _metric(collector, 'loopscope_alerts_firing{service="load"}') == (
        'loopscope_alerts_firing{service="load"} 1')  # what Grafana's "Alerts firing now" sums
    (row,) = collector.read("alerts")
    assert row["alert_id"] == body["alert"]["id"] and row["state"] == "firing"
    assert row["service"] == "load" and row["volume"] == 30
    # where it went: the log, the webhook by host only (its path may hold a token), /metrics
    assert json.loads(row["sent_to"]) == ["log", "webhook 127.0.0.1", "prometheus"]
    assert row["resolved_because"] is None
    assert _metric(collector, 'loopscope_service_tool_calls_total{service="load"}') == (
        'loopscope_service_tool_calls_total{service="load"} 30')
    assert _metric(collector, 'loopscope_service_no_progress_calls_total{service="load"}') == (
        'loopscope_service_no_progress_calls_total{service="load"} 29')

    for offset in (60, 70):
        healthy = healthy_request(base + offset * 1_000_000_000)
        assert collector.post(healthy.SerializeToString())[0] == 200
    resolved = eventually(lambda: len(webhook.bodies) > 1 and webhook.bodies[1])
    assert "*RESOLVED*" in resolved["text"] and resolved["alert"]["id"] == row["alert_id"]
    assert eventually(lambda: collector.read("alerts")[0]["state"] == "resolved")
    assert collector.read("alerts")[0]["resolved_at"] is not None
    because = collector.read("alerts")[0]["resolved_because"]
    assert because.startswith("the no-progress rate fell to ") and "it fired at" in because
    assert because in resolved["text"]
    assert _metric(collector, 'loopscope_alerts_total{service="load",state="resolved"}') == (
        'loopscope_alerts_total{service="load",state="resolved"} 1')
    assert _metric(collector, 'loopscope_alerts_firing{service="load"}') == (
        'loopscope_alerts_firing{service="load"} 0')
