"""EpisodeMonitor: the detection core for one episode, fed one step at a time.

The guard calls ``before_call`` before a tool runs and ``after_call`` when it returns;
``loopscope analyze`` and the collector replay recorded steps through the same two calls, so
all three reach the same verdicts. Work per step is O(window). The monitor never reads a
clock and never does I/O; it answers with ``Decision`` records and keeps the flags it raised.

It dispatches: a call is opened (``open_calls``), its kind known (``call_kinds``), its result
read (``results``), its progress judged (``progress``) and counted (``breaker``); the detectors
(``registry``) find, and ``escalation`` turns what they found into the decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, cast

from .base import AfterDetector, BeforeDetector, Finding, MessageDetector, TurnAware
from .breaker import NoProgressBreaker, budget_finding
from .budgets import BudgetMeter
from .call_kinds import CallKinds, judge_by_answer
from .escalation import Escalation, ladders_of
from .events import Decision, Flag, StepView, ToolCall, ToolResult
from .expectations import AnswerCheck, ExpectationTracker
from .history import History
from .limits import IDLE_MESSAGES
from .monologue import idle
from .nudges import UserNudges
from .open_calls import OpenCalls
from .output_stagnation import same_info_indexes
from .policy import Policy
from .progress import ProgressJudge
from .readings import Readings
from .registry import DEFAULT_DETECTORS
from .results import read_result, read_shapes
from .write_ledger import WriteLedger
from .writes import changes_state

_HOOKED: Final = {
    hook: tuple(i for i, d in enumerate(DEFAULT_DETECTORS) if hasattr(d, hook))
    for hook in ("before", "after", "message", "new_turn")
}
"""For each optional hook of the Detector protocol, the detectors that implement it."""

_DEFAULT_POLICY: Final = Policy()
"""The policy of a monitor given none (frozen, its mappings read-only: one serves every
episode, rather than one built for each)."""


class EpisodeMonitor:
    """Streaming detection over one episode (a run, a trace, a conversation).

    ``task`` is the user's request as text: the deadlines it states ("usually takes 10–15
    minutes") judge polls, and the identical writes it asks for ("create three identical
    tickets") are intended.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        episode_id: str = "",
        task_type: str | None = None,
        task: str = "",
        start_t: float = 0.0,
        readings: Readings | None = None,
    ) -> None:
        self.policy = policy = policy or _DEFAULT_POLICY
        self.readings = readings or Readings()
        """What was read of outputs (``readings.Readings``): the monitor's own, or one handed
        to it to share across runs."""
        self.episode_id = episode_id
        self.task_type = task_type
        self.k = policy.k_for(task_type)
        self.history = history = History(
            max(policy.window, policy.oscillation_max_period * policy.oscillation_cycles)
        )
        history.task_type = task_type
        history.default_deadline_s = policy.deadline_for(task_type)
        history.said((task,))
        self.writes = history.writes = WriteLedger(policy, episode_id)
        self.detectors = detectors = [factory(policy) for factory in DEFAULT_DETECTORS]
        rungs, breaker_rungs = ladders_of(policy, task_type, detectors)
        self.breaker = NoProgressBreaker(history, self.k, policy.ignored_calls, breaker_rungs)
        """The no-progress streak and the nudges left unheeded (``breaker``)."""
        self.escalation = Escalation(policy, history, self.breaker, rungs)
        """The ladders, the flags raised on them and the stop (``escalation``)."""
        # _HOOKED chose the detectors that have each hook (mypy cannot follow hasattr there)
        pick = detectors.__getitem__
        self._before = cast("list[BeforeDetector]", list(map(pick, _HOOKED["before"])))
        self._after = cast("list[AfterDetector]", list(map(pick, _HOOKED["after"])))
        self._message = cast("list[MessageDetector]", list(map(pick, _HOOKED["message"])))
        self._turn_aware = cast("list[TurnAware]", list(map(pick, _HOOKED["new_turn"])))
        self.budget = BudgetMeter(policy.budgets, start_t)
        self.expectations = ExpectationTracker(policy.required_tools)
        self.steps = 0
        self.tool_calls = 0
        self.flags: list[Flag] = self.escalation.flags
        self._messages: list[str] = []
        self.nudges = UserNudges()
        """What the user said and the agent's calls sent (``nudges.UserNudges``): whether a
        user message is a new intent."""
        self.kinds = CallKinds(policy, history, self.writes)
        """The kinds of the calls (``call_kinds.CallKinds``)."""
        self.calls = OpenCalls(policy, history, self.writes, self.kinds, task)
        """The calls issued and not yet returned (``open_calls.OpenCalls``)."""
        self.progress = ProgressJudge(policy, history, self.kinds)
        """Whether each call made progress (``progress.ProgressJudge``)."""

    @property
    def turn(self) -> int:
        """User turns so far (the task is turn 1 once its message is seen)."""
        return self.history.turn

    @property
    def stopped(self) -> Decision | None:
        """The decision that stopped the episode, if one did."""
        return self.escalation.stopped

    # -- tool calls -------------------------------------------------------------------------

    def signature_of(self, tool: str, args: Any) -> tuple[str, str]:
        """(signature, canonical argument text) of a call, with volatile keys excluded."""
        return self.calls.signature_of(tool, args)

    def before_call(self, call: ToolCall) -> Decision:
        """Check a call before it runs; returns what enforce mode would do."""
        history = self.history
        if call.turn is not None and call.turn > history.turn:
            self._new_turn(call.turn, None)
        index = self.steps
        self.steps += 1
        step = self.calls.step_of(call, index, self.tool_calls + 1)
        findings: list[tuple[str, Finding]] = []
        exhausted = self.budget.check_call(call.tool, call.t)
        if exhausted is not None:
            findings.append(("budget", budget_finding(exhausted, self._hint())))
        for detector in () if step.wait else self._before:  # (a wait is pacing, not work)
            if (finding := detector.before(history, step)) is not None:
                findings.append((detector.name, finding))
        if findings:
            decision = self._decide(index, findings, step, key=step.idempotency_key)
            decision.deadline_s, decision.intent = step.deadline_s, step.intent
            decision.turn, decision.deadline_stated = history.turn, step.deadline_stated
            decision.signature, decision.kind_source = step.signature, step.kind_source
        else:  # (the common case, built in one go)
            decision = Decision(
                step=index, idempotency_key=step.idempotency_key, kind=step.kind,
                deadline_s=step.deadline_s, deadline_stated=step.deadline_stated,
                intent=step.intent, turn=history.turn, signature=step.signature,
                kind_source=step.kind_source,
            )
        self.budget.count_call(call.tool)
        if self.expectations.expected is not None:
            self.expectations.on_tool_call(call.tool, call.args)
        self.tool_calls += 1
        if call.args is not None:
            self.nudges.sent(call.args)
        self.calls.open(step, call)
        return decision

    def after_call(self, result: ToolResult) -> Decision:
        """Record what a call returned; returns the post-call decision (stagnation warnings,
        the no-progress circuit breaker). Pairs with ``before_call`` by ``call_id``, else
        with the oldest call still open."""
        step, call = self.calls.close(result)  # (the step becomes the completed one)
        history = self.history
        stats = history.stats(step.signature)
        negative = read_result(step, result, self.readings)
        key = step.idempotency_key
        if judge_by_answer(step, stats):  # it said it did something: a write, known now
            key = self.writes.key_for(step.tool, call.idempotency_key, step.args,
                                      step.args_text)
        read_shapes(step, negative)
        findings = self._findings_after(step)
        write_status = self._record_effect(step, key)
        reconciled = self._reconcile(call, step)
        step.progress = self.progress.of(step, stats, call)
        if step.progress is None and step.output is None and step.status != "blocked":
            self.breaker.unseen(step.index)  # (no output to compare: no progress assumed)
        self.breaker.count(step)
        step.output = step.args = None  # the history keeps hashes and sketches, not content
        history.append(step)
        self.budget.count_result(step.tool, step.status)
        self.budget.count_usage(result.tokens_in + result.tokens_out, result.cost)
        if step.progress in (None, "new_action") and (
            stop := self.breaker.check(step, self.tool_calls)
        ) is not None:  # (one no_progress flag a call: the stop, else the breaker's rung)
            findings.append(("no_progress", stop))
        streak = self.breaker.streak
        if not findings:  # (the common case, built in one go)
            return Decision(
                step=step.index, idempotency_key=key, kind=step.kind, progress=step.progress,
                write_status=write_status, streak=streak, turn=history.turn,
                reconciled=reconciled,
            )
        decision = self._decide(step.index, findings, step, key=key, progress=step.progress,
                                write_status=write_status, streak=streak)
        decision.reconciled = reconciled
        decision.turn = history.turn
        return decision

    def _findings_after(self, step: StepView) -> list[tuple[str, Finding]]:
        """The after-call detectors' findings on a completed step (none for a blocked call
        or a wait), with the earlier steps whose output said the same found for them."""
        findings: list[tuple[str, Finding]] = []
        if step.status == "blocked" or step.wait:
            return findings
        history = self.history
        similarity = self.policy.stagnation_similarity
        step.same_info = same_info_indexes(step, history.recent(self.policy.window - 1),
                                           similarity)
        for detector in self._after:
            if (finding := detector.after(history, step)) is not None:
                findings.append((detector.name, finding))
        return findings

    def _record_effect(self, step: StepView, key: str | None) -> str | None:
        """Record what a completed call changed: a write in the ledger (returns its status),
        and whether the world changed (``History.epoch``), not by doing again what was
        done (``History.changes``)."""
        history = self.history
        kind = step.kind
        write_status = None
        again = kind == "write" and bool(self.writes.done(step.signature))
        if kind == "write" and key is not None:
            write_status = self.writes.after(step, key)
        if step.status == "ok" and (
            kind == "write" or step.edit is not None or changes_state(step.args)
        ):
            history.epoch += 1  # the world changed: earlier failures may not repeat
            if not again:
                history.changes += 1  # ... and not by doing again what was done
        if write_status == "ok":
            self.writes.changed(step.signature, history.changes)
        return write_status

    def _reconcile(self, call: ToolCall, step: StepView) -> tuple[str, ...]:
        if call.reconciles:
            record = self.writes.reconcile(call.reconciles, call.found)
            return (record.key,) if record is not None else ()
        if step.kind == "write":
            return ()
        settled = []
        for record in self.writes.looked_up(step):  # a read that looked the record up
            self.writes.reconcile(record.key, self.writes.found_in(record, step))
            settled.append(record.key)
        return tuple(settled)

    def reconcile(self, ref: str, *, found: bool | None) -> bool:
        """Resolve an UNKNOWN write by idempotency key or call id; False if none matches."""
        return self.writes.reconcile(ref, found) is not None

    def mark_progress(self) -> None:
        """The agent says it made progress (an explicit marker): the streak starts again."""
        self.breaker.mark_progress(self.steps)

    def _new_turn(self, turn: int, content: str | None) -> None:
        """A user turn starts a new intent: the stretch, the ladders and the write identities
        start again, and the repeats the user asks for are read from what they said."""
        history = self.history
        first = history.turn == 0
        history.turn = turn
        history.stretch_start = history.turn_start = self.steps
        self.breaker.streak = 0
        self.escalation.ladder.reset()
        self.writes.new_turn()
        said = () if content is None else (content,)
        history.said((*history.asked, *said) if first else said)
        self.calls.new_turn()  # (its deadline read again from what this turn says)
        for detector in self._turn_aware:
            detector.new_turn()

    # -- messages and model turns -----------------------------------------------------------

    def before_model_call(self, t: float = 0.0) -> Decision:
        """Check the model-turn, wall-clock, token and cost budgets before a model call."""
        return self.check_model_turn(t) or Decision(step=self.steps)

    def check_model_turn(self, t: float = 0.0) -> Decision | None:
        """``before_model_call`` for a caller that needs the decision only when a budget
        stops the turn (a replay): ``None`` while every budget allows it."""
        exhausted = self.budget.check_model_turn(t)
        if exhausted is None:
            return None
        return self._decide(self.steps, [("budget", budget_finding(exhausted, self._hint()))], None)

    def after_model_call(self, *, tokens: int = 0, cost: float = 0.0) -> None:
        """Count one model turn and its usage."""
        self.budget.count_usage(tokens, cost, model_turn=True)

    def on_message(self, role: str, content: str = "", t: float | None = None) -> Decision:
        """Record a user or assistant message (a step of its own), written at ``t`` if
        known."""
        index = self.steps
        decision = self.record_message(role, content, t)
        return decision or Decision(step=index, turn=self.history.turn)

    def record_message(
        self, role: str, content: str = "", t: float | None = None
    ) -> Decision | None:
        """``on_message`` for a caller that needs the decision only when the message raised
        a flag (a replay): ``None`` when it raised nothing. ``t``: when it was written, if
        known (the agent was working, not waiting, until an assistant message)."""
        history = self.history
        history.idle_messages = history.idle_messages + 1 if idle(content) else 0
        if (  # (once the conversation is idle talk, a message that asks nothing is no new intent)
            role == "user"
            and history.idle_messages < IDLE_MESSAGES
            and self.nudges.new_intent(content)
        ):
            self._new_turn(self.history.turn + 1, content)
        index = self.steps
        self.steps += 1
        if role == "assistant":
            self.escalation.answered = index
            if t is not None:
                history.spoke_t = t
        findings: list[tuple[str, Finding]] = []
        if role == "user" and self.expectations.rules:
            self.expectations.on_user_message(content, self._messages)
        for detector in self._message:
            if (finding := detector.message(self.history, role, content)) is not None:
                findings.append((detector.name, finding))
        if self.expectations.rules:  # (the context a required-tool rule's follow-up reads)
            self._messages = [*self._messages[-7:], content]
        if not findings:
            return None
        decision = self._decide(index, findings, None)
        decision.turn = self.history.turn
        return decision

    def check_answer(self, text: str) -> AnswerCheck:
        """A final answer is about to go out: apply the required-tool rules."""
        return self.expectations.on_answer(text)

    # -- decisions ----------------------------------------------------------------------------

    def _hint(self) -> str:
        return self.breaker.hint(self.tool_calls)

    def _decide(
        self,
        index: int,
        findings: Sequence[tuple[str, Finding]],
        step: StepView | None,
        *,
        key: str | None = None,
        **after: Any,
    ) -> Decision:
        return self.escalation.decide(
            index, findings, step, calls=self.tool_calls, steps=self.steps, key=key, **after
        )

    # -- reporting ------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """Totals for the episode so far (what the root span and reports carry)."""
        return {
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "no_progress_steps": self.breaker.no_progress_steps,
            "max_no_progress_streak": self.breaker.max_streak,
            "last_progress_step": self.breaker.last_progress_step,
            "flags": len(self.flags),
            "stop_reason": self.stopped.stop_reason if self.stopped else None,
            "tokens": self.budget.tokens,
            "cost_usd": round(self.budget.cost, 6),
            "unknown_writes": len(self.writes.unresolved()),
        }
