"""Whether a completed tool call made progress, and which kind.

A poll progresses when its state changes, and is waiting until its deadline; a write when it
acts on something new or says something new; a read when it brings information the episode
has not seen (``information.facts``, ``History.knows``). ``ProgressJudge`` holds one episode's
write targets and reads its history, policy and call kinds.
"""

from __future__ import annotations

from typing import Final

from .call_kinds import CallKinds
from .events import StepView, ToolCall
from .history import History, SignatureStats
from .policy import Policy
from .writes import DECLARED, write_target

CONFLICT_WORDS: Final = frozenset({"already", "exists", "conflict", "409", "duplicate"})
"""Words of a write's answer that say it made no new state ("already exists", 409)."""


class ProgressJudge:
    """The progress of one episode's calls."""

    __slots__ = ("_history", "_kinds", "_policy", "_targets")

    def __init__(self, policy: Policy, history: History, kinds: CallKinds) -> None:
        self._policy = policy
        self._history = history
        self._kinds = kinds
        self._targets: set[str] = set()
        """What successful writes acted on (``writes.write_target``): a write on a new one is
        a new effect, whatever its acknowledgement says."""

    def of(
        self, step: StepView, stats: SignatureStats | None, call: ToolCall
    ) -> str | None:
        """The progress marker of a completed call (``events.PROGRESS_MARKERS``), ``waiting``
        or ``new_action`` (``breaker.NEUTRAL_MARKERS``), or ``None``: no progress. ``stats`` are its
        signature's before it was appended."""
        if step.wait:
            return "waiting"  # sleeping between polls or retries: neither progress nor not
        words = step.words
        if step.kind == "poll" and stats is not None and step.status in ("ok", "error"):
            if (
                step.output_hash != stats.last_output
                and (step.info != stats.last_info or step.figures != stats.last_figures)
                and (words is None or hash(words) != stats.last_words)
                and not (
                    (step.stuck in ("container", "stalled") or step.status == "error")
                    and step.shape == stats.last_shape
                )
            ):  # (a failed state whose restart count or request id moves has not changed,
                # nor a running one whose progress figures stand still)
                return "state_change"  # (a poll may answer "not done yet" as an error)
            declared = self._kinds.declared(call) == "poll"
            return "waiting" if self._waiting(step, stats, declared) else None
        if step.status != "ok":
            return None  # blocked, failed or timed out: nothing learned
        if step.kind == "write":
            if words and not CONFLICT_WORDS.isdisjoint(words):
                return None  # "already exists", 409: no new state
            known = step.facts is not None and self._history.knows(step.facts)
            if stats is None or stats.last_status != "ok":  # a write not done before
                target = write_target(step.args, step.args_text,
                                      paths=step.kind_source in DECLARED)
                if target and target not in self._targets:  # (the file a declared write
                    # names is its target: a codemod run file by file makes new effects)
                    self._targets.add(target)
                    return "write_ok"  # on something new ("Message sent." to the next person)
                return None if known else "write_ok"  # (a reworded commit: "nothing to commit")
            if step.info not in stats.infos and not known:
                return "write_ok"  # the same write again, and it says something new
            return None  # the same write, the same answer: no new state
        new_call = not self._history.asked_before(step)
        if (words is not None and not words) or step.negative:
            return "new_action" if new_call else None  # nothing found: exploring at best
        same = step.same_info
        if (
            step.output_hash in self._history.seen_outputs
            or (step.facts is not None and self._history.knows(step.facts))
            or (same and any(s.status == "ok" and s.index in same for s in self._history.steps))
        ):
            if new_call and words is not None and len(words) <= self._policy.ack_max_words:
                return "new_action"  # a new request answered "done", "OK"
            if stats is not None and stats.last_status in ("error", "timeout"):
                return "new_action"  # it failed last time and now answers: a retry that worked
            return None
        if step.markers and "cursor_advance" in step.markers:
            return "cursor_advance"
        return "new_info"

    def _waiting(self, step: StepView, stats: SignatureStats, declared: bool) -> bool:
        """An unchanged poll is waiting until its deadline when it is declared a poll; an
        undeclared one needs the evidence: asked again after a real wait (``poll_pace_s``),
        or a status on its way asked at a pace (``poll_min_interval_s``)."""
        if not declared:
            gap = step.start - self._history.busy_until(step.start, stats.last_t)
            paced = gap >= self._policy.poll_pace_s or (
                stats.transitional and (gap == 0 or gap >= self._policy.poll_min_interval_s)
            )
            if not paced:
                return False  # a fixed answer asked again at once, or hammering
        deadline = step.deadline_s or self._history.default_deadline_s
        return self._history.waited(stats, step.deadline_stated, step.t) <= deadline
