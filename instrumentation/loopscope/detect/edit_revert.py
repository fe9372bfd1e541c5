"""Edit and revert: an edit and its inverse applied in turn (A→B, B→A, A→B, …).

Each re-application looks like a new write of arguments seen before, so a duplicate-write rule
would block it at once; it is an oscillation instead, and it is a loop only when the cycle
repeats: ``write_oscillation_cycles`` full cycles (edit, revert) of one target. One revert
after a failed test is ordinary work.
"""

from __future__ import annotations

from collections import deque

from .base import BEFORE_RUNGS, Finding
from .events import StepView
from .history import History
from .policy import Policy

MAX_TARGETS = 64


class EditRevert:
    """Fires before the edit that completes ``write_oscillation_cycles`` full cycles of one
    target, whatever the tool's declared kind."""

    name = "edit_revert"
    rungs = BEFORE_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.need = 2 * policy.write_oscillation_cycles
        self._edits: dict[str, deque[tuple[str, str]]] = {}

    def before(self, history: History, candidate: StepView) -> Finding | None:
        edit = candidate.edit
        if edit is None:
            return None
        target, old, new = edit
        past = self._edits.get(f"{candidate.tool}\x00{target}")
        if not past:
            return None
        run, want = 1, (new, old)  # walking back, each edit must invert the one after it
        for done in reversed(past):
            if done != want:
                break
            run += 1
            want = (want[1], want[0])
        if run < self.need:
            return None
        return Finding(
            kind="oscillation",
            message=(
                f"{candidate.tool} on {target or 'the same text'} keeps undoing and redoing the "
                f"same change: {run // 2} full edit → revert cycles. Neither version is being "
                "kept; decide which one is right from the test output, or try a different fix."
            ),
            key=f"edit:{candidate.tool}:{target}",
            details={"tool": candidate.tool, "target": target, "edits": run},
            sticky=True,  # each edit is a change (progress), yet flipping back is the loop
        )

    def after(self, history: History, step: StepView) -> None:
        edit = step.edit
        if edit is None or step.status != "ok":  # a failed or skipped edit changed nothing
            return None
        target, old, new = edit
        key = f"{step.tool}\x00{target}"
        past = self._edits.get(key)
        if past is None:
            if len(self._edits) >= MAX_TARGETS:
                self._edits.pop(next(iter(self._edits)))
            past = self._edits[key] = deque(maxlen=self.need + 2)
        past.append((old, new))
        return None
