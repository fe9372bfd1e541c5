"""Consecutive repeat: the same call, returning the same output, N times in a row (seed 001)."""

from __future__ import annotations

from .base import Finding, repeat_correction
from .events import StepView
from .history import History
from .policy import Policy


class ExactRepeat:
    """Fires before the ``repeat_threshold``-th identical read in a row whose output is fixed.

    Writes and polls are left to their own rules; a call whose output has changed before is
    polling by shape and never counts.
    """

    name = "exact_repeat"

    def __init__(self, policy: Policy) -> None:
        self.threshold = policy.repeat_threshold

    def before(self, history: History, candidate: StepView) -> Finding | None:
        if candidate.kind in ("write", "poll") or not candidate.output_hash:
            return None
        for run, step in enumerate(reversed(history.steps), start=1):
            if step.signature != candidate.signature or step.output_hash != candidate.output_hash:
                break
            if step.status not in ("ok", "blocked"):
                return None
            if run + 1 >= self.threshold:
                return Finding(
                    kind="exact_repeat",
                    action="block",
                    message=repeat_correction(candidate, run + 1),
                    key=candidate.signature,
                    details={"tool": candidate.tool, "count": run + 1},
                )
        return None
