"""Window repeat: the same call with the same output 3 times within the last 6 (seed 003)."""

from __future__ import annotations

from .base import Finding, repeat_correction
from .events import StepView
from .history import History
from .policy import Policy


class WindowRepeat:
    """Catches repeats with other calls in between, which a consecutive counter misses.

    Like ``ExactRepeat`` it predicts before the call and leaves writes and polls alone.
    """

    name = "window_repeat"

    def __init__(self, policy: Policy) -> None:
        self.window = policy.window
        self.threshold = policy.window_threshold

    def before(self, history: History, candidate: StepView) -> Finding | None:
        if candidate.kind in ("write", "poll") or not candidate.output_hash:
            return None
        count = 1
        for step in history.recent(self.window - 1):
            if step.signature == candidate.signature:
                if step.output_hash != candidate.output_hash or step.status == "error":
                    return None
                count += 1
        if count < self.threshold:
            return None
        return Finding(
            kind="exact_repeat",
            action="block",
            message=repeat_correction(candidate, count),
            key=candidate.signature,
            details={"tool": candidate.tool, "count": count, "window": self.window},
        )
