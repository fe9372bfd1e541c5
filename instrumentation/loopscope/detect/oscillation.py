"""Oscillation: A→B→A→B→A→B. No consecutive-identical rule ever sees it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .base import BEFORE_RUNGS, Finding, args_preview
from .events import StepView
from .history import History
from .policy import Policy


def windows(
    history: History, last: StepView, max_period: int, cycles: int,
    same: Callable[[StepView, StepView], bool],
) -> Iterator[tuple[int, list[StepView]]]:
    """For each period 2..``max_period`` whose ``cycles`` full cycles fit in the history and
    whose step one period back is ``same`` as ``last``: the period and the steps of those
    cycles, ``last`` at the end (what a periodic check reads)."""
    steps = history.steps
    for period in range(2, max_period + 1):
        need = period * cycles - 1
        if len(steps) < need:
            return
        if same(steps[-period], last):
            yield period, [*history.recent(need), last]


def _same_call(back: StepView, last: StepView) -> bool:
    return back.signature == last.signature


class Oscillation:
    """Fires before the call that would complete ``cycles`` full cycles of period 2..k.

    The calls *and* their outputs must repeat with the period: a cycle that learns something
    new each time is not a loop. Cycles through writes or polls are left to their own rules.
    """

    name = "oscillation"
    kinds = ("oscillation",)
    rungs = BEFORE_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.max_period = policy.oscillation_max_period
        self.cycles = policy.oscillation_cycles

    def before(self, history: History, candidate: StepView) -> Finding | None:
        if candidate.kind in ("write", "poll"):
            return None
        for period, seq in windows(history, candidate, self.max_period, self.cycles, _same_call):
            if self._periodic(seq, period):
                cycle = [s.tool for s in seq[-period:]]
                return Finding(
                    kind="oscillation",
                    message=(
                        f"You are cycling through {' → '.join(cycle)} with the same results: "
                        f"{self.cycles} full cycles so far (now {candidate.tool} "
                        f"{args_preview(candidate)} again). Nothing new is being learned; "
                        "use the results you have, try a different approach, or finish."
                    ),
                    key="|".join(sorted({s.signature for s in seq[-period:]})),
                    details={"period": period, "cycle": cycle},
                )
        return None

    @staticmethod
    def _periodic(seq: list[StepView], period: int) -> bool:
        if len({s.signature for s in seq[:period]}) < 2:
            return False  # one repeated call is a repeat, not an oscillation
        for i, step in enumerate(seq):
            if step.kind in ("write", "poll") or step.status == "timeout":
                return False
            if i >= period:
                prev = seq[i - period]
                if step.signature != prev.signature or step.info != prev.info:
                    return False
        return True
