"""One tool call, from the guard's check to the recorded span: the path every call takes.

``@loopscope.tool`` runs every call through a ``ToolCallScope``; custom agent loops and
framework integrations use it directly (``loopscope.tool_call(...)``), pairing start and
finish by tool call id when they happen in different callbacks.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from . import conventions as c
from ._errors import LoopDetected, swallow_internal_errors
from .detect import Decision, ToolCall, ToolResult
from .detect.events import KILL_ACTIONS, Action
from .detect.events import Status as ToolStatus
from .detect.fingerprint import output_hash, output_text
from .episode import Episode, current_episode
from .guard import applied_action, stronger, with_correction

_tracer = trace.get_tracer("loopscope")
_ID_PREFIX = os.urandom(4).hex()
_ids = itertools.count(1)
logger = logging.getLogger("loopscope")


def is_timeout(exc: BaseException) -> bool:
    """A timeout (the call may have happened) rather than a failure."""
    return isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__


class ToolCallScope:
    """Guards and records one tool call.

    Usage in a custom loop::

        with loopscope.tool_call("search", {"q": q}, call_id=call.id, kind="read") as call:
            result = call.result if call.blocked else call.finish(search(q))

    ``start()`` asks the guard first: in enforce mode a block sets ``blocked`` and ``result``
    (the correction plus the cached result; the tool must not run), and a stop raises
    ``LoopDetected`` (also a stop decided on the blocked call itself). ``finish(result)``
    records the output and returns what the model should see (with a correction in front in
    warn and enforce modes); a stop there raises ``LoopDetected`` after the output is
    recorded. ``fail(exc)`` records an exception (a timeout makes a write UNKNOWN); a stop
    decided on the failure is raised at the next model turn or tool call. Leaving the
    ``with`` block with an exception calls ``fail`` for you.
    """

    def __init__(
        self,
        tool: str,
        args: Any = None,
        *,
        kind: str | None = None,
        call_id: str | None = None,
        intent: str | None = None,
        idempotency_key: str | None = None,
        reconciles: str | None = None,
        found: bool | None = None,
        deadline_s: float | None = None,
        episode: Episode | None = None,
        attributes: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
    ) -> None:
        self.tool = tool
        self.args = args
        self.kind = kind
        self.call_id = call_id or f"call_{_ID_PREFIX}{next(_ids):x}"
        self.intent = intent
        self.idempotency_key = idempotency_key
        self.reconciles = reconciles
        self.found = found
        self.deadline_s = deadline_s
        self.episode = episode
        self.attributes = dict(attributes or {})
        self.annotations = annotations
        self.blocked = False
        self.result: Any = None
        self.finished = False
        self._span: Span | None = None
        self._use: Any = None
        self._before: Decision | None = None
        self._applied: Action = "allow"
        self._signature = ""
        self._kind: str | None = None

    # -- context manager sugar --------------------------------------------------------------

    def __enter__(self) -> ToolCallScope:
        self.start()
        self.activate()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if not self.finished:
            if exc is not None and not isinstance(exc, LoopDetected):
                self.fail(exc)
            elif exc is None:
                self.finish(None)
        self._detach()

    async def __aenter__(self) -> ToolCallScope:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)

    def activate(self) -> None:
        """Make the tool span current, so spans the tool makes become its children.

        ``start()`` alone does not, so calls started side by side stay siblings; the
        decorator and the ``with`` form activate the span around the tool's own work.
        """
        if self._span is not None and self._use is None and not self.finished:
            with swallow_internal_errors("activating a tool span"):
                self._use = trace.use_span(self._span, end_on_exit=False)
                self._use.__enter__()

    def _detach(self) -> None:
        if self._use is not None:
            use, self._use = self._use, None
            with swallow_internal_errors("detaching a tool span"):
                use.__exit__(None, None, None)

    # -- the call ---------------------------------------------------------------------------

    def start(self) -> ToolCallScope:
        """Open the span and ask the guard; may block (enforce) or raise ``LoopDetected``."""
        stop: LoopDetected | None = None
        with swallow_internal_errors("checking a tool call"):
            stop = self._start()
        if stop is not None:
            raise stop
        return self

    def _start(self) -> LoopDetected | None:
        episode = self.episode = self.episode or current_episode()
        try:
            episode.raise_pending_stop()
        except LoopDetected as stop:  # a message's stop: the call does not run
            return stop
        guard = episode.guard
        args = self.args if self.args is not None else {}
        self._signature, args_text = guard.monitor.signature_of(self.tool, args)
        call = ToolCall(
            tool=self.tool,
            args=args,
            signature=self._signature,
            args_text=args_text,
            call_id=self.call_id,
            kind=self.kind,  # type: ignore[arg-type]
            t=guard.now(),
            intent=self.intent,
            idempotency_key=self.idempotency_key,
            reconciles=self.reconciles,
            found=self.found,
            deadline_s=self.deadline_s,
            annotations=self.annotations,
        )
        with guard.lock:
            decision = self._before = guard.monitor.before_call(call)
            ordinal = guard.monitor.tool_calls  # this call's, as its diagnostics count it
        self._kind = decision.kind
        self._applied = applied_action(episode.mode, decision)
        if decision.action == "stop":
            _note_would_be_stop(episode, decision, self._applied)
        deadline = decision.deadline_s or self.deadline_s
        attributes: dict[str, Any] = {
            **self.attributes,
            **c.tool_span_attributes(
                tool=self.tool, episode_id=episode.id, step=decision.step,
                signature=self._signature, args_text=args_text, call=ordinal,
                arguments=args_text[: episode.max_content_chars]
                if episode.capture_content else None,
                call_id=self.call_id, kind=self._kind,
                kind_source=decision.kind_source or "shape", turn=decision.turn,
                deadline_s=deadline,
                deadline_stated=decision.deadline_stated or decision.deadline_s is None,
                intent=decision.intent or self.intent, reconciles=self.reconciles,
                found=self.found, idempotency_key=decision.idempotency_key),
            c.GEN_AI_CONVERSATION_ID: episode.conversation_id,
            c.GUARD_MODE: episode.mode,
        }
        if episode.agent_name:  # a run still in flight is named before its root span ends
            attributes[c.GEN_AI_AGENT_NAME] = episode.agent_name
        self._span = _tracer.start_span(f"{c.OP_EXECUTE_TOOL} {self.tool}",
                                        context=episode.parent_context(), attributes=attributes,
                                        start_time=guard.span_ns())
        episode.started(self._span)
        if self._applied not in KILL_ACTIONS:
            return None
        found, cached = guard.cached(self._signature, decision.idempotency_key)
        correction = decision.correction or "blocked by loopscope"
        if self._applied == "block":
            self.blocked = True
            self.result = with_correction(cached, correction, blocked=True) if found else correction
            return self._record_blocked(self.result)  # (a stop decided on the skipped call)
        # A stop before the call: record what the model is handed, then stop.
        self.result = with_correction(cached, correction, blocked=True) if found else correction
        self._record_blocked(self.result)
        episode.stop = LoopDetected(
            correction, diagnostic=dict(decision.diagnostic or {}), output=self.result
        )
        return episode.stop

    def _record_blocked(self, shown: Any) -> LoopDetected | None:
        return self._complete(
            ToolResult(output=output_text(shown), status="blocked", call_id=self.call_id), shown
        )[1]

    def finish(self, result: Any) -> Any:
        """Record the tool's result; returns what the model should see."""
        if self.finished:
            return self.result
        shown, stop = result, None
        with swallow_internal_errors("recording a tool result"):
            text = output_text(result)
            shown, stop = self._complete(
                ToolResult(output=text, status="ok", call_id=self.call_id), result
            )
        self._detach()
        if stop is not None:
            raise stop
        return shown

    def fail(self, exc: BaseException) -> None:
        """Record that the tool raised ``exc`` (a timeout: status ``timeout``)."""
        if self.finished:
            return
        with swallow_internal_errors("recording a tool failure"):
            status: ToolStatus = "timeout" if is_timeout(exc) else "error"
            text = f"{type(exc).__name__}: {exc}"
            if self._span is not None:
                self._span.record_exception(exc)
                self._span.set_status(Status(StatusCode.ERROR, text[:200]))
            self._complete(ToolResult(output=text, status=status, call_id=self.call_id), None)
        self._detach()

    def _complete(self, outcome: ToolResult, result: Any) -> tuple[Any, LoopDetected | None]:
        self.finished = True
        episode = self.episode
        if episode is None or self._before is None:
            return result, None
        guard = episode.guard
        with guard.lock:
            after = guard.monitor.after_call(outcome)
            if outcome.status == "ok":
                guard.remember(
                    self._signature,
                    after.idempotency_key if self._kind == "write" else None,
                    result,
                )
        applied = applied_action(episode.mode, after)
        if after.action == "stop":
            _note_would_be_stop(episode, after, applied)
        shown: Any = result
        stop: LoopDetected | None = None
        if outcome.status == "ok":
            if applied != "allow":
                correction = after.correction
            elif self._applied == "warn":
                correction = self._before.correction
            else:
                correction = None
            if correction:
                shown = with_correction(result, correction)
            if applied == "stop":
                episode.stop = stop = LoopDetected(
                    after.correction or "stopped",
                    diagnostic=dict(after.diagnostic or {}),
                    output=shown,
                )
        elif applied == "stop":  # decided on a skipped or failed call: the run ends all the same
            decided = LoopDetected(after.correction or "stopped",
                                   diagnostic=dict(after.diagnostic or {}), output=result)
            if outcome.status == "blocked":
                episode.stop = stop = decided  # (raised by ``start``: the call was skipped)
            else:  # the tool's own exception goes up now; the stop at the next turn or call
                episode.stop_next(decided)
        self.result = shown
        span = self._span
        if span is not None:
            self._set_result_attributes(span, outcome, after, applied, episode)
            span.end(end_time=guard.span_ns())
        return shown, stop

    def _set_result_attributes(
        self, span: Span, outcome: ToolResult, after: Decision, applied: Action,
        episode: Episode,
    ) -> None:
        before = self._before
        assert before is not None
        flags = [*before.flags, *after.flags]
        decided = stronger(before.action, after.action)
        attributes: dict[str, Any] = {
            **c.tool_result_attributes(
                status=outcome.status,
                output_hash=before.cached_output_hash
                if outcome.status == "blocked" and before.cached_output_hash
                else output_hash(outcome.output or ""),
                output=outcome.output,
                result=outcome.output[: episode.max_content_chars]
                if episode.capture_content and outcome.output is not None else None),
            c.PROGRESS: after.progress or "none",
            c.STREAK: after.streak,
            c.GUARD_ACTION: stronger(self._applied, applied),
            c.GUARD_DECISION: decided,
        }
        if flags:
            for name, event in c.evaluation_events(flags):
                span.add_event(name, event)
            attributes[c.FLAGS] = [f.detector for f in flags]
            attributes[c.FLAG_KINDS] = [f.kind for f in flags]
            lead = before if before.action == decided and before.action != "allow" else after
            attributes[c.GUARD_REASON] = lead.reason
            if lead.correction:
                attributes[c.GUARD_CORRECTION] = lead.correction[:1000]
        if after.write_status:
            attributes[c.WRITE_STATUS] = after.write_status
        if after.reconciled:
            attributes[c.RECONCILED] = list(after.reconciled)
        span.set_attributes(attributes)


