"""The escalation ladder: signal → warn → block → stop, one rung per ignored nudge.

Every detector's finding names a condition (the detector and its key, e.g. the repeated
signature). The first time a condition is seen it gets the first rung of its ladder; each
later sighting climbs one rung, but only if no progress was made since the previous rung was
delivered — progress (new information, a state change, a new user turn) puts the condition
back at the bottom. So the guard nudges first and stops only when the nudge is ignored
(docs/detection.md). While a condition holds, a flag is raised at each rung, and again every
``window`` steps at the top one, so an ongoing loop is never silent.
"""

from __future__ import annotations

from dataclasses import dataclass

from .limits import PARALLEL_S, SAME_TIME_S


def same_turn(earlier: float | None, later: float | None) -> bool:
    """Whether a call started at ``later`` was issued in the model turn of one started at
    ``earlier`` (``PARALLEL_S``)."""
    return (earlier is not None and later is not None
            and SAME_TIME_S < later - earlier <= PARALLEL_S)


def repeated_rungs(rungs: tuple[str, ...]) -> frozenset[int]:
    """The rungs of a ladder that only say again what the rung below said (the second
    ``warn`` of ``warn, warn, stop``)."""
    return frozenset(i for i in range(1, len(rungs)) if rungs[i] == rungs[i - 1])


@dataclass(slots=True)
class _Climb:
    rung: int
    step: int
    """Where the current rung was delivered."""
    flagged: int
    """When (in tool calls) the condition was last reported as a new flag."""
    delivered: int = 0
    """Tool calls issued when the current rung was delivered: calls issued by then (in the
    same model turn, in parallel) could not have read it."""


class Ladder:
    """Rung state of every condition of one episode."""

    __slots__ = ("_climbs", "window")

    def __init__(self, window: int) -> None:
        self.window = window
        self._climbs: dict[tuple[str, str], _Climb] = {}

    def climb(
        self, condition: tuple[str, str], step: int, rungs: int, progress_after: int,
        calls: int, *, issued: int | None = None, start: int = 0, read_after: int = -1,
        again: frozenset[int] = frozenset(),
    ) -> tuple[int, bool]:
        """Sight ``condition`` at ``step``; returns (its rung, whether to report a new flag).

        ``progress_after``: the first step of the current no-progress stretch. A rung delivered
        at an earlier step was followed by progress (at that step or later), so the condition
        starts again at the bottom. ``calls``: tool calls so far, the clock of the repeated
        report at the top rung (messages between calls do not move it, so every door that
        feeds the same calls reports the same flags). ``issued``: the sighting call's ordinal
        among the tool calls; a call issued before the current rung was delivered (a call of
        the same model turn, run in parallel) could not have read it, and does not climb (a
        replay feeds the calls of one model turn as the guard saw them: ``steps.feed_run``).
        ``start``: the rung a condition seen for the first time (or again after progress)
        starts at (one up when a nudge already went unheeded in this stretch), never its top.
        ``read_after``: the step of the agent's last message; ``again``: the rungs that only
        repeat the rung below them (a second warning). A rung delivered before that message
        was read (the model wrote after it), so a sighting after it skips a repeated rung:
        the warning changed nothing, and saying it twice would not either.
        """
        climb = self._climbs.get(condition)
        if climb is None or progress_after > climb.step:
            rung = min(start, max(rungs - 2, 0))
            self._climbs[condition] = _Climb(rung, step, calls, calls)
            return rung, True
        if step > climb.step and (issued is None or issued > climb.delivered):
            top = rungs - 1
            if climb.rung < top:
                climb.rung += 1
                if climb.rung in again and climb.rung < top and read_after > climb.step:
                    climb.rung += 1
                climb.step, climb.flagged, climb.delivered = step, calls, calls
                return climb.rung, True
            climb.step = step
        if calls - climb.flagged > self.window:
            climb.flagged = calls
            return climb.rung, True
        return climb.rung, False

    def reset(self) -> None:
        """A new user turn: every condition starts again."""
        self._climbs.clear()
