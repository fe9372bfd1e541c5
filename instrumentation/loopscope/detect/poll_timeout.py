"""Polling past its deadline: legitimate polling becomes a loop once waiting cannot pay off."""

from __future__ import annotations

from .base import Finding, args_preview
from .events import StepView
from .history import History
from .policy import Policy


class PollTimeout:
    """Before a poll: stop when the first poll of this call was more than the deadline ago
    (the call's ``deadline_s``, else ``poll_deadline_s``), or when it has returned the same
    state ``poll_max_unchanged`` times in a row. Until then a poll is never flagged."""

    name = "poll_timeout"

    def __init__(self, policy: Policy) -> None:
        self.deadline_s = policy.poll_deadline_s
        self.max_unchanged = policy.poll_max_unchanged

    def before(self, history: History, candidate: StepView) -> Finding | None:
        if candidate.kind != "poll":
            return None
        stats = history.stats(candidate.signature)
        if stats is None:
            return None
        deadline = candidate.deadline_s or self.deadline_s
        waited = candidate.t - stats.first_t
        if waited > deadline:
            why = f"has been polled for {waited:.0f} s, past its {deadline:.0f} s deadline"
        elif stats.same_output_run + 1 >= self.max_unchanged:
            why = f"returned the same state {stats.same_output_run + 1} times in a row"
        else:
            return None
        return Finding(
            kind="poll_timeout",
            action="stop",
            message=(
                f"{candidate.tool} {args_preview(candidate)} {why}. Stop polling: report the "
                "operation as not finished, or cancel it."
            ),
            key=candidate.signature,
            details={"tool": candidate.tool, "waited_s": round(waited, 3), "deadline_s": deadline},
        )
