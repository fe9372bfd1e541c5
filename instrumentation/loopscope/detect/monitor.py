"""EpisodeMonitor: the detection core for one episode, fed one step at a time.

The guard calls ``before_call`` before a tool runs and ``after_call`` when it returns;
``loopscope analyze`` and the collector replay recorded steps through the same two calls, so
all three reach the same verdicts. Work per step is O(window). The monitor never reads a
clock and never does I/O; it answers with ``Decision`` records and keeps the flags it raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .base import Finding, args_preview
from .budgets import BudgetMeter, Exhausted
from .cursor_stuck import CursorStuck
from .events import ACTION_RANK, Decision, Flag, StepView, ToolCall, ToolResult
from .exact_repeat import ExactRepeat
from .expectations import AnswerCheck, ExpectationTracker
from .fingerprint import call_signature, canonical_json, output_hash, word_sketch
from .fuzzy_repeat import FuzzyRepeat
from .history import History
from .monologue import Monologue
from .oscillation import Oscillation
from .output_stagnation import OutputStagnation, same_info_indexes
from .policy import Policy
from .poll_timeout import PollTimeout
from .repeat_same_error import RepeatSameError
from .window_repeat import WindowRepeat
from .writes import WriteLedger

DEFAULT_DETECTORS: Final = (
    PollTimeout,
    RepeatSameError,
    ExactRepeat,
    WindowRepeat,
    Oscillation,
    FuzzyRepeat,
    OutputStagnation,
    CursorStuck,
    WriteLedger,
    Monologue,
)
"""Every detector, in the order they are consulted. The README's table is checked against it."""

BREAKERS: Final = ("no_progress", "budget", "repeated_tool_call")
"""Stops that are not a loop shape of their own: the circuit breaker, budgets, and a call
repeated after being blocked ``stop_after_blocks`` times."""

_STOP_REASON: Final = {
    "budget": "budget",
    "poll_timeout": "timeout",
    "no_progress": "no_progress",
    "repeated_tool_call": "repeated_tool_call",
}


@dataclass(slots=True)
class _Pending:
    candidate: StepView
    call: ToolCall
    key: str | None