def _note_would_be_stop(episode: Any, decision: Any, applied: str) -> None:
    """Observe and warn mode only record a would-be stop on the span (and spans leave in
    batches); say it once per run in the agent's own log too, so a person running locally
    sees what enforce mode would have done."""
    if decision.action != "stop" or applied == "stop" or getattr(episode, "_would_stop_noted",
                                                                 False):
        return
    episode._would_stop_noted = True
    diagnostic = decision.diagnostic or {}
    hint = diagnostic.get("hint") or decision.correction or ""
    where = (f"call {diagnostic['call']}" if "call" in diagnostic
             else f"step {decision.step}")  # (a budget before a model turn has no call)
    logger.warning("loopscope: %s mode: enforce would stop run %s at %s (%s). %s",
                   episode.mode, episode.id, where, decision.stop_reason or decision.reason, hint)


def tool_call(tool: str, args: Any = None, **options: Any) -> ToolCallScope:
    """Guard and record one tool call of a custom agent loop (see ``ToolCallScope``).

    Options: ``episode`` (the run it belongs to; default: the one in scope when the call
    starts), ``kind`` (read, write, poll), ``call_id`` (pairs start and finish; generated if
    absent), ``intent="duplicate"`` (an intended repeat of a write), ``idempotency_key``,
    ``reconciles`` and ``found`` (this read settles an UNKNOWN write), ``deadline_s`` (polls),
    ``attributes`` (extra span attributes set when the span starts, blocked calls included;
    loopscope's own keys win), ``annotations`` (the tool's MCP annotations, ``readOnlyHint``
    and the rest: its kind when ``kind`` is not given).
    """
    return ToolCallScope(tool, args, **options)
