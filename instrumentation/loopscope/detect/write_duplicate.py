"""Write duplicate: a write that would repeat one already done, or retry one whose result is
UNKNOWN, read from the write ledger (``write_ledger``)."""

from __future__ import annotations

from typing import Final

from .base import BEFORE_RUNGS, Finding, args_preview
from .events import StepView
from .fingerprint import output_hash
from .history import History
from .limits import NAMING_CHARS, SHOWN_CHARS
from .output_stagnation import phrase, values_of
from .policy import Policy
from .texts import loose_text
from .writes import DECLARED


class WriteDuplicate:
    """A write that would repeat one already done, or retry one whose result is UNKNOWN.

    - A retry of an UNKNOWN write (it timed out) under a key the ledger derived is blocked at
      once until the record is looked up; under the caller's own key it is safe (the
      provider deduplicates) and passes.
    - Identical arguments in a new step of the same turn, with nothing new changed since the
      last success (``WriteLedger.unchanged_since``; for a write known only by its outcome,
      a click that answered "Post successful", no call since that was not made before, and
      its first redo is judged once it has answered: ``after``), are a sign of a duplicate
      side effect, unless declared (``intent="duplicate"``), asked for by the task or the latest
      user turn ("create three identical tickets", "send it again"), or an edit (edits
      and their reverts are ``EditRevert``'s). The second is a warning; a third means the
      warning was ignored and climbs, even when each write created a new record (that is
      the duplicate side effect itself); a new user turn starts again. A write whose last
      answer was empty showed no effect to repeat (``git add -A`` again): the repeat and
      cycle rules judge it.
    """

    name = "write_duplicate"
    kinds = ("write_duplicate",)
    rungs = BEFORE_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._redone: set[str] = set()
        """Writes known only by their outcome whose redo was judged a duplicate (``after``)."""

    def before(self, history: History, candidate: StepView) -> Finding | None:
        key = candidate.idempotency_key
        if candidate.kind != "write" or key is None:
            return None
        ledger = history.writes
        record = ledger.record(key)
        if record is not None and record.state == "unknown" and not record.caller_key:
            return Finding(
                kind="write_duplicate",
                message=(
                    f"{candidate.tool} failed at step {record.step} without a clear answer (a "
                    "timeout, a dropped connection, a 5xx); its result is UNKNOWN, not failed: "
                    f"it may have happened. Look the record up first (reconcile key {key}) and "
                    "retry only if it did not happen."
                ),
                key=key,
                details={"tool": candidate.tool, "idempotency_key": key, "state": "unknown"},
                rungs=("block", "block", "stop"),
                evidence=("outcome:timeout" if record.timed_out else "outcome:parsed",),
            )
        if record is not None and record.caller_key:
            return None  # a retry under the caller's key: the provider answers it once
        happened = ledger.found(candidate.signature)
        if happened is not None and candidate.intent != "duplicate":
            return Finding(
                kind="write_duplicate",
                message=(
                    f"{candidate.tool} {args_preview(candidate)} had an unknown outcome at step "
                    f"{happened.step}, and looking it up found that it happened. Do not run "
                    "it again: use the record that exists."
                ),
                key=happened.key,
                details={"tool": candidate.tool, "idempotency_key": happened.key,
                         "state": "found"},
                rungs=("block", "block", "stop"),
            )
        done = _redone(history, candidate)
        if not done:
            return None
        if candidate.kind_source == "outcome" and candidate.signature not in self._redone:
            return None  # (its first redo is judged by its answer: ``after``)
        if candidate.output_hash == _SILENT:
            return None  # (it answered nothing: no side effect shown to repeat)
        stats = history.stats(candidate.signature)
        return _duplicate(candidate, done, stats is not None and stats.answers_vary)

    def after(self, history: History, step: StepView) -> Finding | None:
        """A write known only by its outcome, redone with nothing new leading to it, whose
        answer says what the last one said, figures aside ("Post successful", the post count
        one higher): the redo was a duplicate. A "Next" clicked through a wizard, whose
        answers are new pages, was not."""
        if step.status != "ok" or step.kind != "write":
            return None
        if step.kind_source != "outcome":
            return _remade(history, step)
        stats = history.stats(step.signature)
        done = _redone(history, step)
        if not done or stats is None or not step.shape or step.shape != stats.last_shape:
            return None
        self._redone.add(step.signature)
        return _duplicate(step, done, stats.answers_vary)

    def new_turn(self) -> None:
        """A new user turn: earlier redos were of another intent."""
        self._redone.clear()


