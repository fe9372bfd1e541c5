"""What kind of call a tool call is (read, write, poll, ...) and how that is known.

Declared by the call or the policy; else inferred from the tool's MCP annotations, HTTP
method or name (``kinds.infer_kind``), where a write or a poll counts at once and a read gives
way to the evidence of polling; else judged by shape (``None``). ``CallKinds`` holds one
episode's inferences (bounded) and reads its history and write ledger for the evidence;
``judge_by_answer`` reads what a call answered (a poll by shape, a write by outcome).
"""

from __future__ import annotations

from typing import Any

from .events import KindSource, StepView, ToolCall
from .history import History, SignatureStats
from .kinds import confirms_change, infer_kind
from .limits import READINGS_KEPT
from .policy import Policy
from .write_ledger import WriteLedger


class CallKinds:
    """The kinds of one episode's calls."""

    __slots__ = ("_history", "_inferred", "_policy", "_writes")

    def __init__(self, policy: Policy, history: History, writes: WriteLedger) -> None:
        self._policy = policy
        self._history = history
        self._writes = writes
        self._inferred: dict[str, tuple[Any, KindSource | None]] = {}

    def declared(self, call: ToolCall) -> Any:
        """The kind the call or the configuration declares, if any (not judged by its look)."""
        if call.kind is not None:
            return call.kind
        declared = self._policy.tool_kinds.get(call.tool)
        if declared is not None:
            return declared
        return "poll" if call.tool in self._policy.poll_tools else None

    def of(self, call: ToolCall, signature: str) -> tuple[Any, KindSource | None]:
        """The call's kind and where it came from: declared; else inferred from the tool's
        MCP annotations, HTTP method or name (``kinds.infer_kind``), where a write or a poll
        counts at once and a read gives way to the evidence of polling; else ``None``
        (judged by shape)."""
        declared = self.declared(call)
        if declared is not None:
            return declared, "declared"
        key = signature if not call.annotations else f"{signature}\x00{sorted(call.annotations.items())!r}"
        inferred = self._inferred.get(key)
        if inferred is None:
            if len(self._inferred) >= READINGS_KEPT:
                self._inferred.clear()
            inferred = self._inferred[key] = (
                infer_kind(call.tool, call.args, call.annotations) or (None, None)
            )
        if inferred[0] == "write" and self._paced_change(call, signature):
            return "poll", None  # a "write" by its name, asked again after a wait, answering
            # something new each time: it polls (a keystroke sent to a running process)
        if inferred[0] in ("write", "poll"):
            return inferred
        if self._writes.done(signature):
            return "write", "outcome"  # it confirmed doing something this turn: a write again
        if self._polled(call, signature):
            return "poll", None
        return inferred

    def _paced_change(self, call: ToolCall, signature: str) -> bool:
        """Whether the same call was asked again after a real wait (``poll_pace_s``) and its
        answers have changed: the shape of a poll, whatever its name says."""
        stats = self._history.stats(signature)
        return (stats is not None and len(stats.infos) > 1 and stats.last_status == "ok"
                and call.t - stats.last_t >= self._policy.poll_pace_s)

    def _polled(self, call: ToolCall, signature: str) -> bool:
        """Whether an undeclared call is a poll by evidence: its output has changed, it is
        asked again after a real wait, or its last answer was a status on its way."""
        stats = self._history.stats(signature)
        if stats is None:
            return False
        if len(stats.infos) > 1:
            return True  # same call, its output has changed: polling by shape
        if stats.last_epoch != self._history.epoch:
            return False  # asked again after a write or an edit: checking the change
        gap = call.t - self._history.busy_until(call.t, stats.last_t)
        if gap >= self._policy.poll_pace_s and (
            stats.last_status == "ok" or stats.last_waiting
        ):
            return True  # asked again after a real wait for a result (or "still waiting"),
            # not after other work that took the time
        return stats.transitional  # a status on its way: its state can still change


def judge_by_answer(step: StepView, stats: SignatureStats | None) -> bool:
    """Judge a completed call's kind by what it answered (``step.output``): a read or an
    undeclared call whose answer changed polls (by shape); an undeclared call that says it
    did something was a write (by outcome: returns ``True``). ``stats`` are its signature's
    before it was appended."""
    if (
        step.kind in (None, "read")
        and step.kind_source != "declared"
        and step.status == "ok"
        and stats is not None
        and stats.infos
        and step.info not in stats.infos
    ):
        step.kind = "poll"  # same call, what it says has changed: polling by shape
        step.kind_source = None
    text = step.output
    if (
        step.kind is None
        and step.status == "ok"
        and text is not None
        and not step.wait
        and confirms_change(text, step.words)
    ):  # nothing told its kind, and it says it did something: it was a write
        step.kind = "write"
        step.kind_source = "outcome"
        return True
    return False
