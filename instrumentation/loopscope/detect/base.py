"""The detector contract: small classes with optional ``before`` and ``after`` hooks.

``before(history, candidate)`` runs before a call executes; ``candidate.output_hash`` is the
output this call returned last time (empty if never), so a detector can predict a repeat and
the guard can block it without running the tool. It must not change any state.
``after(history, step)`` runs when the call has returned, before ``step`` joins the history.
Each returns a ``Finding`` or ``None``; the monitor turns findings into flags and decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .events import StepView
from .history import History
from .policy import Policy


@dataclass(frozen=True, slots=True)
class Finding:
    """A detector's raw verdict; ``action`` is its default, which the policy may override."""

    kind: str
    action: str
    message: str
    key: str = ""
    details: dict[str, Any] = field(default_factory=dict)


class Detector(Protocol):
    """One loop shape. Instances live for one episode and may keep per-episode state."""

    name: str

    def __init__(self, policy: Policy) -> None: ...


class BeforeDetector(Detector, Protocol):
    def before(self, history: History, candidate: StepView) -> Finding | None: ...


class AfterDetector(Detector, Protocol):
    def after(self, history: History, step: StepView) -> Finding | None: ...


def args_preview(step: StepView, limit: int = 200) -> str:
    """The call's canonical arguments, cut to ``limit`` characters for a message."""
    text = step.args_text or "(arguments not captured)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def repeat_correction(step: StepView, count: int, *, error: bool = False) -> str:
    """The nudge for a repeated call: names the tool, the count and the arguments."""
    what = "the same error" if error else "the same result"
    return (
        f"You have called {step.tool} {count} times with identical arguments "
        f"{args_preview(step)} and got {what} each time. The result has not changed. "
        "Do not call it again with the same arguments: use the existing result, change the "
        "arguments or the tool, or finish the task."
    )
