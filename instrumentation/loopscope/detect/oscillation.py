"""Oscillation: A→B→A→B→A→B. No consecutive-identical rule ever sees it (seed 002 §3.2)."""

from __future__ import annotations

from .base import BEFORE_RUNGS, Finding, args_preview
from .events import StepView
from .history import History
from .policy import Policy


class Oscillation:
    """Fires before the call that would complete ``cycles`` full cycles of period 2..k.

    The calls *and* their outputs must repeat with the period: a cycle that learns something
    new each time is not a loop. Cycles through writes or polls are left to their own rules.
    """

    name = "oscillation"
    rungs = BEFORE_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.max_period = policy.oscillation_max_period
        self.cycles = policy.oscillation_cycles

    def before(self, history: History, candidate: StepView) -> Finding | None:
        if candidate.kind in ("write", "poll"):
            return None
        steps = history.steps
        for period in range(2, self.max_period + 1):
            need = period * self.cycles - 1
            if len(steps) < need:
                break
            if steps[-period].signature != candidate.signature:
                continue  # the call one period back must be this call
            past = history.recent(need)
            seq = [*past, candidate]
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
