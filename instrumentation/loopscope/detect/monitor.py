"""EpisodeMonitor: the detection core for one episode, fed one step at a time.

The guard calls ``before_call`` before a tool runs and ``after_call`` when it returns;
``loopscope analyze`` and the collector replay recorded steps through the same two calls, so
all three reach the same verdicts. Work per step is O(window). The monitor never reads a
clock and never does I/O; it answers with ``Decision`` records and keeps the flags it raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from .answers import error_shape, figures, progress_figures, quantities, retry_after_s, stuck_state
from .base import (
    AFTER_RUNGS,
    AfterDetector,
    BeforeDetector,
    Finding,
    MessageDetector,
    TurnAware,
    args_preview,
)
from .breaker import NoProgressBreaker, budget_finding
from .budgets import BudgetMeter
from .call_kinds import CallKinds
from .events import (
    ACTION_RANK,
    KILL_ACTIONS,
    Action,
    Decision,
    Flag,
    StepView,
    ToolCall,
    ToolResult,
)
from .evidence import KINDLESS, capped, kind_evidence, source_of
from .expectations import AnswerCheck, ExpectationTracker
from .fingerprint import call_signature, canonical_json, output_hash
from .history import History
from .kinds import confirms_change, is_wait
from .ladder import Ladder, repeated_rungs
from .limits import IDLE_MESSAGES
from .monologue import idle
from .nudges import UserNudges
from .output_stagnation import same_info_indexes
from .policy import Policy
from .progress import ProgressJudge
from .readings import Readings
from .registry import DEFAULT_DETECTORS
from .task import TaskDeadline, counted_words, task_deadline
from .texts import loose_text, masked, unpositioned
from .write_ledger import WriteLedger
from .writes import changes_state, edit_of

_HOOKED: Final = {
    hook: tuple(i for i, d in enumerate(DEFAULT_DETECTORS) if hasattr(d, hook))
    for hook in ("before", "after", "message", "new_turn")
}
"""For each optional hook of the Detector protocol, the detectors that implement it."""
_DEFAULT_RUNGS: Final[dict[str, tuple[Action, ...]]] = {
    d.name: tuple(d.rungs) for d in DEFAULT_DETECTORS
}

_DEFAULT_POLICY: Final = Policy()
"""The policy of a monitor given none (frozen, its mappings read-only: one serves every
episode, rather than one built for each)."""


@dataclass(slots=True)
class _Pending:
    candidate: StepView
    call: ToolCall
    key: str | None


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
        self._task_deadline: TaskDeadline | Literal[False] | None = None  # None: not read yet
        history.said((task,))
        self.writes = history.writes = WriteLedger(policy, episode_id)
        self.detectors = detectors = [factory(policy) for factory in DEFAULT_DETECTORS]
        if policy.ladders or policy.task_ladders:
            self._rungs = {
                d.name: policy.ladder_for(d.name, task_type, d.rungs) for d in detectors
            }
            breaker_rungs = policy.ladder_for("no_progress", task_type, AFTER_RUNGS)
        else:  # the detectors' own ladders (the same lookup, done once for every episode)
            self._rungs, breaker_rungs = _DEFAULT_RUNGS, AFTER_RUNGS
        self.breaker = NoProgressBreaker(history, self.k, policy.ignored_calls, breaker_rungs)
        """The no-progress streak and the nudges left unheeded (``breaker``)."""
        # _HOOKED chose the detectors that have each hook (mypy cannot follow hasattr there)
        pick = detectors.__getitem__
        self._before = cast("list[BeforeDetector]", list(map(pick, _HOOKED["before"])))
        self._after = cast("list[AfterDetector]", list(map(pick, _HOOKED["after"])))
        self._message = cast("list[MessageDetector]", list(map(pick, _HOOKED["message"])))
        self._turn_aware = cast("list[TurnAware]", list(map(pick, _HOOKED["new_turn"])))
        self.ladder = Ladder(policy.window)
        self.budget = BudgetMeter(policy.budgets, start_t)
        self.expectations = ExpectationTracker(policy.required_tools)
        self.steps = 0
        self.tool_calls = 0
        self.flags: list[Flag] = []
        self.stopped: Decision | None = None
        self._pending: dict[str, _Pending] = {}
        self._messages: list[str] = []
        self._task = task
        self.nudges = UserNudges()
        """What the user said and the agent's calls sent (``nudges.UserNudges``): whether a
        user message is a new intent."""
        self._caps = policy.evidence_caps
        self._answered = -1
        """The step of the agent's last message: a warning delivered before it was read (the
        model took a turn after it and wrote), so a repeat after it is a warning ignored."""
        self.kinds = CallKinds(policy, history, self.writes)
        """The kinds of the calls (``call_kinds.CallKinds``)."""
        self.progress = ProgressJudge(policy, history, self.kinds)
        """Whether each call made progress (``progress.ProgressJudge``)."""

    @property
    def turn(self) -> int:
        """User turns so far (the task is turn 1 once its message is seen)."""
        return self.history.turn

    # -- tool calls -------------------------------------------------------------------------

    def signature_of(self, tool: str, args: Any) -> tuple[str, str]:
        """(signature, canonical argument text) of a call, with volatile keys excluded."""
        args_text = canonical_json(args, exclude=self.policy.volatile_for(tool))
        return call_signature(tool, args_text), args_text

    def before_call(self, call: ToolCall) -> Decision:
        """Check a call before it runs; returns what enforce mode would do."""
        if call.turn is not None and call.turn > self.history.turn:
            self._new_turn(call.turn, None)
        index = self.steps
        self.steps += 1
        args_text = call.args_text
        if not args_text and call.args is not None:
            signature, args_text = self.signature_of(call.tool, call.args)
        else:
            signature = call.signature or call_signature(call.tool, args_text)
        history = self.history
        kind, source = self.kinds.of(call, signature)
        stats = history.stats(signature)
        key = intent = deadline = stated = None
        explicit = False
        if kind == "write":
            key = self.writes.key_for(call.tool, call.idempotency_key, call.args, args_text)
            intent = call.intent
            done = len(self.writes.done(signature))
            if intent is None and 0 < done < self._intended_repeats(call.tool, call.args):
                intent = "duplicate"  # the task or the user's latest turn asked for it
        elif kind == "poll":
            stated, explicit = self._deadline_of(call)
            deadline = stated or history.default_deadline_s
        candidate = StepView(
            index=index,
            call=self.tool_calls + 1,
            tool=call.tool,
            kind=kind,
            signature=signature,
            args_text=args_text,
            args=call.args,
            output_hash=stats.last_output if stats else "",
            info=stats.last_info if stats else 0,
            status=stats.last_status if stats else "ok",
            t=call.t,
            call_id=call.call_id,
            deadline_s=deadline,
            loose=f"{call.tool}\x00{loose_text(args_text) if args_text else signature}",
            idempotency_key=key,
            intent=intent,
            edit=edit_of(call.args),
            kind_source=source,
            deadline_stated=explicit,
            start=call.t,
            wait=source != "declared" and is_wait(call.tool, call.args),
        )
        findings: list[tuple[str, Finding]] = []
        exhausted = self.budget.check_call(call.tool, call.t)
        if exhausted is not None:
            findings.append(("budget", budget_finding(exhausted, self._hint())))
        for detector in () if candidate.wait else self._before:  # (a wait is pacing, not work)
            if (finding := detector.before(history, candidate)) is not None:
                findings.append((detector.name, finding))
        if findings:
            decision = self._decide(index, findings, candidate, key=key)
            decision.deadline_s, decision.intent, decision.turn = deadline, intent, history.turn
            decision.deadline_stated = explicit
            decision.signature, decision.kind_source = signature, source
        else:  # (the common case, built in one go)
            decision = Decision(
                step=index, idempotency_key=key, kind=kind, deadline_s=deadline,
                deadline_stated=explicit, intent=intent, turn=history.turn,
                signature=signature, kind_source=source,
            )
        self.budget.count_call(call.tool)
        if self.expectations.expected is not None:
            self.expectations.on_tool_call(call.tool, call.args)
        self.tool_calls += 1
        if call.args is not None:
            self.nudges.sent(call.args)
        ref = call.call_id or f"#{index}"
        if ref in self._pending:  # (a call id used twice at once: its results pair in order)
            ref = f"{ref}#{index}"
        self._pending[ref] = _Pending(candidate, call, key)
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
        blocked = result.status == "blocked"
        words: frozenset[str] | None = None
        negative = False
        if text is not None and not blocked:
            digest, words, negative = self.readings.reading_of(text)
            digest = result.output_hash or digest
        else:
            digest = result.output_hash or (output_hash(text) if text is not None else "")
            if blocked:  # the model is shown the earlier result again
                digest, text = cand.output_hash or digest, None
        history = self.history
        stats = history.stats(cand.signature)
        step = cand  # the candidate becomes the completed step (no one else holds it)
        step.output_hash = digest
        step.status = result.status
        if result.t is not None:
            step.t = result.t
        step.words = words
        step.output = text
        if text is not None:
            step.facts = self.readings.facts_of(text, cand.args_text, cand.args)
            step.info = hash(step.facts)
        elif not (blocked and step.info):  # (a blocked step says what it said last time)
            step.info = hash(digest)
        kind = step.kind
        if (
            kind in (None, "read")
            and step.kind_source != "declared"
            and result.status == "ok"
            and stats is not None
            and stats.infos
            and step.info not in stats.infos
        ):
            kind = step.kind = "poll"  # same call, what it says has changed: polling by shape
            step.kind_source = None
        key = pending.key
        if (
            kind is None
            and result.status == "ok"
            and text is not None
            and not step.wait
            and confirms_change(text, step.words)
        ):  # nothing told its kind, and it says it did something: it was a write
            kind = step.kind = "write"
            step.kind_source = "outcome"
            key = self.writes.key_for(step.tool, pending.call.idempotency_key, step.args,
                                      step.args_text)
        if kind == "write" and text is not None and result.status == "ok":
            step.shape = output_hash(masked(text))  # (its answer, figures aside: a redo's)
        if step.status in ("error", "timeout"):
            step.shape = error_shape(text, step.args) if text is not None else digest
            step.retry_after = retry_after_s(text)
            step.failure = output_hash(unpositioned(text)) if text is not None else digest
        elif step.status == "ok":
            step.negative = negative
        if kind == "poll" and text is not None and step.status != "blocked":
            step.figures = figures(text)
            step.quantities = quantities(text)
            step.stuck = stuck_state(text, step.words)
            if step.stuck == "stalled" and not step.shape:
                step.shape = progress_figures(text)  # (its lag or log position may move)
            elif step.stuck and not step.shape:
                step.shape = output_hash(masked(text))
        findings: list[tuple[str, Finding]] = []
        if step.status != "blocked" and not step.wait:
            similarity = self.policy.stagnation_similarity
            step.same_info = same_info_indexes(
                step, history.recent(self.policy.window - 1), similarity
            )
            for detector in self._after:
                if (finding := detector.after(history, step)) is not None:
                    findings.append((detector.name, finding))
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
        reconciled = self._reconcile(pending.call, step)
        step.progress = self.progress.of(step, stats, pending.call)
        if step.progress is None and text is None and not blocked:
            self.breaker.unseen(step.index)  # (no output to compare: no progress assumed)
        self.breaker.count(step)
        step.output = step.args = None  # the history keeps hashes and sketches, not content
        history.append(step)
        self.budget.count_result(step.tool, step.status)
        self.budget.count_usage(result.tokens_in + result.tokens_out, result.cost)
        if step.progress is None and (
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
        decision = self._decide(
            step.index,
            findings,
            step,
            key=key,
            progress=step.progress,
            write_status=write_status,
            streak=streak,
        )
        decision.reconciled = reconciled
        decision.turn = history.turn
        return decision

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

    def _deadline_of(self, call: ToolCall) -> tuple[float | None, bool]:
        """A poll's deadline as the call or the task's text states it (read once, when a poll
        needs it), and whether it is an explicit limit (the call's, "give up after 20
        minutes", "until noon") rather than an estimate ("usually takes 10 minutes")."""
        if call.deadline_s:
            return call.deadline_s, call.deadline_stated is not False
        if self._task_deadline is None:
            self._task_deadline = task_deadline("\n".join((self._task, *self.history.asked))) or False
        stated = self._task_deadline
        return (stated.seconds, stated.explicit) if stated else (None, False)

    def _intended_repeats(self, tool: str, args: Any) -> int:
        """Identical writes the current turn asks for (read when a write repeats): a number
        of copies, or a number of the things the write's name or arguments count."""
        return self.history.intended_repeats(counted_words(args, tool))

    def _new_turn(self, turn: int, content: str | None) -> None:
        """A user turn starts a new intent: the stretch, the ladders and the write identities
        start again, and the repeats the user asks for are read from what they said."""
        history = self.history
        first = history.turn == 0
        history.turn = turn
        history.stretch_start = history.turn_start = self.steps
        self.breaker.streak = 0
        self.ladder.reset()
        self.writes.new_turn()
        said = () if content is None else (content,)
        history.said((*history.asked, *said) if first else said)
        self._task_deadline = None  # (read again from what this turn says)
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

    def on_message(self, role: str, content: str = "") -> Decision:
        """Record a user or assistant message (a step of its own)."""
        index = self.steps
        decision = self.record_message(role, content)
        return decision or Decision(step=index, turn=self.history.turn)

    def record_message(self, role: str, content: str = "") -> Decision | None:
        """``on_message`` for a caller that needs the decision only when the message raised
        a flag (a replay): ``None`` when it raised nothing."""
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
            self._answered = index
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
        kind = step.kind if step is not None else None  # (callers bring at least one finding)
        flags: list[Flag] = []
        new: list[Flag] = []
        lead: tuple[str, Finding, Action] | None = None
        progress_after = self.history.stretch_start
        # a call issued after a nudge of this stretch was delivered:
        unheeded = step is not None and self.breaker.unheeded(step.call)
        for name, finding in findings:
            rungs = finding.rungs or self._rungs.get(name) or AFTER_RUNGS
            rung, fresh = self.ladder.climb(
                (name, finding.key), index, len(rungs),
                -1 if finding.sticky else progress_after, self.tool_calls,
                issued=step.call if step is not None else None,
                start=1 if unheeded and name != "budget" else 0,
                read_after=self._answered, again=repeated_rungs(rungs),
            )
            rung = min(rung, len(rungs) - 1)  # a condition can move to a shorter ladder
            act = self.policy.action_for(name, rungs[rung])
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
            and self.policy.action_for(lead[0], "stop") in KILL_ACTIONS
        ):  # a nudge of a detector that may end the run: now it must be heeded
            self.breaker.nudged(max(self.tool_calls, step.call))  # (the nudged call included)
        name, finding, action = lead
        decision = Decision(
            step=index,
            action=action,
            flags=tuple(flags),
            new_flags=tuple(new),
            reason=name,
            correction=finding.message,
            diagnostic=self._diagnostic(name, finding, action, step),
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
        self, name: str, finding: Finding, action: str, step: StepView | None
    ) -> dict[str, Any]:
        diagnostic: dict[str, Any] = {
            "terminated_by" if action == "stop" else "decided_by": (
                finding.stop_reason if action == "stop" else name
            ),
            "action": action,
            "detector": name,
            "kind": finding.kind,
            "evidence": source_of(name, self._evidence(name, finding, step)),
            "step": step.index if step is not None else self.steps,
        }
        if step is not None:
            diagnostic["call"] = step.call
        if step is not None:
            diagnostic.update(tool=step.tool, args=args_preview(step))
            if step.kind is not None:
                diagnostic.update(tool_kind=step.kind, kind_source=step.kind_source or "shape")
        diagnostic.update(finding.details)
        diagnostic.update(
            last_progress_step=self.breaker.last_progress_step,
            no_progress_streak=self.breaker.streak,
            hint=self._hint(),
        )
        return diagnostic

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
