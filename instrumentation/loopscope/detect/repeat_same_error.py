"""Repeated identical error: retrying what failed, unchanged, teaches the model nothing."""

from __future__ import annotations

from .base import Finding, args_preview, repeat_correction
from .events import StepView
from .history import History
from .policy import Policy


class RepeatSameError:
    """Two rules, both counting to ``error_threshold``.

    Before a call: the same call has failed with the same error its last times, however
    far apart (other calls in between change nothing); it will fail again, so the call is
    blocked (reads and writes alike; a timeout is not an error). After a call: one
    tool keeps returning the same error for different arguments (a vague or fixed error
    the arguments cannot cure); that is a warning.
    """

    name = "repeat_same_error"

    def __init__(self, policy: Policy) -> None:
        self.window = policy.window
        self.threshold = policy.error_threshold

    def before(self, history: History, candidate: StepView) -> Finding | None:
        if candidate.kind == "poll":
            return None
        stats = history.stats(candidate.signature)
        if stats is None or stats.last_status != "error":
            return None
        count = stats.same_output_run + 2  # earlier identical failures, plus this call
        if count < self.threshold:
            return None
        return Finding(
            kind="repeat_same_error",
            action="block",
            message=repeat_correction(candidate, count, error=True),
            key=candidate.signature,
            details={"tool": candidate.tool, "count": count},
        )

    def after(self, history: History, step: StepView) -> Finding | None:
        if step.status != "error":
            return None
        same = [
            s
            for s in history.recent(self.window - 1)
            if s.tool == step.tool and s.status == "error" and s.output_hash == step.output_hash
        ]
        if len(same) + 1 < self.threshold or all(s.signature == step.signature for s in same):
            return None
        return Finding(
            kind="repeat_same_error",
            action="warn",
            message=(
                f"{step.tool} has returned the same error {len(same) + 1} times for different "
                f"arguments (last: {args_preview(step)}). Changing the arguments this way does "
                "not help: read the error, try another approach, or report the failure."
            ),
            key=f"{step.tool}:{step.output_hash}",
            details={"tool": step.tool, "count": len(same) + 1},
        )
