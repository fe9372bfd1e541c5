"""The no-progress circuit breaker and the budgets' stop: the stops that are not a loop shape.

``NoProgressBreaker`` counts consecutive tool calls that made no progress (the streak) and
trips at ``k`` of them; once a detector that may end the run has nudged the agent in a
no-progress stretch, ``Policy.ignored_calls`` more model turns without progress stop it
(the warnings were ignored). The monitor feeds it each completed call and asks it for a
finding; the ladders and the policy's actions stay the monitor's.
"""

from __future__ import annotations

from typing import Final

from .base import Finding, args_preview
from .budgets import Exhausted
from .events import Action, StepView
from .history import History
from .ladder import same_turn

BREAKERS: Final = ("no_progress", "budget")
"""Stops that are not a loop shape of their own: the no-progress circuit breaker and budgets."""
BUDGET_RUNGS: Final = ("stop",)
NEUTRAL_MARKERS: Final = ("waiting", "new_action")
"""Markers that neither end a no-progress stretch nor extend it: a poll waiting in time, and
a new request that brought nothing back (exploring, not learning yet). After a nudge, the
second counts among the calls that ignored it (``NoProgressBreaker.check``): it learned
nothing, so it shows no heed."""


class NoProgressBreaker:
    """The no-progress streak of one episode, and the nudges of its stretch left unheeded."""

    __slots__ = (
        "_history", "_ignored", "_ignored_calls", "_nudged", "_unseen", "k",
        "last_progress_step", "max_streak", "no_progress_steps", "rungs", "streak",
    )

    def __init__(
        self, history: History, k: int, ignored_calls: int, rungs: tuple[Action, ...]
    ) -> None:
        self._history = history
        self.k = k
        """Consecutive calls without progress that trip the breaker (``Policy.k_for``)."""
        self._ignored_calls = ignored_calls
        self.rungs = rungs
        """The breaker's ladder."""
        self.streak = 0
        self.max_streak = 0
        self.no_progress_steps = 0
        self.last_progress_step: int | None = None
        self._nudged: tuple[int, int, float] | None = None
        """(stretch start, tool calls issued when it was delivered, start of the last call
        counted since) of the first nudge of the current no-progress stretch."""
        self._ignored = 0
        """Model turns of tool calls without progress since that nudge (``ignored_calls``)."""
        self._unseen: int | None = None
        """The last call without progress that returned no output (``evidence``)."""

    def unseen(self, index: int) -> None:
        """The call at ``index`` made no progress and returned no output to compare."""
        self._unseen = index

    def count(self, step: StepView) -> None:
        """Count a completed call's progress into the streak."""
        if step.progress in NEUTRAL_MARKERS:
            return
        if step.progress is None:
            self.streak += 1
            self.no_progress_steps += 1
            self.max_streak = max(self.max_streak, self.streak)
        else:
            self.streak = 0
            self.last_progress_step = step.index
            self._history.stretch_start = step.index + 1

    def mark_progress(self, steps: int) -> None:
        """The agent says it made progress after ``steps`` steps: the streak starts again."""
        self.streak = 0
        self._history.stretch_start = steps
        self.last_progress_step = steps - 1 if steps else None

    def check(self, step: StepView, tool_calls: int) -> Finding | None:
        """The breaker's finding at a call without progress (or one that brought nothing
        back, ``new_action``), if any: the stop when the nudges were ignored, else, at a call
        without progress, the breaker's rung once the streak reaches ``k``. (The ignored
        count advances whether the breaker fires.)"""
        if self._ignored_nudge(step):
            return Finding(
                kind="no_progress",
                message=(
                    f"The warnings have changed nothing: {self._ignored} more tool calls made "
                    f"no progress after the first (the last was {step.tool} "
                    f"{args_preview(step)}). {self.hint(tool_calls)}"
                ),
                key="ignored",
                details={"limit": self._ignored_calls, "consumed": self._ignored},
                rungs=BUDGET_RUNGS,
                stop_reason="no_progress",
                evidence=self.evidence(),
            )
        if step.progress is None and self.streak >= self.k:
            return Finding(
                kind="no_progress",
                message=(
                    f"{self.streak} consecutive tool calls made no progress (limit {self.k}); "
                    f"the last was {step.tool} {args_preview(step)}. {self.hint(tool_calls)}"
                ),
                key="no_progress",
                details={"limit": self.k, "consumed": self.streak},
                rungs=self.rungs,
                stop_reason="no_progress",
                evidence=self.evidence(),
            )
        return None

    def _ignored_nudge(self, step: StepView) -> bool:
        """Whether ``step`` is the ``ignored_calls``-th call without progress since the first
        nudge of this no-progress stretch was delivered. Only calls issued after the nudge
        was delivered count (not the nudged call, not those run beside it), and calls issued
        in one model turn (starting a few milliseconds apart) count once: one decision."""
        nudge = self._nudged
        if nudge is None or nudge[0] != self._history.stretch_start or step.call <= nudge[1]:
            return False
        if same_turn(nudge[2], step.start):
            return False  # the same model turn as the last counted call
        self._nudged = (nudge[0], nudge[1], step.start)
        self._ignored += 1
        return self._ignored >= self._ignored_calls

    def unheeded(self, call: int) -> bool:
        """Whether the ``call``-th tool call was issued after a nudge of this stretch was
        delivered."""
        nudge = self._nudged
        return (nudge is not None and nudge[0] == self._history.stretch_start
                and call > nudge[1])

    def nudged(self, delivered: int) -> None:
        """A detector that may end the run nudged the agent, ``delivered`` tool calls in: the
        first nudge of a stretch must now be heeded."""
        stretch = self._history.stretch_start
        if self._nudged is None or self._nudged[0] != stretch:
            self._nudged, self._ignored = (stretch, delivered, -1.0), 0

    def evidence(self) -> tuple[str, ...]:
        """``progress:assumed`` when a call of the current no-progress stretch returned no
        output to compare (its progress was assumed, not measured), else ``measured``."""
        if self._unseen is not None and self._unseen >= self._history.stretch_start:
            return ("progress:assumed",)
        return ("progress:measured",)

    def hint(self, tool_calls: int) -> str:
        """Where the streak stands, for a message."""
        if tool_calls == 0:
            return "No tool call has run yet."
        if self.streak == 0:
            return "The last call made progress."
        return f"No progress in the last {self.streak} tool calls."


def budget_finding(exhausted: Exhausted, hint: str) -> Finding:
    """The stop of an exhausted budget."""
    return Finding(
        kind="budget",
        message=(
            f"Budget {exhausted.budget_type} exhausted: {exhausted.consumed} of "
            f"{exhausted.limit}. {hint}"
        ),
        key=exhausted.budget_type,
        details={
            "budget_type": exhausted.budget_type,
            "limit": exhausted.limit,
            "consumed": exhausted.consumed,
        },
        rungs=BUDGET_RUNGS,
        stop_reason="budget",
    )
