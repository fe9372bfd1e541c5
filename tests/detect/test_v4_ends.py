"""Detection v4 (issue 28): a caught loop ends — blocked or stopped within three steps of its
first flag — by mechanisms that hold for every detector, each beside what it must spare."""

from __future__ import annotations

from episode_steps import describe, run, tool

from loopscope.detect import Policy

ANSWER = "Order 5521 is packed and waiting for the courier at the depot."


def test_the_ignored_count_goes_on_once_the_breaker_fires() -> None:
    """A nudge two calls before the no-progress breaker's first rung: the breaker's own
    warning does not pause the count of calls that ignored the nudge, so the run stops three
    calls after it (not when the breaker's ladder reaches its top, two calls later), with
    one no_progress flag a call."""
    steps = [tool("get_order", {"id": 5521}, ANSWER, kind="read")]
    steps += [tool(f"lookup_{n}", {"id": 5521}, ANSWER, kind="read") for n in range(8)]
    report = run(steps, Policy(no_progress_k={"other": 4}))
    first = report.flags[0].step
    breaker = [(f.step, f.key, f.action) for f in report.flags if f.detector == "no_progress"]
    assert breaker[:2] == [(first + 2, "no_progress", "warn"), (first + 3, "ignored", "stop")], (
        describe(report))
