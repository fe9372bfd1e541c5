"""How a monitor's findings become its decision: each climbs its ladder, the policy acts.

A finding names a condition (its detector and key). The condition climbs its ladder one rung
per ignored nudge (``ladder.Ladder``), the policy names the action of that rung, and the
evidence the finding rests on may hold a kill below it (``Policy.evidence_caps``). The most
severe action leads the decision, and its diagnostic says why. ``Escalation`` keeps one
episode's ladders, the flags it raised and the decision that stopped it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

from .base import AFTER_RUNGS, Finding, args_preview
from .breaker import NoProgressBreaker
from .events import ACTION_RANK, KILL_ACTIONS, Action, Decision, Flag, StepView
from .evidence import KINDLESS, capped, kind_evidence, source_of
from .history import History
from .ladder import Ladder, repeated_rungs
from .policy import Policy
from .registry import DEFAULT_DETECTORS

_DEFAULT_RUNGS: Final[dict[str, tuple[Action, ...]]] = {
    d.name: tuple(d.rungs) for d in DEFAULT_DETECTORS
}


class _Laddered(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def rungs(self) -> tuple[Action, ...]: ...


def ladders_of(
    policy: Policy, task_type: str | None, detectors: Sequence[_Laddered]
) -> tuple[dict[str, tuple[Action, ...]], tuple[Action, ...]]:
    """The ladder of each detector and the no-progress breaker's, under ``policy``."""
    if policy.ladders or policy.task_ladders:
        rungs = {d.name: policy.ladder_for(d.name, task_type, d.rungs) for d in detectors}
        return rungs, policy.ladder_for("no_progress", task_type, AFTER_RUNGS)
    # the detectors' own ladders (the same lookup, done once for every episode)
    return _DEFAULT_RUNGS, AFTER_RUNGS


class Escalation:
    """One episode's ladders, the flags raised on them and the decision that stopped it."""

    __slots__ = (
        "_breaker", "_caps", "_history", "_policy", "_rungs", "answered", "flags", "ladder",
        "stopped",
    )

    def __init__(
        self,
        policy: Policy,
        history: History,
        breaker: NoProgressBreaker,
        rungs: dict[str, tuple[Action, ...]],
    ) -> None:
        self._policy = policy
        self._history = history
        self._breaker = breaker
        self._rungs = rungs
        self._caps = policy.evidence_caps
        self.ladder = Ladder(policy.window)
        self.flags: list[Flag] = []
        self.stopped: Decision | None = None
        self.answered = -1
        """The step of the agent's last message: a warning delivered before it was read (the
        model took a turn after it and wrote), so a repeat after it is a warning ignored."""

    def decide(
        self,
        index: int,
        findings: Sequence[tuple[str, Finding]],
        step: StepView | None,
        *,
        calls: int,
        steps: int,
        key: str | None = None,
        **after: Any,
    ) -> Decision:
        """The decision at step ``index`` on ``findings`` (at least one), ``calls`` tool calls
        and ``steps`` steps in; ``step`` is the tool step they are about (``None`` for a
        message or a model turn). ``after`` are the decision's other fields."""
        kind = step.kind if step is not None else None  # (callers bring at least one finding)
        flags: list[Flag] = []
        new: list[Flag] = []
        lead: tuple[str, Finding, Action] | None = None
        progress_after = self._history.stretch_start
        # a call issued after a nudge of this stretch was delivered:
        unheeded = step is not None and self._breaker.unheeded(step.call)
        for name, finding in findings:
            rungs = finding.rungs or self._rungs.get(name) or AFTER_RUNGS
            rung, fresh = self.ladder.climb(
                (name, finding.key), index, len(rungs),
                -1 if finding.sticky else progress_after, calls,
                issued=step.call if step is not None else None,
                start=1 if unheeded and name != "budget" else 0,
                read_after=self.answered, again=repeated_rungs(rungs),
            )
            rung = min(rung, len(rungs) - 1)  # a condition can move to a shorter ladder
            act = self._policy.action_for(name, rungs[rung])
            if act == "allow":
                continue
            source = source_of(name, self._evidence(name, finding, step))
            held = act in KILL_ACTIONS and capped(act, self._caps.get(source)) != act
            if held:
                act = capped(act, self._caps[source])
            flag = Flag(
                step=index,
                detector=name,
                kind=finding.kind,
                severity="kill" if act in KILL_ACTIONS else "warn",
                message=finding.message,
                key=finding.key,
                details=finding.details,
                action=act,
                rung=rung,
                evidence=source,
                capped=held,
            )
            flags.append(flag)
            if fresh:
                new.append(flag)
            if lead is None or ACTION_RANK[act] > ACTION_RANK[lead[2]]:
                lead = (name, finding, act)
        self.flags.extend(new)
        if lead is None:
            return Decision(step=index, idempotency_key=key, kind=kind, **after)
        if (
            step is not None
            and lead[0] != "budget"
            and self._policy.action_for(lead[0], "stop") in KILL_ACTIONS
        ):  # a nudge of a detector that may end the run: now it must be heeded
            self._breaker.nudged(max(calls, step.call))  # (the nudged call included)
        name, finding, action = lead
        decision = Decision(
            step=index,
            action=action,
            flags=tuple(flags),
            new_flags=tuple(new),
            reason=name,
            correction=finding.message,
            diagnostic=self._diagnostic(name, finding, action, step, calls, steps),
            stop_reason=finding.stop_reason if action == "stop" else None,
            idempotency_key=key,
            cached_output_hash=(
                step.output_hash if step is not None and action in KILL_ACTIONS else None
            ),
            kind=kind,
            **after,
        )
        if action == "stop" and self.stopped is None:
            self.stopped = decision
        return decision

    def _evidence(self, name: str, finding: Finding, step: StepView | None) -> tuple[str, ...]:
        """What ``finding`` rests on: its own evidence, and how the call's kind is known
        (for a detector whose verdict depends on it)."""
        if step is None or name in KINDLESS:
            return finding.evidence
        return (*finding.evidence, kind_evidence(step.kind_source, known=step.kind is not None))

    def _diagnostic(
        self,
        name: str,
        finding: Finding,
        action: str,
        step: StepView | None,
        calls: int,
        steps: int,
    ) -> dict[str, Any]:
        diagnostic: dict[str, Any] = {
            "terminated_by" if action == "stop" else "decided_by": (
                finding.stop_reason if action == "stop" else name
            ),
            "action": action,
            "detector": name,
            "kind": finding.kind,
            "evidence": source_of(name, self._evidence(name, finding, step)),
            "step": step.index if step is not None else steps,
        }
        if step is not None:
            diagnostic["call"] = step.call
            diagnostic.update(tool=step.tool, args=args_preview(step))
            if step.kind is not None:
                diagnostic.update(tool_kind=step.kind, kind_source=step.kind_source or "shape")
        diagnostic.update(finding.details)
        breaker = self._breaker
        diagnostic.update(
            last_progress_step=breaker.last_progress_step,
            no_progress_streak=breaker.streak,
            hint=breaker.hint(calls),
        )
        return diagnostic
