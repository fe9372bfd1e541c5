"""Edit and revert: an edit and its inverse applied in turn (A→B, B→A, A→B, …).

Each re-application looks like a new write of arguments seen before, so a duplicate-write rule
would block it at once; it is an oscillation instead, and it is a loop only when the cycle
repeats: ``write_oscillation_cycles`` full cycles (edit, revert) of one target. One revert
after a failed test is ordinary work.

The edits need not be inverse texts for the result to flip back: a check run again after each
round of changes (a test, a script) whose answers go A, B, A, B across the changes is the same
loop seen from the result (``_flips``), flagged after the check that completes the cycles.
"""

from __future__ import annotations

from collections import deque

from .base import AFTER_RUNGS, BEFORE_RUNGS, Finding, args_preview
from .events import StepView
from .history import History
from .limits import MAX_TARGETS
from .policy import Policy


class EditRevert:
    """Fires before the edit that completes ``write_oscillation_cycles`` full cycles of one
    target, whatever the tool's declared kind; and after a check whose answers across the
    changes flip between two for as many cycles."""

    name = "edit_revert"
    kinds = ("oscillation",)
    rungs = BEFORE_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.need = 2 * policy.write_oscillation_cycles
        self._edits: dict[str, deque[tuple[str, str]]] = {}
        self._answers: dict[str, tuple[int, ...]] = {}
        """For each call run again after changes (a test, a script): what it answered
        (``StepView.info``), an answer the same as the one before it counted once."""

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

    def after(self, history: History, step: StepView) -> Finding | None:
        edit = step.edit
        if edit is None:
            return self._flips(history, step)
        if step.status != "ok":  # a failed or skipped edit changed nothing
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

    def _flips(self, history: History, step: StepView) -> Finding | None:
        """After a call run again since a change (an edit, a write): whether its answers
        across the changes flip between two (A, B, A, B: ``write_oscillation_cycles`` full
        cycles), the edits each undoing what the last one did to the result, though no two
        edits are inverse texts. An answer that moved with nothing changed (a poll) starts
        the count again."""
        if step.kind == "write" or step.wait or step.status not in ("ok", "error"):
            return None
        if not step.info:
            return None
        stats = history.stats(step.signature)
        answers = self._answers.get(step.signature)
        if stats is None or answers is None or (
            stats.last_epoch == history.epoch and step.info != answers[-1]
        ):  # (first run, or it moved by itself)
            if len(self._answers) >= MAX_TARGETS and answers is None:
                self._answers.pop(next(iter(self._answers)))
            self._answers[step.signature] = (step.info,)
            return None
        if stats.last_epoch == history.epoch:
            return None  # asked again with nothing changed: the repeat rules' business
        if step.info != answers[-1]:
            answers = self._answers[step.signature] = (*answers[-self.need :], step.info)
        tail = answers[-self.need :]
        if len(tail) < self.need or len(set(tail)) != 2:
            return None
        return Finding(
            kind="oscillation",
            message=(
                f"{step.tool} {args_preview(step)} has answered the same two results in turn "
                f"after your last {self.need} rounds of changes: each change undoes what the "
                "one before did to the result. Stop changing back and forth: read both "
                "results, find what they have in common, or report what blocks you."
            ),
            key=f"flip:{step.signature}",
            details={"tool": step.tool, "rounds": self.need},
            rungs=AFTER_RUNGS,
            sticky=True,  # each change is progress, yet the result flipping back is the loop
            evidence=("output:equal",),
        )
