"""Output stagnation and parameter jitter: different calls, the same answer (seed 002 §3.2).

Every fingerprint differs (offsets 0,1,0,1; tiny query edits; another tool) yet the output is
the same or nearly the same, so the agent learns nothing. Same tool → ``param_jitter``;
several tools → ``output_stagnation``. Counting is progress-first: only calls inside the
current no-progress stretch, plus the one that first brought the answer.

Three shapes are told apart, because only one of them is a loop: *jitter* revisits arguments
(an offset back and forth, the same request reworded) and climbs the ladder; a *sweep* names
something new in every call (another store, another service) and gets the same answer, which
is exploring and raises nothing; anything in between is a warning only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from .base import AFTER_RUNGS, WARN_RUNGS, Finding
from .events import Action, StepView
from .fingerprint import arg_values, is_refusal, similar
from .history import History
from .policy import Policy


def same_info_indexes(
    step: StepView, others: Iterable[StepView], similarity: float
) -> frozenset[int]:
    """Indexes of ``others`` whose output carried the same information as ``step``'s: the
    same output, the same facts (``StepView.info``), or near-identical words.

    The monitor calls this once per step over the window and shares the result with the
    detectors. Outputs with no words at all (``""``, ``[]``) carry no information to share.
    """
    words, digest, info = step.words, step.output_hash, step.info
    if words is not None and not words:
        return frozenset()
    found = []
    for other in others:
        theirs = other.words
        if theirs is not None and not theirs:
            continue
        if other.output_hash == digest or (info and other.info == info) or (
            words is not None and theirs is not None and similar(words, theirs, similarity)
        ):
            found.append(other.index)
    return frozenset(found)


def nudged(steps: list[StepView]) -> bool:
    """Whether some two of ``steps`` ask one tool the same thing: equal loosened arguments (a
    revisit like offsets 0, 1, 0; a rewording in case, spacing or punctuation only)."""
    asked = [s.loose for s in steps]
    return len(set(asked)) < len(asked)


def sweep(steps: list[StepView]) -> bool:
    """Whether every call after the first names something no earlier one did (another store,
    another service, another route): different questions that happen to get one answer."""
    seen = set(values_of(steps[0]))
    for step in steps[1:]:
        values = values_of(step)
        if values <= seen:
            return False
        seen |= values
    return True


def values_of(step: StepView) -> frozenset[str]:
    """``step.values``, computed from its canonical arguments the first time it is asked for
    (most steps never join a group of same answers)."""
    if step.values is None:
        try:
            args = json.loads(step.args_text) if step.args_text else None
        except ValueError:
            args = step.args_text
        step.values = arg_values(args)
    return step.values


def judge(group: list[StepView]) -> tuple[Action, ...] | None:
    """The rungs for calls that returned the same information: ``None`` for a sweep (no
    flag) unless the answer is a refusal (a 403 page: other ways of asking for what is
    refused), the full ladder for jitter (revisits), a warning for anything in between."""
    if nudged(group):
        return AFTER_RUNGS
    latest = group[-1]  # the step being checked: its output is still at hand
    if sweep(group) and not is_refusal(latest.output, latest.words):
        return None
    return WARN_RUNGS


class OutputStagnation:
    """Fires when ``stagnation_threshold`` calls of the stretch, with at least two different
    signatures, returned the same information. Writes, polls, failures and outputs of fewer
    than ``stagnation_min_words`` words are not information and never count."""

    name = "output_stagnation"
    rungs = AFTER_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.window = policy.window
        self.threshold = policy.stagnation_threshold
        self.min_words = policy.stagnation_min_words

    def after(self, history: History, step: StepView) -> Finding | None:
        if (not step.same_info and self.threshold > 1) or not self._informative(step):
            return None  # (no earlier step carried this information: nothing to count)
        same: list[StepView] = []
        before_stretch = False
        for s in history.recent(self.window - 1):
            if s.index in step.same_info and self._informative(s):
                if history.in_stretch(s):
                    same.append(s)
                elif history.in_turn(s):
                    before_stretch = True
        count = len(same) + 1 + before_stretch
        signatures = {s.signature for s in same} | {step.signature}
        if count < self.threshold or len(signatures) < 2:
            return None
        group = [*same, step]
        rungs = judge(group)
        if rungs is None:
            return None  # a sweep of different questions: exploring
        tools = {s.tool for s in group}
        kind = "param_jitter" if len(tools) == 1 else "output_stagnation"
        calls = " and ".join(sorted(tools))
        return Finding(
            kind=kind,
            message=(
                f"The last {count} calls to {calls} used different arguments but "
                "returned the same result. Varying the arguments is not producing new "
                "information: use the result you have, try a different approach, or finish."
            ),
            key=kind + ":" + ",".join(sorted(tools)),
            details={"tools": sorted(tools), "count": count, "revisits": rungs is AFTER_RUNGS},
            rungs=rungs,
        )

    def _informative(self, step: StepView) -> bool:
        return (
            step.status == "ok"
            and step.kind not in ("write", "poll")
            and (step.words is None or len(step.words) >= self.min_words)
        )
