"""``loopscope.episode()``: one agent run, its root span and its guard.

The current episode travels in a ``ContextVar``, so tool calls made inside ``with
loopscope.episode(...)`` (threads started with a copied context and asyncio tasks included)
share one guard. Tool calls outside any episode fall into a process-wide implicit episode
with no root span, which starts afresh every ``IMPLICIT_EPISODE_STEPS`` steps.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    Status,
    StatusCode,
)

from . import conventions as c
from ._config import MODE_CHOICES, settings
from ._errors import LoopDetected, swallow_internal_errors
from .detect import AnswerCheck, Decision, output_hash
from .detect.events import MODES, OUTCOMES
from .detect.steps import MessageStep, feed
from .guard import Guard, applied_action
from .policy_file import recorded

IMPLICIT_EPISODE_STEPS: Final = 10_000

_tracer = trace.get_tracer("loopscope")
_CURRENT: ContextVar[Episode | None] = ContextVar("loopscope_episode", default=None)
_implicit: list[Episode] = []


class Episode:
    """One run of an agent: ``with loopscope.episode(task="...", task_type="lookup") as ep:``
    (``episode`` is this class).

    The root span ``invoke_agent`` carries the outcome, the stop reason, totals, token usage
    and cost. ``task_type`` (lookup, polling, coding, research, transaction, other) picks the
    no-progress breaker's K. ``mode`` overrides the process's guard mode for this run;
    ``clock`` (seconds since the run started) replaces the wall clock, for replays and
    tests: the guard judges by it, and the run's spans are stamped with it (a replay of the
    spans judges the times the guard judged). ``label`` is the run's ground truth when it is
    known, as in scripted and evaluation runs (the Episode format's ``{"loop": bool, "kind":
    ..., "first_loop_step": ...}``): it goes on the root span, and the collector's
    loop-detection and false-kill rates use it as the *scenario* label source. Works with
    ``async with`` too.

    Attributes:
        id: The episode id (``loopscope.episode.id`` on every span of the run).
        guard: The guard applying the detection core to this run's tool calls.
        stop: The ``LoopDetected`` that ended the run, if one did.
    """

    def __init__(
        self,
        task: str = "",
        *,
        task_type: str | None = None,
        agent_name: str | None = None,
        episode_id: str | None = None,
        conversation_id: str | None = None,
        mode: str | None = None,
        clock: Callable[[], float] | None = None,
        label: Mapping[str, Any] | None = None,
    ) -> None:
        config = settings()
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode must be {MODE_CHOICES}, not {mode!r}")
        self._label = c.label_attributes(label)
        self.id = episode_id or uuid.uuid4().hex
        self.task = task
        self.task_type = task_type
        self.agent_name = agent_name
        self.conversation_id = conversation_id or self.id
        """``gen_ai.conversation.id`` of every span of the run: the one given, else the id."""
        self.mode = mode or config.mode
        self.capture_content = config.capture_content
        self.max_content_chars = config.max_content_chars
        self.guard = Guard(
            mode=self.mode,
            policy=config.policy,
            episode_id=self.id,
            task_type=task_type,
            task=task,
            clock=clock,
        )
        self.outcome: str | None = None
        self.stop: LoopDetected | None = None
        self._stop_next: LoopDetected | None = None
        """A stop decided on a message (a monologue its warnings did not end): a message
        cannot be taken back, so it is raised at the next model turn or tool call."""
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0
        self.model_turns = 0
        self._model_started_ns: int | None = None
        """When the model turn being made began (``before_model_call``): its span's start."""
        self._root = True
        """Whether entering the run opens its root span (not for the implicit episode)."""
        self._span: Span | None = None
        self._anchor: SpanContext | None = None
        self._token: Token[Episode | None] | None = None
        self._span_token: Any = None

    def parent_context(self) -> Context | None:
        """The context a span of this episode starts in (None: the current one).

        Every span of one episode shares its trace, so a load balancer that routes by trace
        id (the OpenTelemetry Collector's ``load_balancing`` exporter, docs/deploy.md) sends
        the whole episode to one collector: a span started outside the root's trace (a tool
        call on another thread, where the context did not follow) is put under the root; in
        an episode without a root span (the implicit one), with no current span, the first
        span is the trace's root and the later ones its children (``started``). An implicit
        episode inside the caller's own spans stays in their traces: route those by
        ``loopscope.episode.id``.
        """
        current = trace.get_current_span().get_span_context()
        if self._span is not None:
            root = self._span.get_span_context()
            if current.is_valid and current.trace_id == root.trace_id:
                return None
            return trace.set_span_in_context(self._span)
        if current.is_valid or self._anchor is None:
            return None
        return trace.set_span_in_context(NonRecordingSpan(self._anchor))

    def started(self, span: Span) -> None:
        """``span`` of this episode was started in ``parent_context()``: the first one of an
        episode without a root, outside any span, anchors the episode's trace."""
        if (self._span is None and self._anchor is None
                and not trace.get_current_span().get_span_context().is_valid):
            self._anchor = span.get_span_context()

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> Episode:
        with swallow_internal_errors("starting an episode"):
            if self._root:
                attributes: dict[str, Any] = {
                    c.GEN_AI_OPERATION_NAME: c.OP_INVOKE_AGENT,
                    c.EPISODE_ID: self.id,
                    c.GUARD_MODE: self.mode,
                    c.GUARD_POLICY: recorded(self.guard.monitor.policy),
                    c.GEN_AI_CONVERSATION_ID: self.conversation_id,
                    **self._label,
                }
                if self.agent_name:
                    attributes[c.GEN_AI_AGENT_NAME] = self.agent_name
                if self.task_type:
                    attributes[c.TASK_TYPE] = self.task_type
                if self.task and self.capture_content:
                    attributes[c.TASK] = self.task[: self.max_content_chars]
                name = (
                    f"{c.OP_INVOKE_AGENT} {self.agent_name}"
                    if self.agent_name
                    else (c.OP_INVOKE_AGENT)
                )
                self._span = _tracer.start_span(name, attributes=attributes,
                                                start_time=self.guard.span_ns())
                self._span_token = trace.use_span(self._span, end_on_exit=False)
                self._span_token.__enter__()
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None
        with swallow_internal_errors("ending an episode"):
            self._finish(exc)

    async def __aenter__(self) -> Episode:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)

    def _finish(self, exc: BaseException | None) -> None:
        if isinstance(exc, LoopDetected):
            self.stop = exc
        if self.stop is not None:
            stop_reason = self.stop.stop_reason
        elif exc is None:
            stop_reason = "completed"
        elif isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "CancelledError":
            stop_reason = "aborted"
        else:
            stop_reason = "fatal"
        if self.outcome is None and stop_reason != "completed":
            self.outcome = "failure"
        span = self._span
        if span is None:
            return
        summary = self.guard.monitor.summary()
        attributes: dict[str, Any] = {
            c.OUTCOME: self.outcome or "unknown",
            c.STOP_REASON: stop_reason,
            c.TOOL_CALLS: summary["tool_calls"],
            c.NO_PROGRESS_STEPS: summary["no_progress_steps"],
            c.FLAG_COUNT: summary["flags"],
            c.MODEL_TURNS: self.model_turns,
            c.GEN_AI_USAGE_INPUT_TOKENS: self.input_tokens,
            c.GEN_AI_USAGE_OUTPUT_TOKENS: self.output_tokens,
            c.COST_USD: round(self.cost_usd, 6),
        }
        would_stop = self.guard.monitor.stopped
        if self.stop is not None:
            attributes[c.STOP_DIAGNOSTIC] = json.dumps(self.stop.diagnostic, default=str)
        elif would_stop is not None and would_stop.diagnostic:
            attributes[c.STOP_DIAGNOSTIC] = json.dumps(would_stop.diagnostic, default=str)
        span.set_attributes(attributes)
        if exc is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:200]))
        if self._span_token is not None:
            self._span_token.__exit__(None, None, None)
        span.end(end_time=self.guard.span_ns())

    # -- what the agent reports -------------------------------------------------------------

    def set_outcome(self, outcome: str) -> None:
        """Say whether the task was achieved: ``success``, ``failure`` or ``unknown``.

        A run that ends without error is *completed*, which is not the same as successful
       : only the agent, or a check of the result, can say.
        """
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, not {outcome!r}")
        self.outcome = outcome

    def before_model_call(self) -> None:
        """Check the model-turn, token, cost and wall-clock budgets before calling the model.

        Raises:
            LoopDetected: a budget is exhausted and the mode is ``enforce``.
        """
        self.raise_pending_stop()
        self._model_started_ns = self.guard.span_ns() or time.time_ns()
        decision = None
        with swallow_internal_errors("checking a model-call budget"), self.guard.lock:
            decision = self.guard.monitor.before_model_call(self.guard.now())
        if decision is not None and applied_action(self.mode, decision) == "stop":
            self.stop = LoopDetected(
                decision.correction or "budget exhausted",
                diagnostic=dict(decision.diagnostic or {}),
            )
            raise self.stop

    def record_model_call(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = None,
        model: str | None = None,
        span: bool = True,
    ) -> None:
        """Count one model turn with its token usage and cost (for budgets and the root span).

        The turn becomes a ``chat {model}`` span (GenAI conventions: ``gen_ai.operation.name``
        ``chat``, the usage, ``loopscope.cost_usd``) from ``before_model_call`` to now, so the
        trace view shows each model call's duration, tokens and cost. ``span=False`` when
        another instrumentation (an OpenAI or Anthropic client's) already records the call.
        """
        with swallow_internal_errors("recording a model call"):
            self.model_turns += 1
            self.input_tokens += max(int(input_tokens), 0)
            self.output_tokens += max(int(output_tokens), 0)
            cost = float(cost_usd) if cost_usd is not None else 0.0
            self.cost_usd += max(cost, 0.0)
            with self.guard.lock:
                self.guard.monitor.after_model_call(tokens=input_tokens + output_tokens, cost=cost)
            if model and self._span is not None:
                self._span.set_attribute(c.GEN_AI_REQUEST_MODEL, model)
            started, self._model_started_ns = self._model_started_ns, None
            if span:
                self._model_span(started, int(input_tokens), int(output_tokens), cost_usd, model)

    def _model_span(self, started_ns: int | None, input_tokens: int, output_tokens: int,
                    cost_usd: float | None, model: str | None) -> None:
        attributes: dict[str, Any] = {
            c.GEN_AI_OPERATION_NAME: c.OP_CHAT,
            c.EPISODE_ID: self.id,
            c.GEN_AI_CONVERSATION_ID: self.conversation_id,
            c.GEN_AI_USAGE_INPUT_TOKENS: max(input_tokens, 0),
            c.GEN_AI_USAGE_OUTPUT_TOKENS: max(output_tokens, 0),
        }
        if model:
            attributes[c.GEN_AI_REQUEST_MODEL] = model
        if cost_usd is not None:
            attributes[c.COST_USD] = max(float(cost_usd), 0.0)
        span = _tracer.start_span(f"{c.OP_CHAT} {model}" if model else c.OP_CHAT,
                                  context=self.parent_context(), kind=trace.SpanKind.CLIENT,
                                  attributes=attributes,
                                  start_time=started_ns or self.guard.span_ns())
        self.started(span)
        span.end(end_time=self.guard.span_ns())

    def record_message(self, role: str, content: str = "") -> Decision | None:
        """Record a user or assistant message; returns the decision (monologue warnings). A
        stop decided here is raised at the next model turn or tool call (in enforce mode).

        The message becomes a ``message {role}`` span (its text only with content capture
        on), so the collector judges the conversation as this guard does."""
        decision = None
        with swallow_internal_errors("recording a message"), self.guard.lock:
            monitor = self.guard.monitor
            index = monitor.steps
            flagged = feed(monitor, MessageStep(role, content, self.guard.now()))
            decision = flagged or Decision(step=index, turn=monitor.history.turn)
            applied = applied_action(self.mode, decision)
            if applied == "stop":
                self.stop_next(LoopDetected(
                    decision.correction or "the same message again",
                    diagnostic=dict(decision.diagnostic or {}),
                ))
            self._message_span(role, content, decision, applied)
        return decision

    def _message_span(self, role: str, content: str, decision: Decision, applied: str) -> None:
        attributes: dict[str, Any] = {
            c.EPISODE_ID: self.id,
            c.GEN_AI_CONVERSATION_ID: self.conversation_id,
            c.MESSAGE_ROLE: role,
            c.MESSAGE_HASH: output_hash(content),
            c.STEP: decision.step,
        }
        if decision.turn:
            attributes[c.TURN] = decision.turn
        if self.capture_content:
            attributes[c.MESSAGE_CONTENT] = content[: self.max_content_chars]
        if decision.flags:
            attributes[c.GUARD_MODE] = self.mode
            attributes[c.GUARD_ACTION] = applied
            attributes[c.GUARD_DECISION] = decision.action
            attributes[c.FLAGS] = [f.detector for f in decision.flags]
            attributes[c.FLAG_KINDS] = [f.kind for f in decision.flags]
        span = _tracer.start_span(f"{c.OP_MESSAGE} {role}", context=self.parent_context(),
                                  attributes=attributes, start_time=self.guard.span_ns())
        self.started(span)
        for name, event in c.evaluation_events(decision.flags):
            span.add_event(name, event)
        span.end(end_time=self.guard.span_ns())

    def stop_next(self, stop: LoopDetected) -> None:
        """Raise ``stop`` at the next model turn or tool call (a stop decided where it cannot
        be raised: on a message, or on a call that failed and raises its own exception)."""
        if self._stop_next is None:
            self._stop_next = stop

    def raise_pending_stop(self) -> None:
        """Raise the stop a message decided, if any (once: it becomes ``stop``).

        Raises:
            LoopDetected: a message's monologue reached its stop rung in enforce mode.
        """
        pending, self._stop_next = self._stop_next, None
        if pending is not None:
            self.stop = pending
            raise pending

    def check_answer(self, text: str) -> AnswerCheck:
        """Apply required-tool rules to a final answer: ``allow``, ``retry`` with a
        correction (up to ``max_corrections`` times), then ``warn`` with a prefixed text."""
        with swallow_internal_errors("checking an answer"), self.guard.lock:
            return self.guard.monitor.check_answer(text)
        return AnswerCheck("allow", text=text)

    def mark_progress(self) -> None:
        """Tell the guard the run just made progress the outputs cannot show."""
        with swallow_internal_errors("marking progress"), self.guard.lock:
            self.guard.monitor.mark_progress()

    def reconcile(self, ref: str, *, found: bool, result: Any = None) -> bool:
        """Settle a write whose result was UNKNOWN (it timed out).

        Args:
            ref: The write's idempotency key (``loopscope.idempotency_key`` on its span) or
                its tool call id.
            found: Whether looking the business record up found it (the write happened).
            result: With ``found``, the record; a retry of the write then returns it
                instead of running again.

        Returns:
            False when ``ref`` names no UNKNOWN write.
        """
        settled = False
        with swallow_internal_errors("reconciling a write"):
            settled = self.guard.reconcile(ref, found=found, result=result)
            span = _tracer.start_span(
                f"reconcile {ref}", context=self.parent_context(),
                start_time=self.guard.span_ns(),
                attributes={
                    c.EPISODE_ID: self.id,
                    c.GEN_AI_CONVERSATION_ID: self.conversation_id,
                    c.RECONCILE_KEY: ref,
                    c.RECONCILE_FOUND: bool(found),
                },
            )
            self.started(span)
            span.end(end_time=self.guard.span_ns())
        return settled


episode = Episode
"""``loopscope.episode(...)`` makes an ``Episode``: the class itself, so its signature is stated
once (``Episode.__init__``)."""


def active_episode() -> Episode | None:
    """The episode in scope (a ``with loopscope.episode(...)`` around this code, in this
    thread or task), or ``None``: the seam the framework integrations use to join a run the
    agent opened, never creating one."""
    return _CURRENT.get()


def current_episode() -> Episode:
    """The episode in scope, or the process-wide implicit one."""
    found = _CURRENT.get()
    if found is not None:
        return found
    if (
        not _implicit
        or _implicit[0].guard.monitor.steps >= IMPLICIT_EPISODE_STEPS
        or (
            _implicit[0].mode != settings().mode
            or _implicit[0].guard.monitor.policy is not settings().policy
        )
    ):
        implicit = Episode()
        implicit._root = False
        _implicit[:] = [implicit]
    return _implicit[0]
