"""Observe and warn mode say a would-be stop once per run in the agent's own log."""

from __future__ import annotations

import logging

import pytest

from loopscope.offline.demo import drive
from loopscope.offline.scenarios import generate
from loopscope.testing import capture_spans


@pytest.mark.parametrize("mode", ["observe", "warn"])
def test_a_would_be_stop_is_one_log_line_per_run(mode: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    [spin] = generate(seed=0, per_shape=1, shapes=("read_spin",), faults=False)
    with capture_spans(service_name="t") as captured, caplog.at_level(logging.WARNING,
                                                                       "loopscope"):
        run = drive(spin, mode=mode)
    lines = [r.getMessage() for r in caplog.records if "enforce would stop" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].startswith(f"loopscope: {mode} mode: enforce would stop run {run.episode_id}")
    assert run.stop_reason == "completed"  # the run itself went on
    # the number is the tool-call ordinal the dashboard and analyze show, not a step index
    tools = captured.tool_spans()
    decisions = [s["attributes"].get("loopscope.guard.decision") for s in tools]
    would_stop_at = decisions.index("stop") + 1
    assert f" at call {would_stop_at} (" in lines[0]
    # ... and the number that call's span carries (loopscope.call.ordinal), which the
    # Episode page shows even when spans before it were lost
    assert tools[would_stop_at - 1]["attributes"]["loopscope.call.ordinal"] == would_stop_at


def test_enforce_mode_logs_no_would_be_stop(caplog: pytest.LogCaptureFixture) -> None:
    [spin] = generate(seed=0, per_shape=1, shapes=("read_spin",), faults=False)
    with capture_spans(service_name="t"), caplog.at_level(logging.WARNING, "loopscope"):
        drive(spin, mode="enforce")
    assert not [r for r in caplog.records if "enforce would stop" in r.getMessage()]