class EpisodeMonitor:
    """Streaming detection over one episode (a run, a trace, a conversation)."""

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        episode_id: str = "",
        task_type: str | None = None,
        start_t: float = 0.0,
    ) -> None:
        self.policy = policy = policy or Policy()
        self.episode_id = episode_id
        self.k = policy.k_for(task_type)
        self.history = History(
            max(policy.window, policy.oscillation_max_period * policy.oscillation_cycles)
        )
        self._before: list[Any] = []
        self._after: list[Any] = []
        for factory in DEFAULT_DETECTORS:
            if factory in (WriteLedger, Monologue):
                continue
            detector = factory(policy)
            if hasattr(detector, "before"):
                self._before.append(detector)
            if hasattr(detector, "after"):
                self._after.append(detector)
            if isinstance(detector, CursorStuck):
                self._cursor = detector
        self.writes = WriteLedger(policy, episode_id)
        self.monologue = Monologue(policy)
        self.budget = BudgetMeter(policy.budgets, start_t)
        self.expectations = ExpectationTracker(policy.required_tools)
        self.steps = 0
        self.tool_calls = 0
        self.streak = 0
        self.max_streak = 0
        self.no_progress_steps = 0
        self.last_progress_step: int | None = None
        self.flags: list[Flag] = []
        self.stopped: Decision | None = None
        self._pending: dict[str, _Pending] = {}
        self._firing: dict[tuple[str, str], int] = {}
        self._messages: list[str] = []

    # -- tool calls -------------------------------------------------------------------------

    def signature_of(self, tool: str, args: Any) -> tuple[str, str]:
        """(signature, canonical argument text) of a call, with volatile keys excluded."""
        args_text = canonical_json(args, exclude=self.policy.volatile_for(tool))
        return call_signature(tool, args_text), args_text

    def before_call(self, call: ToolCall) -> Decision:
        """Check a call before it runs; returns what enforce mode would do."""
        index = self.steps
        self.steps += 1
        args_text = call.args_text
        if not args_text and call.args is not None:
            signature, args_text = self.signature_of(call.tool, call.args)
        else:
            signature = call.signature or call_signature(call.tool, args_text)
        kind = self._kind(call, signature)
        stats = self.history.stats(signature)
        candidate = StepView(
            index=index,
            tool=call.tool,
            kind=kind,
            signature=signature,
            args_text=args_text,
            args=call.args,
            output_hash=stats.last_output if stats else "",
            status=stats.last_status if stats else "ok",  # type: ignore[arg-type]
            t=call.t,
            call_id=call.call_id,
            deadline_s=call.deadline_s,
        )
        findings: list[tuple[str, Finding]] = []
        exhausted = self.budget.check_call(call.tool, call.t)
        if exhausted is not None:
            findings.append(("budget", self._budget_finding(exhausted)))
        for detector in self._before:
            if (finding := detector.before(self.history, candidate)) is not None:
                findings.append((detector.name, finding))
        key = None
        if kind == "write":
            key = self.writes.key_for(call.tool, call.idempotency_key)
            if (finding := self.writes.before(candidate, key, call.intent)) is not None:
                findings.append((self.writes.name, finding))
        decision = self._decide(index, findings, candidate, key=key)
        if decision.action == "block":
            blocks = self.history.note_block(signature)
            if blocks > self.policy.stop_after_blocks:
                stop = Finding(
                    kind=decision.flags[0].kind,
                    action="stop",
                    message=(
                        f"{call.tool} {args_preview(candidate)} was called again after "
                        f"{blocks - 1} corrections for repeating it; the run is not making "
                        "progress and stops here."
                    ),
                    key=signature,
                    details={"tool": call.tool, "count": blocks},
                )
                decision = self._decide(
                    index, [*findings, ("repeated_tool_call", stop)], candidate, key=key
                )
        self.budget.count_call(call.tool)
        self.expectations.on_tool_call(call.tool, call.args)
        self.monologue.on_tool_call()
        self.tool_calls += 1
        self._pending[call.call_id or f"#{index}"] = _Pending(candidate, call, key)
        return decision

    def after_call(self, result: ToolResult) -> Decision:
        """Record what a call returned; returns the post-call decision (stagnation warnings,
        the no-progress circuit breaker). Pairs with ``before_call`` by ``call_id``, else
        with the oldest call still open."""
        ref = result.call_id if result.call_id in self._pending else next(iter(self._pending), None)
        if ref is None:
            raise ValueError(f"after_call without an open call (call_id={result.call_id!r})")
        pending = self._pending.pop(ref)
        cand = pending.candidate
        text = result.output
        digest = result.output_hash or (output_hash(text) if text is not None else "")
        if result.status == "blocked":  # the model is shown the earlier result again
            digest, text = cand.output_hash or digest, None
        stats = self.history.stats(cand.signature)
        kind = cand.kind
        if kind is None and stats is not None and digest not in stats.outputs:
            kind = "poll"  # same call, changing output: polling by shape
        step = StepView(
            index=cand.index,
            tool=cand.tool,
            kind=kind,
            signature=cand.signature,
            args_text=cand.args_text,
            args=cand.args,
            output_hash=digest,
            status=result.status,
            t=cand.t if result.t is None else result.t,
            words=word_sketch(text) if text is not None else None,
            output=text,
            call_id=cand.call_id,
            deadline_s=cand.deadline_s,
        )
        if step.status != "blocked":
            similarity = self.policy.stagnation_similarity
            step.same_info = same_info_indexes(
                step, self.history.recent(self.policy.window - 1), similarity
            )
        findings: list[tuple[str, Finding]] = []
        self._cursor.last_advanced = False
        if step.status != "blocked":
            for detector in self._after:
                if (finding := detector.after(self.history, step)) is not None:
                    findings.append((detector.name, finding))
        write_status = None
        if kind == "write" and pending.key is not None:
            write_status = self.writes.after(step, pending.key)
        self._reconcile(pending.call, step)
        step.progress = self._progress(step, stats)
        self._count_progress(step)
        step.output = step.args = None  # the history keeps hashes and sketches, not content
        self.history.append(step)
        self.budget.count_result(step.tool, step.status)
        self.budget.count_usage(result.tokens_in + result.tokens_out, result.cost)
        if step.progress is None and self.streak >= self.k:
            findings.append(("no_progress", self._breaker_finding(step)))
        return self._decide(
            step.index,
            findings,
            step,
            key=pending.key,
            progress=step.progress,
            write_status=write_status,
            streak=self.streak,
        )

    def _kind(self, call: ToolCall, signature: str) -> Any:
        if call.kind is not None:
            return call.kind
        declared = self.policy.tool_kinds.get(call.tool)
        if declared is not None:
            return declared
        if call.tool in self.policy.poll_tools or self.history.is_changing(signature):
            return "poll"
        return None

    def _reconcile(self, call: ToolCall, step: StepView) -> None:
        if call.reconciles:
            self.writes.reconcile(call.reconciles, call.found)
        elif step.kind != "write" and step.status == "ok":
            for record in self.writes.unresolved():
                if record.tool != step.tool:  # looked something else up: an implicit reconcile
                    self.writes.reconcile(record.key, None)

    def reconcile(self, ref: str, *, found: bool | None) -> bool:
        """Resolve an UNKNOWN write by idempotency key or call id; False if none matches."""
        return self.writes.reconcile(ref, found) is not None

    def mark_progress(self) -> None:
        """The agent says it made progress (an explicit marker): the streak starts again."""
        self.streak = 0
        self.last_progress_step = self.steps - 1 if self.steps else None

    def _progress(self, step: StepView, stats: Any) -> str | None:
        if step.status in ("blocked", "timeout"):
            return None
        if step.kind == "write":
            return "write_ok" if step.status == "ok" else None
        if step.kind == "poll" and stats is not None:
            return "state_change" if step.output_hash != stats.last_output else "waiting"
        if step.words is not None and not step.words:  # an empty output ("", "[]") tells
            return "new_action" if stats is None else None  # nothing; a new call is an action
        if step.output_hash in self.history.seen_outputs:
            return None
        if any(s.status == "ok" and s.index in step.same_info for s in self.history.steps):
            return None
        return "cursor_advance" if self._cursor.last_advanced else "new_info"

    def _count_progress(self, step: StepView) -> None:
        if step.progress == "waiting":
            return
        if step.progress is None:
            self.streak += 1
            self.no_progress_steps += 1
            self.max_streak = max(self.max_streak, self.streak)
        else:
            self.streak = 0
            self.last_progress_step = step.index

    # -- messages and model turns -----------------------------------------------------------

    def before_model_call(self, t: float = 0.0) -> Decision:
        """Check the model-turn, wall-clock, token and cost budgets before a model call."""
        exhausted = self.budget.check_model_turn(t)
        if exhausted is None:
            return Decision(step=self.steps)
        return self._decide(self.steps, [("budget", self._budget_finding(exhausted))], None)

    def after_model_call(self, *, tokens: int = 0, cost: float = 0.0) -> None:
        """Count one model turn and its usage."""
        self.budget.count_usage(tokens, cost, model_turn=True)

    def on_message(self, role: str, content: str = "") -> Decision:
        """Record a user or assistant message (a step of its own)."""
        index = self.steps
        self.steps += 1
        findings: list[tuple[str, Finding]] = []
        if role == "user":
            self.expectations.on_user_message(content, self._messages)
        if (finding := self.monologue.on_message(role)) is not None:
            findings.append((self.monologue.name, finding))
        self._messages = [*self._messages[-7:], content]
        return self._decide(index, findings, None)

    def check_answer(self, text: str) -> AnswerCheck:
        """A final answer is about to go out: apply the required-tool rules (seed 003)."""
        return self.expectations.on_answer(text)

    # -- decisions ----------------------------------------------------------------------------

    def _budget_finding(self, exhausted: Exhausted) -> Finding:
        return Finding(
            kind="budget",
            action="stop",
            message=(
                f"Budget {exhausted.budget_type} exhausted: {exhausted.consumed} of "
                f"{exhausted.limit}. {self._hint()}"
            ),
            key=exhausted.budget_type,
            details={
                "budget_type": exhausted.budget_type,
                "limit": exhausted.limit,
                "consumed": exhausted.consumed,
            },
        )

    def _breaker_finding(self, step: StepView) -> Finding:
        return Finding(
            kind="no_progress",
            action="stop",
            message=(
                f"{self.streak} consecutive tool calls made no progress (limit {self.k}); the "
                f"last was {step.tool} {args_preview(step)}. {self._hint()}"
            ),
            key="no_progress",
            details={"limit": self.k, "consumed": self.streak},
        )

    def _hint(self) -> str:
        if self.tool_calls == 0:
            return "No tool call has run yet."
        if self.streak == 0:
            return "The last call made progress."
        return f"No progress in the last {self.streak} tool calls."

    def _decide(
        self,
        index: int,
        findings: Sequence[tuple[str, Finding]],
        step: StepView | None,
        *,
        key: str | None = None,
        **after: Any,
    ) -> Decision:
        kind = step.kind if step is not None else None
        if not findings:
            return Decision(step=index, idempotency_key=key, kind=kind, **after)
        flags: list[Flag] = []
        new: list[Flag] = []
        for name, finding in findings:
            act = self.policy.action_for(name, finding.action)
            flag = Flag(
                step=index,
                detector=name,
                kind=finding.kind,
                severity="kill" if act in ("block", "stop") else "warn",
                message=finding.message,
                key=finding.key,
                details=finding.details,
                action=act,
            )
            flags.append(flag)
            last = self._firing.get((name, finding.key))
            self._firing[(name, finding.key)] = index
            if last is None or index - last > self.policy.window:
                new.append(flag)
        self.flags.extend(new)
        name, finding = max(
            findings, key=lambda f: ACTION_RANK[self.policy.action_for(f[0], f[1].action)]
        )
        action = self.policy.action_for(name, finding.action)
        decision = Decision(
            step=index,
            action=action,  # type: ignore[arg-type]
            flags=tuple(flags),
            new_flags=tuple(new),
            reason=name,
            correction=finding.message if action != "allow" else None,
            diagnostic=self._diagnostic(name, finding, action, step) if action != "allow" else None,
            stop_reason=_STOP_REASON.get(name, "repeated_tool_call") if action == "stop" else None,
            idempotency_key=key,
            cached_output_hash=(
                step.output_hash if step is not None and action in ("block", "stop") else None
            ),
            kind=kind,
            **after,
        )
        if action == "stop" and self.stopped is None:
            self.stopped = decision
        return decision

    def _diagnostic(
        self, name: str, finding: Finding, action: str, step: StepView | None
    ) -> dict[str, Any]:
        diagnostic: dict[str, Any] = {
            "terminated_by" if action == "stop" else "decided_by": (
                _STOP_REASON.get(name, "repeated_tool_call") if action == "stop" else name
            ),
            "action": action,
            "detector": name,
            "kind": finding.kind,
            "step": step.index if step is not None else self.steps,
        }
        if step is not None:
            diagnostic.update(tool=step.tool, args=args_preview(step))
        diagnostic.update(finding.details)
        diagnostic.update(
            last_progress_step=self.last_progress_step,
            no_progress_streak=self.streak,
            hint=self._hint(),
        )
        return diagnostic

    # -- reporting ------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """Totals for the episode so far (what the root span and reports carry)."""
        return {
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "no_progress_steps": self.no_progress_steps,
            "max_no_progress_streak": self.max_streak,
            "last_progress_step": self.last_progress_step,
            "flags": len(self.flags),
            "stop_reason": self.stopped.stop_reason if self.stopped else None,
            "tokens": self.budget.tokens,
            "cost_usd": round(self.budget.cost, 6),
            "unknown_writes": len(self.writes.unresolved()),
        }