def _remade(history: History, step: StepView) -> Finding | None:
    """A write right after another of the same tool in the same user turn, with other
    arguments (a description reworded), whose answer shows the record it made as the last
    one did — the same once ids and figures are masked, naming a phrase both calls gave (the
    title, not the repository or the channel both write to) — but for its new id: the same
    record made again, in other words."""
    if step.intent == "duplicate" or step.edit is not None or not step.shape:
        return None
    last = history.steps[-1] if history.steps else None
    if (
        last is None
        or last.tool != step.tool
        or last.kind != "write"
        or last.status != "ok"
        or last.signature == step.signature  # (the same arguments: ``before``'s rule)
        or not history.in_turn(last)
        or last.shape != step.shape
        or last.info == step.info  # (no new record: the answer said again, or recased)
        or step.output is None
    ):
        return None
    shown = loose_text(step.output[:SHOWN_CHARS])
    named = [v for v in values_of(step) & values_of(last)
             if len(v) >= NAMING_CHARS and phrase(v) and v in shown]
    if not named:
        return None
    return Finding(
        kind="write_duplicate",
        message=(
            f"{step.tool} {args_preview(step)} made the same record as the call before it "
            f"(step {last.index}), in other words: its answer is the same but for a new id. "
            "That is a duplicate side effect; use the record that exists, and if another one "
            "is really wanted, say so (declare the call intended)."
        ),
        key=f"remade:{step.tool}",
        details={"tool": step.tool, "done_at_step": last.index},
        rungs=("warn", "stop"),
        sticky=True,
        evidence=("calls:different", "effect:shown"),
    )


def _redone(history: History, step: StepView) -> list[int]:
    """The steps at which ``step``'s write already succeeded in this turn, when doing it
    again repeats them: with nothing new changed since (``WriteLedger.unchanged_since``), not
    declared intended, not an edit, and, for a write known only by its outcome (a click on
    "Post"), no call since that was not made before (new text typed into the form makes it
    a new write), and, for a write whose kind was guessed, no other call since that made
    progress (what was learned since may call for it again: a hand-off for the next
    company); else an empty list."""
    ledger = history.writes
    done: list[int] = ledger.done(step.signature)
    if (
        not done
        or step.intent == "duplicate"
        or step.edit is not None
        or not ledger.unchanged_since(step.signature, history.changes)
        or (step.kind_source == "outcome" and history.fresh_at > done[-1])
        or (step.kind_source not in DECLARED and history.stretch_start > done[-1] + 1)
    ):
        return []
    return done


def _duplicate(step: StepView, done: list[int], answers_vary: bool) -> Finding:
    return Finding(
        kind="write_duplicate",
        message=(
            f"{step.tool} {args_preview(step)} was already done at step "
            f"{done[-1]}. Running it again would repeat the side effect. If the user really "
            "wants it again, the call must be declared intended."
        ),
        key=f"dup:{step.signature}",
        details={"tool": step.tool, "idempotency_key": step.idempotency_key,
                 "done_at_step": done[-1]},
        sticky=True,
        evidence=("effect:assumed" if step.output_hash == _SILENT
                  else "effect:varies" if answers_vary else "effect:shown",),
    )


_SILENT: Final = output_hash("")
"""The hash of an empty answer: a write that said nothing showed no effect to repeat."""
