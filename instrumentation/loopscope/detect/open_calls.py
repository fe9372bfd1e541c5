"""The tool calls a monitor has opened and not yet closed.

Opening a call reads what the core knows of it before it runs into the step its detectors
check (``events.StepView``): its signature under the policy, its kind and where that came
from (``call_kinds.CallKinds``), a write's identity and whether repeating it was asked for, a
poll's deadline as the call or the task states it. A result closes its call: they pair by call
id, else the result answers the oldest call still open.
"""

from __future__ import annotations

from typing import Any, Literal

from .call_kinds import CallKinds
from .events import StepView, ToolCall, ToolResult
from .fingerprint import call_signature, canonical_json
from .history import History
from .kinds import is_wait
from .policy import Policy
from .task import TaskDeadline, counted_words, task_deadline
from .texts import loose_text
from .write_ledger import WriteLedger
from .writes import edit_of


class OpenCalls:
    """One episode's calls issued and not yet returned, and how each is read when opened."""

    __slots__ = ("_history", "_kinds", "_open", "_policy", "_task", "_task_deadline", "_writes")

    def __init__(
        self,
        policy: Policy,
        history: History,
        writes: WriteLedger,
        kinds: CallKinds,
        task: str,
    ) -> None:
        self._policy = policy
        self._history = history
        self._writes = writes
        self._kinds = kinds
        self._task = task
        self._task_deadline: TaskDeadline | Literal[False] | None = None  # None: not read yet
        self._open: dict[str, tuple[StepView, ToolCall]] = {}

    def signature_of(self, tool: str, args: Any) -> tuple[str, str]:
        """(signature, canonical argument text) of a call, with volatile keys excluded."""
        args_text = canonical_json(args, exclude=self._policy.volatile_for(tool))
        return call_signature(tool, args_text), args_text

    def step_of(self, call: ToolCall, index: int, ordinal: int) -> StepView:
        """The step the detectors check before ``call`` runs: step ``index`` of the episode,
        its ``ordinal``-th tool call."""
        args_text = call.args_text
        if not args_text and call.args is not None:
            signature, args_text = self.signature_of(call.tool, call.args)
        else:
            signature = call.signature or call_signature(call.tool, args_text)
        history = self._history
        kind, source = self._kinds.of(call, signature)
        stats = history.stats(signature)
        key = intent = deadline = stated = None
        explicit = False
        if kind == "write":
            key = self._writes.key_for(call.tool, call.idempotency_key, call.args, args_text)
            intent = call.intent
            done = len(self._writes.done(signature))
            if intent is None and 0 < done < self._intended_repeats(call.tool, call.args):
                intent = "duplicate"  # the task or the user's latest turn asked for it
        elif kind == "poll":
            stated, explicit = self._deadline_of(call)
            deadline = stated or history.default_deadline_s
        return StepView(
            index=index,
            call=ordinal,
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

    def open(self, step: StepView, call: ToolCall) -> None:
        """``call`` was issued as ``step``: it is open until a result closes it."""
        ref = call.call_id or f"#{step.index}"
        if ref in self._open:  # (a call id used twice at once: its results pair in order)
            ref = f"{ref}#{step.index}"
        self._open[ref] = (step, call)

    def close(self, result: ToolResult) -> tuple[StepView, ToolCall]:
        """The open call ``result`` answers (by call id, else the oldest), as its step and
        the call; raises ``ValueError`` when no call is open."""
        ref = result.call_id if result.call_id in self._open else next(iter(self._open), None)
        if ref is None:
            raise ValueError(f"after_call without an open call (call_id={result.call_id!r})")
        return self._open.pop(ref)

    def new_turn(self) -> None:
        """A new user turn: its deadline is read again from what it says."""
        self._task_deadline = None

    def _deadline_of(self, call: ToolCall) -> tuple[float | None, bool]:
        """A poll's deadline as the call or the task's text states it (read once, when a poll
        needs it), and whether it is an explicit limit (the call's, "give up after 20
        minutes", "until noon") rather than an estimate ("usually takes 10 minutes")."""
        if call.deadline_s:
            return call.deadline_s, call.deadline_stated is not False
        if self._task_deadline is None:
            asked = "\n".join((self._task, *self._history.asked))
            self._task_deadline = task_deadline(asked) or False
        stated = self._task_deadline
        return (stated.seconds, stated.explicit) if stated else (None, False)

    def _intended_repeats(self, tool: str, args: Any) -> int:
        """Identical writes the current turn asks for (read when a write repeats): a number
        of copies, or a number of the things the write's name or arguments count."""
        return self._history.intended_repeats(counted_words(args, tool))
