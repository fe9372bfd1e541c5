"""Alerts on no-progress spikes: per service, a rolling rate of tool calls that made no progress.

One agent spinning is a flag on its episode; many agents of a service spinning at once (a tool
that broke, a prompt that regressed) is an incident. ``SpikeDetector`` keeps, per service, a
rolling window of steps and no-progress steps in time buckets plus a slow baseline, and fires
when the window's rate rises above ``baseline * factor`` (and a floor) or above a fixed
threshold, with a minimum volume and a cooldown; it resolves when the rate stays below the
firing level (with hysteresis) for a bucket. It does no I/O and takes the time as an argument.

``AlertManager`` is the pipeline's ``on_batch`` hook: it feeds the detectors from each batch's
verdicts, writes the alert history (``alerts`` table) on the pipeline thread's cursor, and hands
alerts to an ``AlertSink`` (``LogSink``, ``WebhookSink``, ``FanOutSink``, in ``sinks``);
the counts feed ``/metrics``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

import pyarrow as pa

from ..storage.arrow import schema
from ..storage.queries import insert_rows
from .alert import Alert
from .settings import AlertSettings
from .sinks import AlertSink, LogSink, destinations

if TYPE_CHECKING:
    from ..pipeline.detection import EpisodeResult
    from ..pipeline.thread import Pipeline
    from ..storage.errors import Cursor

logger = logging.getLogger(__name__)


class SpikeDetector:
    """One service's rolling no-progress rate and baseline (pure: no I/O, no clock of its own).

    ``observe`` adds one step at span time ``t``; ``evaluate(now)`` advances the clock
    (never backwards) and returns an ``Alert`` when the state changes, else ``None``. Steps
    older than the window at the last ``evaluate`` are too late and are dropped.
    """

    def __init__(self, service: str, settings: AlertSettings | None = None) -> None:
        self.service = service
        self.settings = s = settings or AlertSettings()
        self._n = max(1, math.ceil(s.window_s / s.bucket_s - 1e-9))
        self._decay = math.exp(-s.bucket_s / s.baseline_s)
        self._buckets: dict[int, list[int]] = {}  # bucket index -> [steps, no-progress steps]
        self._tainted: set[int] = set()  # buckets seen while firing: kept out of the baseline
        self._episodes: dict[str, tuple[float, int]] = {}  # episode -> (last t, streak)
        self._base_steps = 0.0
        self._base_np = 0.0
        self._base_last: int | None = None  # the last bucket the baseline has decayed to
        self._now: int | None = None
        self._level = s.threshold
        self._last_fired: float | None = None
        self._calm_since: float | None = None
        self.firing: Alert | None = None

    def observe(self, t: float, *, no_progress: bool, episode_id: str | None = None,
                streak: int = 0) -> bool:
        """Count one step; False when it is older than the window (too late to count)."""
        index = math.floor(t / self.settings.bucket_s)
        if self._now is not None and index <= self._now - self._n:
            return False
        counts = self._buckets.setdefault(index, [0, 0])
        counts[0] += 1
        counts[1] += no_progress
        if episode_id is not None:
            seen = self._episodes.get(episode_id)
            if seen is None or t >= seen[0]:
                self._episodes[episode_id] = (t, streak)
        return True

    @property
    def baseline(self) -> float | None:
        """The slow no-progress rate, or None until it holds ``min_volume`` (decayed) steps."""
        if self._base_steps < self.settings.min_volume:
            return None
        return self._base_np / self._base_steps

    def window(self, now: float) -> tuple[float, int, int, int]:
        """(rate, steps, episodes in a streak, episodes) in the window ending at ``now``."""
        s = self.settings
        end = math.floor(now / s.bucket_s)
        steps = no_progress = 0
        for index, (n, np_) in self._buckets.items():
            if end - self._n < index <= end:
                steps += n
                no_progress += np_
        recent = [k for t, k in self._episodes.values() if now - s.window_s < t <= now]
        in_streak = sum(k >= s.streak for k in recent)
        return (no_progress / steps if steps else 0.0), steps, in_streak, len(recent)

    def evaluate(self, now: float) -> Alert | None:
        """Advance to ``now``; the new firing or resolved alert, if the state changed."""
        s = self.settings
        index = math.floor(now / s.bucket_s)
        if self._now is not None and index < self._now:
            index, now = self._now, max(now, self._now * s.bucket_s)
        self._now = index
        self._fold(index - self._n)
        cutoff = now - s.window_s
        self._episodes = {e: v for e, v in self._episodes.items() if v[0] > cutoff}
        rate, volume, in_streak, episodes = self.window(now)
        baseline = self.baseline
        if self.firing is None:
            level = s.threshold if baseline is None else min(
                s.threshold, max(baseline * s.factor, s.floor))
            cooled = self._last_fired is None or now - self._last_fired >= s.cooldown_s
            if volume < s.min_volume or rate < level or not cooled:
                return None
            self._level, self._last_fired, self._calm_since = level, now, None
            self._taint(index)
            why = (f"above the threshold {s.threshold:.0%}" if rate >= s.threshold else
                   f"{s.factor:g}x its baseline {baseline or 0:.0%}")
            self.firing = Alert(
                id=_alert_id(self.service, now), service=self.service, state="firing",
                rate=rate, baseline=baseline, volume=volume, episodes_in_streak=in_streak,
                episodes=episodes, fired_at=now, message=(
                    f"no-progress spike in service {self.service}: {rate:.0%} of {volume} tool "
                    f"calls in the last {s.window_s:g} s made no progress ({why}); "
                    f"{in_streak} of {episodes} runs in a no-progress streak"))
            return self.firing
        self._taint(index)
        calm = rate < self._level * s.hysteresis or volume < s.min_volume * s.hysteresis
        if not calm:
            self._calm_since = None
            return None
        if self._calm_since is None:
            self._calm_since = now
        if now - self._calm_since < s.bucket_s:
            return None
        if volume < s.min_volume * s.hysteresis:
            because = (f"the service's tool calls fell to {volume} in the last "
                       f"{s.window_s:g} s, under {s.min_volume * s.hysteresis:g} "
                       f"({s.hysteresis:.0%} of the {s.min_volume} needed to judge a rate), "
                       f"for {s.bucket_s:g} s")
        else:
            because = (f"the no-progress rate fell to {rate:.0%}, under "
                       f"{self._level * s.hysteresis:.0%} ({s.hysteresis:.0%} of the "
                       f"{self._level:.0%} it fired at), for {s.bucket_s:g} s")
        resolved = replace(
            self.firing, state="resolved", rate=rate, volume=volume,
            episodes_in_streak=in_streak, episodes=episodes, resolved_at=now,
            resolved_because=because, message=(
                f"no-progress spike in service {self.service} resolved: {rate:.0%} of "
                f"{volume} tool calls in the last {s.window_s:g} s made no progress"))
        self.firing = None
        return resolved

    def _taint(self, end: int) -> None:
        self._tainted.update(range(end - self._n + 1, end + 1))

    def _fold(self, last: int) -> None:
        """Move buckets up to index ``last`` (they left the window) into the baseline."""
        leaving = sorted(i for i in self._buckets if i <= last)
        for i in leaving:
            steps, no_progress = self._buckets.pop(i)
            if i in self._tainted:
                continue
            self._decay_to(i)
            self._base_steps += steps
            self._base_np += no_progress
        self._decay_to(last)
        self._tainted = {i for i in self._tainted if i > last}

    def _decay_to(self, index: int) -> None:
        if self._base_last is not None and index > self._base_last:
            kept = self._decay ** (index - self._base_last)
            self._base_steps *= kept
            self._base_np *= kept
        if self._base_last is None or index > self._base_last:
            self._base_last = index


def _alert_id(service: str, fired_at: float) -> str:
    """Deterministic: the same spike replayed into a fresh store gets the same id."""
    return hashlib.sha256(f"{service}\0{fired_at:.6f}".encode()).hexdigest()[:16]


# -- the pipeline hook ------------------------------------------------------------------------

ALERTS: Final = schema([
    ("alert_id", pa.string()), ("service", pa.string()), ("state", pa.string()),
    ("fired_at", pa.timestamp("us")), ("resolved_at", pa.timestamp("us")),
    ("rate", pa.float64()), ("baseline", pa.float64()), ("volume", pa.int32()),
    ("episodes_in_streak", pa.int32()), ("episodes", pa.int32()), ("message", pa.string()),
    ("threshold", pa.float64()), ("window_s", pa.float64()), ("baseline_s", pa.float64()),
    ("factor", pa.float64()), ("floor", pa.float64()), ("min_volume", pa.int32()),
    ("sent_to", pa.string()),
])
PROMETHEUS: Final = "prometheus"
"""Every alert is counted on ``/metrics`` (``loopscope_alerts_total``), for a Prometheus that
scrapes it (and for rules from ``loopscope export --prometheus-rules``)."""
RESTARTED: Final = ("the collector restarted while it was firing: the rate it was judged by "
                    "was not kept")
RULE_COLUMNS: Final = ("threshold", "window_s", "baseline_s", "factor", "floor", "min_volume")
"""The ``AlertSettings`` stored with each alert: the rule it was judged by."""


def _timestamp(t: float | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).replace(tzinfo=None)


class AlertManager:
    """The pipeline's ``on_batch`` hook: detectors per service, history, sinks, counts.

    Time is span time (a tool call's ``end_ns``), so a replay of old traces alerts as it
    would have live. Each service's clock is the newest span time it sent, carried forward
    by the wall clock between batches (so a spike resolves while a service is silent); a
    span time more than ``max_clock_skew_s`` ahead of the wall clock is clamped to it, so
    one far-future clock cannot push a service's window past all later data. Each tool call
    counts once, with its first verdict (an episode re-evaluated later is not recounted).
    """

    def __init__(self, settings: AlertSettings | None = None, sink: AlertSink | None = None,
                 *, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings or AlertSettings()
        self.sink: AlertSink = sink if sink is not None else LogSink()
        self.clock = clock
        self.detectors: dict[str, SpikeDetector] = {}
        self.firing = 0
        """Services with an alert firing now."""
        self._clocks: dict[str, tuple[float, float]] = {}  # service -> (its now, wall then)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._steps: Counter[tuple[str, bool]] = Counter()  # (service, no progress) -> calls
        self._firing_now: dict[str, bool] = {}  # service -> an alert of it fires now
        self._lock = threading.Lock()
        self._recovered = False
        self._stop = threading.Event()

    def __call__(self, pipeline: Pipeline, results: Sequence[EpisodeResult]) -> None:
        """Feed a committed batch's verdicts; runs on the pipeline thread after the commit."""
        cur = pipeline.cursor
        if not self._recovered:
            self._recovered = True
            self._resolve_leftovers(cur)
        wall = self.clock()
        newest: dict[str, float] = {}
        for result in results:
            for v in result.verdicts:
                if v.row.span_id in self._seen:
                    continue
                self._remember(v.row.span_id)
                t = min(v.row.end_ns / 1e9, wall + self.settings.max_clock_skew_s)
                service = v.row.service or "unknown_service"
                detector = self.detectors.get(service)
                if detector is None:
                    detector = self.detectors[service] = SpikeDetector(service, self.settings)
                detector.observe(t, no_progress=v.progress is None, episode_id=v.row.episode_id,
                                 streak=v.streak)
                newest[service] = max(newest.get(service, t), t)
                with self._lock:
                    self._steps[(service, v.progress is None)] += 1
        for service, detector in self.detectors.items():
            now = self._advance(service, newest.get(service), wall)
            if (alert := detector.evaluate(now)) is not None:
                self._record(cur, alert)

    def counts(self) -> list[tuple[str, str, int]]:
        """(service, state, alerts) rows for ``/metrics``; safe from any thread."""
        with self._lock:
            return sorted((svc, state, n) for (svc, state), n in self._counts.items())

    def firing_now(self) -> list[tuple[str, int]]:
        """(service, 1 while an alert of it fires, else 0) for every service that has
        alerted since start, for ``/metrics``; safe from any thread."""
        with self._lock:
            return sorted((svc, int(on)) for svc, on in self._firing_now.items())

    def steps(self) -> list[tuple[str, int, int]]:
        """(service, tool calls, no-progress tool calls) as the spike rules counted them
        (each call once, its first verdict), for ``/metrics``: what exported Prometheus rules
        judge (``prometheus_rules``). Safe from any thread."""
        with self._lock:
            services = sorted({svc for svc, _ in self._steps})
            return [(svc, self._steps[(svc, False)] + self._steps[(svc, True)],
                     self._steps[(svc, True)]) for svc in services]

    def sink_failures(self) -> int:
        """Alerts a sink failed to deliver (webhook errors and drops); safe from any thread."""
        sinks = getattr(self.sink, "sinks", (self.sink,))
        return sum(getattr(sink, "failures", 0) for sink in sinks)

    def start_ticker(self, pipeline: Pipeline) -> None:
        """While an alert fires, wake the pipeline every bucket so it can resolve in silence.

        The wake-up is an empty job: the pipeline runs an empty batch and calls this hook.
        """
        def tick() -> None:
            while not self._stop.wait(self.settings.bucket_s):
                if self.firing:
                    try:
                        pipeline.submit([])
                    except Exception:  # stopping, or overloaded: the next batch will do
                        continue

        threading.Thread(target=tick, daemon=True, name="loopscope-alert-tick").start()

    def close(self) -> None:
        """Stop the ticker and flush the sinks (webhook posts still queued)."""
        self._stop.set()
        close = getattr(self.sink, "close", None)
        if close is not None:
            close()

    def _advance(self, service: str, newest: float | None, wall: float) -> float:
        previous = self._clocks.get(service)
        now = newest if newest is not None else wall
        if previous is not None:
            carried = previous[0] + max(wall - previous[1], 0.0)
            now = carried if newest is None else max(carried, newest)
        self._clocks[service] = (now, wall)
        return now

    def _remember(self, span_id: str, limit: int = 200_000) -> None:
        self._seen[span_id] = None
        if len(self._seen) > limit:
            self._seen.popitem(last=False)

    def _record(self, cur: Cursor, alert: Alert) -> None:
        with self._lock:
            self._counts[(alert.service, alert.state)] += 1
            self._firing_now[alert.service] = alert.state == "firing"
        self.firing += 1 if alert.state == "firing" else -1
        try:
            if alert.state == "firing":
                insert_rows(cur, "alerts", [{
                    "alert_id": alert.id, "service": alert.service, "state": alert.state,
                    "fired_at": _timestamp(alert.fired_at), "resolved_at": None,
                    "rate": alert.rate, "baseline": alert.baseline, "volume": alert.volume,
                    "episodes_in_streak": alert.episodes_in_streak, "episodes": alert.episodes,
                    "message": alert.message,
                    **{name: getattr(self.settings, name) for name in RULE_COLUMNS},
                    "sent_to": json.dumps([*destinations(self.sink), PROMETHEUS]),
                }], ALERTS)
            else:
                cur.execute("update alerts set state = 'resolved', resolved_at = $resolved_at,"
                            " resolved_because = $because where alert_id = $alert_id",
                            {"alert_id": alert.id, "resolved_at": _timestamp(alert.resolved_at),
                             "because": alert.resolved_because})
        except Exception:
            logger.exception("could not store alert %s; it is still sent", alert.id)
        self.sink.send(alert)

    def _resolve_leftovers(self, cur: Cursor) -> None:
        """Alerts a previous run left firing have no detector any more: close them now."""
        try:
            cur.execute("update alerts set state = 'resolved', resolved_at = $now,"
                        " resolved_because = $because where state = 'firing'",
                        {"now": _timestamp(self.clock()), "because": RESTARTED})
        except Exception:
            logger.exception("could not resolve alerts left firing by a previous run")
