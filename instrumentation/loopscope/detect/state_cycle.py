"""Cycles by state: 2–4 calls whose outputs recur though no two calls are byte-equal.

``git status`` / ``git add`` / ``git commit -m <reworded>`` answering "nothing to commit"
each time; ``cat`` then ``tail`` of a file that does not change; a click that toggles the
same element back; two agents handing one subtask to each other. Every call differs (another
message, another line range, another agent), so no signature repeats and ``oscillation``
cannot see it; the *states* do: each step is its tool and what its output said
(``StepView.info``), and a sequence of states that repeats with a period of 2–4 is a cycle.
Counted like ``oscillation`` (``oscillation_cycles`` full cycles), but seen only once the
call has run, so its ladder is warn → warn → stop.
"""

from __future__ import annotations

from .base import AFTER_RUNGS, Finding
from .events import StepView
from .history import History
from .oscillation import windows
from .output_stagnation import reworded, values_of
from .policy import Policy


def _same_state(back: StepView, last: StepView) -> bool:
    return back.tool == last.tool and back.info == last.info


class StateCycle:
    """Fires after the call that completes ``cycles`` full cycles of (tool, information).

    A cycle whose calls are all byte-equal repeats is ``oscillation``'s; a step that made
    progress, a poll waiting in time, a timeout, or an edit or write that changes something
    else each round breaks a cycle; rounds that each name
    another thing (another store, checked for stock then for backorder) are a sweep, unless
    the arguments only change in words (a reworded commit message)."""

    name = "state_cycle"
    kinds = ("oscillation",)
    rungs = AFTER_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.max_period = policy.oscillation_max_period
        self.cycles = policy.oscillation_cycles

    def after(self, history: History, step: StepView) -> Finding | None:
        if step.status == "timeout" or not step.info:
            return None
        for period, seq in windows(history, step, self.max_period, self.cycles, _same_state):
            if self._cycle(history, seq, period):
                cycle = [s.tool for s in seq[-period:]]
                return Finding(
                    kind="oscillation",
                    message=(
                        f"You are going round in a cycle: {' → '.join(cycle)} has given the "
                        f"same results {self.cycles} times, though the arguments changed. "
                        "Nothing changes between rounds: stop repeating it, use what you "
                        "have, try something different, or finish."
                    ),
                    key="cycle:" + "|".join(sorted({s.tool for s in seq[-period:]})),
                    details={"period": period, "cycle": cycle},
                )
        return None

    @staticmethod
    def _cycle(history: History, seq: list[StepView], period: int) -> bool:
        head = seq[:period]
        if len({(s.tool, s.info) for s in head}) < 2:
            return False  # one repeated state is a repeat, not a cycle
        byte_equal = True
        for i, s in enumerate(seq):
            if s.status == "timeout" or s.progress == "waiting":
                return False
            if i >= period:  # the first round may have brought the states; the rest did not
                prev = seq[i - period]
                if s.tool != prev.tool or s.info != prev.info:
                    return False
                if s.progress not in (None, "new_action"):
                    return False  # (the step being checked has no progress marker yet)
                if s.kind in ("edit", "write") and s.signature != prev.signature:
                    return False  # another change each round: the check after it tests a
                    # new fix (edits that change nothing are repeat_same_error's and
                    # edit_revert's to judge)
                byte_equal = byte_equal and s.signature == prev.signature
        if byte_equal or not history.in_stretch(seq[period]):
            return False
        rounds = seq[period:]  # a sweep (another store each round) explores; a rewording does not
        return reworded(rounds) or not _new_each_round(seq, period)


def _new_each_round(seq: list[StepView], period: int) -> bool:
    """Whether every round of the cycle names something no earlier round did (another store
    checked for stock, then for backorder): a sweep of things, not a cycle."""
    seen: set[str] = set()
    for start in range(0, len(seq) - period + 1, period):
        names = set().union(*(values_of(s) for s in seq[start : start + period]))
        if start and names <= seen:
            return False
        seen |= names
    return True
