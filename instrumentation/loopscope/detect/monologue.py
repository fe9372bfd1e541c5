"""Monologue: the model keeps talking (plans, promises) without calling a tool (seed 003)."""

from __future__ import annotations

from .base import Finding
from .policy import Policy


class Monologue:
    """Counts assistant turns in a row with no tool call and no user message between them;
    the ``monologue_threshold``-th fires once, as a warning."""

    name = "monologue"

    def __init__(self, policy: Policy) -> None:
        self.threshold = policy.monologue_threshold
        self._run = 0

    def on_tool_call(self) -> None:
        """A tool call ends the monologue."""
        self._run = 0

    def on_message(self, role: str) -> Finding | None:
        """Count an assistant turn; a user turn resets the count."""
        if role != "assistant":
            self._run = 0
            return None
        self._run += 1
        if self._run != self.threshold:
            return None
        return Finding(
            kind="monologue",
            action="warn",
            message=(
                f"You have answered {self._run} times in a row without calling a tool. If the "
                "task needs data or an action, call the tool now; otherwise give the final answer."
            ),
            key="monologue",
            details={"turns": self._run},
        )
