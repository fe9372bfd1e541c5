"""Budgets: model turns, tool calls, retries per tool, wall clock, tokens and cost.

Each is its own limit, checked before the next call or model turn would start, so a run never
begins work it cannot pay for (the limit is checked before execution).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .policy import Budgets


@dataclass(frozen=True, slots=True)
class Exhausted:
    """Which budget ran out, its limit and what was consumed."""

    budget_type: str
    limit: float
    consumed: float


_NO_LIMITS: Final = Budgets()


class BudgetMeter:
    """Counts consumption for one episode and answers "may the next one start?"."""

    def __init__(self, budgets: Budgets, start_t: float = 0.0) -> None:
        self.budgets = budgets
        self.limited = budgets != _NO_LIMITS
        """Whether any budget is set (without one, nothing is checked; all is still counted)."""
        self.start_t = start_t
        self.tool_calls = 0
        self.model_turns = 0
        self.tokens = 0
        self.cost = 0.0
        self.retries: dict[str, int] = {}
        self._failed_last: dict[str, bool] = {}

    def check_call(self, tool: str, t: float) -> Exhausted | None:
        """The first exhausted budget that forbids starting a call of ``tool`` at ``t``."""
        if not self.limited:
            return None
        b = self.budgets
        if b.tool_calls is not None and self.tool_calls >= b.tool_calls:
            return Exhausted("total_tool_calls", b.tool_calls, self.tool_calls)
        if (
            b.retries_per_tool is not None
            and self._failed_last.get(tool)
            and self.retries.get(tool, 0) >= b.retries_per_tool
        ):
            return Exhausted("retries_per_tool", b.retries_per_tool, self.retries.get(tool, 0))
        return self._check_shared(t)

    def check_model_turn(self, t: float) -> Exhausted | None:
        """The first exhausted budget that forbids starting another model turn."""
        if not self.limited:
            return None
        b = self.budgets
        if b.model_turns is not None and self.model_turns >= b.model_turns:
            return Exhausted("model_turns", b.model_turns, self.model_turns)
        return self._check_shared(t)

    def _check_shared(self, t: float) -> Exhausted | None:
        b = self.budgets
        elapsed = t - self.start_t
        if b.wall_clock_s is not None and elapsed >= b.wall_clock_s:
            return Exhausted("wall_clock_s", b.wall_clock_s, round(elapsed, 3))
        if b.tokens is not None and self.tokens >= b.tokens:
            return Exhausted("tokens", b.tokens, self.tokens)
        if b.cost_usd is not None and self.cost >= b.cost_usd:
            return Exhausted("cost_usd", b.cost_usd, round(self.cost, 6))
        return None

    def count_call(self, tool: str) -> None:
        """A call of ``tool`` started; a call right after a failure of the same tool is a retry."""
        self.tool_calls += 1
        if self._failed_last.get(tool):
            self.retries[tool] = self.retries.get(tool, 0) + 1

    def count_result(self, tool: str, status: str) -> None:
        """A call of ``tool`` ended with ``status``."""
        self._failed_last[tool] = status in ("error", "timeout")

    def count_usage(self, tokens: int, cost: float, *, model_turn: bool = False) -> None:
        """Add tokens and cost; ``model_turn`` counts one more model response."""
        self.tokens += max(tokens, 0)
        self.cost += max(cost, 0.0)
        if model_turn:
            self.model_turns += 1
