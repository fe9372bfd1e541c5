"""The spike rule's settings, every knob with its one default: the collector's flags
(``loopscope collector --alert-*``), its exported Prometheus rules and the dashboard read them
here. Standard library only, so ``loopscope --help`` builds the flags without the collector's
dependencies."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AlertSettings:
    """Every knob of the spike detector; times in seconds, rates as fractions of steps."""

    window_s: float = 60.0
    """The rolling window the rate is computed over (rounded up to whole buckets)."""
    bucket_s: float = 5.0
    """Resolution of the window, and how long a rate must stay low before an alert resolves."""
    baseline_s: float = 900.0
    """Time constant of the exponentially weighted baseline (buckets that left the window,
    excluding those seen while firing)."""
    factor: float = 3.0
    """Fire when the rate is at least ``baseline * factor`` (and at least ``floor``)."""
    floor: float = 0.2
    """The lowest rate that can fire by factor: a quiet baseline times 3 is still quiet."""
    threshold: float = 0.5
    """Fire when the rate is at least this, whatever the baseline."""
    min_volume: int = 20
    """Steps needed in the window (and in the baseline, for the factor test) to judge a rate."""
    cooldown_s: float = 300.0
    """Least time from one firing of a service to its next."""
    hysteresis: float = 0.8
    """Resolve when the rate (or the volume) falls below this fraction of its firing level."""
    streak: int = 3
    """An episode is "in a no-progress streak" once its streak reaches this."""
    max_clock_skew_s: float = 5.0
    """Span times further ahead of the collector's wall clock are clamped to it."""

    def __post_init__(self) -> None:
        checks = [
            ("window_s", self.window_s > 0, "a positive number of seconds"),
            ("bucket_s", self.bucket_s > 0, "a positive number of seconds"),
            ("window_s", self.window_s >= self.bucket_s, f"at least bucket_s ({self.bucket_s})"),
            ("baseline_s", self.baseline_s > 0, "a positive number of seconds"),
            ("factor", self.factor > 0, "positive"),
            ("floor", 0 <= self.floor <= 1, "between 0 and 1"),
            ("threshold", 0 < self.threshold <= 1, "above 0 and at most 1"),
            ("min_volume", self.min_volume >= 1, "at least 1"),
            ("cooldown_s", self.cooldown_s >= 0, "zero or more seconds"),
            ("hysteresis", 0 < self.hysteresis <= 1, "above 0 and at most 1"),
            ("streak", self.streak >= 1, "at least 1"),
            ("max_clock_skew_s", self.max_clock_skew_s >= 0, "zero or more seconds"),
        ]
        for name, ok, must in checks:
            if not ok:
                raise ValueError(f"alert setting {name} must be {must}, not "
                                 f"{getattr(self, name)!r}")
