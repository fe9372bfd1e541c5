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
from .limits import COUNT_ADVANCES
from .policy import Policy


class PollTimeout:
    """Before a poll whose last answer repeated the one before: fires when that answer is a
    state waiting will not change (a terminal failure twice in a row, with no write or edit
    since the last answer; a progress figure that did not move while the status says
    running, or a count that moved one way ``COUNT_ADVANCES`` times and stopped), when it has
    waited past its deadline, or after ``poll_max_unchanged`` unchanged answers in a row."""

    name = "poll_timeout"
    kinds = ("poll_timeout", "output_stagnation")
    rungs = BEFORE_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.max_unchanged = policy.poll_max_unchanged
        self.pace = policy.poll_pace_s

    def before(self, history: History, candidate: StepView) -> Finding | None:
        if candidate.kind != "poll":
            return None
        stats = history.stats(candidate.signature)
        if stats is None or stats.last_status == "timeout":
            return None
        terminal = (
            stats.same_state_run >= 1
            and stats.last_epoch == history.epoch  # (a write or an edit since may fix it)
            and (
                stats.stuck == "container"  # (its restart count may move)
                or (stats.stuck == "terminal" and stats.same_output_run >= 1)
            )
        )
        counting = stats.advances >= COUNT_ADVANCES and stats.same_output_run >= 1
        stalled = (stats.stuck == "stalled" and stats.same_state_run >= 1) or counting
        moved_t = stats.shape_t if stats.stuck == "stalled" else stats.changed_t
        if stats.same_output_run < 1 and not terminal and not stalled:
            return None
        deadline = candidate.deadline_s or history.default_deadline_s
        waited = history.waited(stats, candidate.deadline_stated, candidate.t)
        kind = "poll_timeout"
        if terminal:
            why = "has answered the same failed state twice in a row (waiting will not fix it)"
        elif (
            stalled
            and not candidate.deadline_stated
            and (moved_t > stats.first_t or deadline == history.default_deadline_s)
            and candidate.t - moved_t >= max(self.pace, history.default_deadline_s / 2)
        ):  # (a figure that moved and stopped has stalled, whatever the task estimated for
            # the whole: "about two hours"; one that has not moved yet is waiting, and an
            # estimate the task states gives it its time: "within 5 minutes")
            kind = "output_stagnation"
            why = "still says it is running, but its progress has not moved since the last poll"
        elif waited > deadline:
            why = f"has been polled for {waited:.0f} s, past its {deadline:.0f} s deadline"
        elif stats.same_output_run + 1 >= self.max_unchanged:
            why = f"returned the same state {stats.same_output_run + 1} times in a row"
        else:
            return None
        return Finding(
            kind=kind,
            message=(
                f"{candidate.tool} {args_preview(candidate)} {why}, and the state has not "
                "changed. Stop polling: report the operation as not finished, or cancel it."
            ),
            key=candidate.signature,
            details={"tool": candidate.tool, "waited_s": round(waited, 3), "deadline_s": deadline},
            stop_reason="timeout",
            evidence=(
                "state:failed" if terminal
                else "deadline:stated" if candidate.deadline_stated
                or deadline != history.default_deadline_s else "deadline:default",
            ),
        )
