"""Read spin: the same call, with the same output, again inside one no-progress stretch.

"The same output" is the same information (``StepView.info``): a result that comes back in
another order or with another request id is not a change.

The consecutive rule and the "3 of the last 6" rule are one rule here: identical
calls (same signature, same information) are counted inside the current no-progress stretch,
however far apart (a batch of queries replayed in another order), plus the one earlier call
of the same user turn that first brought the result (``SignatureStats.repeats``). A
housekeeping call repeated between steps that each bring new information never adds up; a
read repeated while nothing else is learned does.
"""

from __future__ import annotations

from .base import BEFORE_RUNGS, Finding, repeat_correction
from .events import StepView
from .history import History
from .policy import Policy


class ExactRepeat:
    """Fires before the ``repeat_threshold``-th identical read of a stretch, predicting that it
    returns what it returned last time. Writes, polls and failures have their own rules; a
    call whose output has changed in the stretch is not repeating, and no more identical calls
    than the turn asks for ("run it 5 times") are a spin."""

    name = "exact_repeat"
    kinds = ("exact_repeat",)
    rungs = BEFORE_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.threshold = policy.repeat_threshold
        self.window = policy.window

    def before(self, history: History, candidate: StepView) -> Finding | None:
        if candidate.kind in ("write", "poll") or not candidate.output_hash:
            return None
        stats = history.stats(candidate.signature)
        if (
            stats is None
            or stats.last_status not in ("ok", "blocked")
            or stats.repeats_from != history.stretch_start
        ):
            return None  # never answered, failed last time, or progress was made since
        count = stats.repeats + 1
        if count < self.threshold or count <= history.intended_repeats():
            return None  # (fewer than the turn asks for: "run it 5 times to see if it's flaky")
        return Finding(
            kind="exact_repeat",
            message=repeat_correction(candidate, count),
            key=candidate.signature,
            details={"tool": candidate.tool, "count": count, "window": self.window},
        )
