"""The collector's no-progress spike rule as Prometheus alerting rules over its ``/metrics``.

``loopscope export --prometheus-rules FILE`` writes them, for teams whose alerts live in
Prometheus and Alertmanager. They judge the counters the spike rule itself counts,
``loopscope_service_tool_calls_total`` and ``loopscope_service_no_progress_calls_total``
(by service; each tool call once, with its first verdict), with the same settings:

- the rate over the window is the no-progress calls over the calls of the last ``window_s``;
- it fires at ``threshold`` whatever the baseline, or at ``factor`` times the baseline and at
  least ``floor``, with at least ``min_volume`` calls in the window (and, for the factor
  test, in the baseline);
- the baseline is the rate over the ``baseline_s`` before the window.

What Prometheus cannot say the same way: the collector counts a call at its span's time and
Prometheus at the scrape after it was stored; the collector's baseline is an exponentially
weighted average that leaves out the time it was firing, Prometheus's a plain rate over the
preceding ``baseline_s``; the collector resolves only when the rate falls below
``hysteresis`` of its firing level, Prometheus as soon as the expression is false, after
``keep_firing_for`` (one bucket). The cooldown between firings is Alertmanager's
``repeat_interval`` / ``group_interval`` there, not the rule's.
"""

from __future__ import annotations

import json
from typing import Final

from .settings import AlertSettings

ALERT_NAME: Final = "LoopscopeNoProgressSpike"
GROUP_NAME: Final = "loopscope-no-progress"
CALLS: Final = "loopscope_service_tool_calls_total"
NO_PROGRESS: Final = "loopscope_service_no_progress_calls_total"
RATE: Final = "loopscope:service_no_progress_rate:window"
VOLUME: Final = "loopscope:service_tool_calls:window"
BASELINE_RATE: Final = "loopscope:service_no_progress_rate:baseline"
BASELINE_VOLUME: Final = "loopscope:service_tool_calls:baseline"


def duration(seconds: float) -> str:
    """A Prometheus duration for ``seconds`` (milliseconds when it is not whole)."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def rules_yaml(settings: AlertSettings, *, selector: str = "") -> str:
    """The rule file (YAML) for ``settings``; ``selector`` narrows the series (for example
    ``job="loopscope"``) when several collectors' metrics share one Prometheus."""
    s = settings
    window, base = duration(s.window_s), duration(s.baseline_s)
    match = "{" + selector + "}" if selector else ""

    def increase(metric: str, span: str, offset: str = "") -> str:
        shift = f" offset {offset}" if offset else ""
        return f"sum by (service) (increase({metric}{match}[{span}]{shift}))"

    def rate(span: str, offset: str = "") -> str:
        return (f"{increase(NO_PROGRESS, span, offset)} / "
                f"({increase(CALLS, span, offset)} > 0)")

    spike = (f"({RATE} >= {s.threshold:g} and {VOLUME} >= {s.min_volume})\n"
             f"or ({RATE} >= {s.floor:g} and {RATE} >= {s.factor:g} * {BASELINE_RATE}\n"
             f"    and {VOLUME} >= {s.min_volume} and {BASELINE_VOLUME} >= {s.min_volume})")
    summary = "{{ $labels.service }}: {{ $value | humanizePercentage }} of tool calls made " \
              "no progress"
    description = (
        f"The no-progress rate of the service's tool calls over the last {window} reached "
        f"{s.threshold:g}, or {s.factor:g} times its rate over the {base} before (and at "
        f"least {s.floor:g}), with at least {s.min_volume} calls: agents of this service "
        "are stuck in loops. The loopscope dashboard's Alerts page shows the runs.")
    lines = [
        "# loopscope's no-progress spike alert, as `loopscope export --prometheus-rules` "
        "wrote it.",
        f"# Settings: window {window}, baseline {base}, threshold {s.threshold:g}, factor "
        f"{s.factor:g}, floor {s.floor:g}, min volume {s.min_volume}.",
        "# Scrape the collector's /metrics (the HTTP port, 4318 by default).",
        "groups:",
        f"  - name: {GROUP_NAME}",
        f"    interval: {duration(s.bucket_s)}",
        "    rules:",
        f"      - record: {VOLUME}",
        f"        expr: {_quote(increase(CALLS, window))}",
        f"      - record: {RATE}",
        f"        expr: {_quote(rate(window))}",
        f"      - record: {BASELINE_VOLUME}",
        f"        expr: {_quote(increase(CALLS, base, window))}",
        f"      - record: {BASELINE_RATE}",
        f"        expr: {_quote(rate(base, window))}",
        f"      - alert: {ALERT_NAME}",
        "        expr: |",
        *(f"          {line}" for line in spike.splitlines()),
        f"        keep_firing_for: {duration(s.bucket_s)}",
        "        labels:",
        "          severity: warning",
        "          source: loopscope",
        "        annotations:",
        f"          summary: {_quote(summary)}",
        f"          description: {_quote(description)}",
    ]
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is a subset of it)."""
    return json.dumps(text, ensure_ascii=False)
