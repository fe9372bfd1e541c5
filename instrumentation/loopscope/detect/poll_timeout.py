"""Polling past its deadline: legitimate waiting becomes a loop once it cannot pay off.

A poll whose output changes is making progress, however long it runs (a price watch). An
unchanged poll waits legitimately until its deadline: the call's declared ``deadline_s``, else
the one the task's text states ("usually takes 10–15 minutes", "give up after 20 minutes"),
else the task type's default. The monitor puts that deadline on the candidate.
"""

from __future__ import annotations

from .base import BEFORE_RUNGS, Finding, args_preview
from .events import StepView
from .history import History
from .policy import Policy


class PollTimeout:
    """Before a poll whose last answer repeated the one before: fires when the first poll of
    this call was more than its deadline ago, or after ``poll_max_unchanged`` unchanged
    answers in a row."""

    name = "poll_timeout"
    rungs = BEFORE_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.max_unchanged = policy.poll_max_unchanged

    def before(self, history: History, candidate: StepView) -> Finding | None:
        if candidate.kind != "poll":
            return None
        stats = history.stats(candidate.signature)
        if stats is None or stats.same_output_run < 1 or stats.last_status == "timeout":
            return None
        deadline = candidate.deadline_s or history.default_deadline_s
        waited = candidate.t - stats.waiting_since(candidate.deadline_stated)
        if waited > deadline:
            why = f"has been polled for {waited:.0f} s, past its {deadline:.0f} s deadline"
        elif stats.same_output_run + 1 >= self.max_unchanged:
            why = f"returned the same state {stats.same_output_run + 1} times in a row"
        else:
            return None
        return Finding(
            kind="poll_timeout",
            message=(
                f"{candidate.tool} {args_preview(candidate)} {why}, and the state has not "
                "changed. Stop polling: report the operation as not finished, or cancel it."
            ),
            key=candidate.signature,
            details={"tool": candidate.tool, "waited_s": round(waited, 3), "deadline_s": deadline},
            stop_reason="timeout",
        )
