"""The detector contract: small classes with optional hooks, and a default ladder.

``before(history, candidate)`` runs before a call executes; ``candidate.output_hash`` is the
output this call returned last time (empty if never), so a detector can predict a repeat and
the guard can block it without running the tool. It must not change any state.
``after(history, step)`` runs when the call has returned, before ``step`` joins the history;
it may note progress evidence in ``step.markers``. ``message(history, role, content)`` sees
user and assistant messages; ``new_turn()`` is told when a user turn starts a new intent.
Each hook returns a ``Finding`` or ``None``. The monitor knows no detector by name: it calls
whichever hooks a detector has and puts every finding on the detector's ladder (``rungs``):
the first sign gets the first rung, and each time the condition persists with no progress
after a rung was delivered, the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from .events import Action, StepView
from .history import History
from .policy import Policy


@dataclass(frozen=True, slots=True)
class Finding:
    """A detector's raw verdict; ``action`` is its default, which the policy may override."""

    kind: str
    message: str
    key: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    rungs: tuple[Action, ...] | None = None
    """This finding's own ladder, when it is not the detector's: ``("block", "stop")`` for a
    retry of an UNKNOWN write, which is acted on at once."""
    stop_reason: str = "repeated_tool_call"
    """Why the run ends if this finding reaches a stop (one of ``STOP_REASONS``)."""
    sticky: bool = False
    """Progress does not put this condition back at the bottom (only a new user turn does):
    a duplicate write that creates a new record each time is progress and still a loop."""
    evidence: tuple[str, ...] = ()
    """What the verdict rests on beyond the call's kind (``evidence``: ``output:similar``,
    ``count:none`` ...); the monitor adds the kind's. Its source bounds how high it climbs."""


BEFORE_RUNGS: Final[tuple[Action, ...]] = ("warn", "block", "stop")
"""A condition seen before the call: nudge, then skip the call, then stop."""
AFTER_RUNGS: Final[tuple[Action, ...]] = ("warn", "warn", "stop")
"""A condition seen only once the call has run cannot skip it: nudge twice, then stop."""
MESSAGE_RUNGS: Final[tuple[Action, ...]] = ("warn", "stop")
"""A condition of messages: a message cannot be skipped, and a stop decided on one takes
effect at the next model turn or tool call, where a block would: nudge, then stop."""
WARN_RUNGS: Final[tuple[Action, ...]] = ("warn",)
"""A signal that is never reason enough to stop by itself."""


class Detector(Protocol):
    """One loop shape. Instances live for one episode and may keep per-episode state.

    Optional hooks (the monitor calls those a detector has): ``before``, ``after``,
    ``message`` and ``new_turn``, as the module docstring describes.
    """

    name: str
    kinds: tuple[str, ...]
    """The ``Flag.kind`` its findings name (``registry.LOOP_KINDS`` gathers them)."""
    rungs: tuple[Action, ...]

    def __init__(self, policy: Policy) -> None: ...


class BeforeDetector(Detector, Protocol):
    def before(self, history: History, candidate: StepView) -> Finding | None: ...


class AfterDetector(Detector, Protocol):
    def after(self, history: History, step: StepView) -> Finding | None: ...


class MessageDetector(Detector, Protocol):
    def message(self, history: History, role: str, content: str) -> Finding | None: ...


class TurnAware(Detector, Protocol):
    def new_turn(self) -> None: ...


def args_preview(step: StepView, limit: int = 200) -> str:
    """The call's canonical arguments, cut to ``limit`` characters for a message."""
    text = step.args_text or "(arguments not captured)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def repeat_correction(
    step: StepView, count: int, *, error: bool = False, nothing: bool = False
) -> str:
    """The nudge for a repeated call: names the tool, the count and the arguments."""
    what = "nothing found" if nothing else "the same error" if error else "the same result"
    return (
        f"You have called {step.tool} {count} times with identical arguments "
        f"{args_preview(step)} and got {what} each time. The result has not changed. "
        "Do not call it again with the same arguments: use the existing result, change the "
        "arguments or the tool, or finish the task."
    )
