"""Fuzzy repeat: long arguments with tiny edits, 3 times (3-gram Jaccard)."""

from __future__ import annotations

from .base import AFTER_RUNGS, Finding, args_preview
from .events import StepView
from .history import History
from .output_stagnation import judge
from .policy import Policy
from .texts import similar, trigrams


class FuzzyRepeat:
    """Same tool, canonical arguments of at least ``fuzzy_min_chars`` characters, and
    3-gram Jaccard similarity at or above ``fuzzy_similarity`` with the current call,
    ``fuzzy_threshold`` times within the window (the current call included). With
    ``fuzzy_requires_same_output`` (the default) a similar call counts only if its output
    carried the same information as this one: the edits changed nothing. Only calls inside
    the current no-progress stretch count, plus the one that first brought the answer. As
    written (``fuzzy_requires_same_output=False``) the rule counts arguments alone.

    Exact repeats are the other detectors' business; this one needs at least two distinct
    argument texts among the matches. Similar long arguments are often one field swept over
    new values (another service in the same log query): such a sweep raises nothing, edits
    that only reword climb the ladder, anything else is a warning.
    """

    name = "fuzzy_repeat"
    kinds = ("param_jitter",)
    rungs = AFTER_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.window = policy.window
        self.min_chars = policy.fuzzy_min_chars
        self.similarity = policy.fuzzy_similarity
        self.threshold = policy.fuzzy_threshold
        self.same_output = policy.fuzzy_requires_same_output
        self._grams: dict[int, frozenset[str]] = {}

    def _grams_of(self, step: StepView) -> frozenset[str]:
        grams = self._grams.get(step.index)
        if grams is None:
            grams = self._grams[step.index] = trigrams(step.args_text)
        return grams

    def after(self, history: History, step: StepView) -> Finding | None:
        if len(step.args_text) < self.min_chars or step.kind in ("write", "poll"):
            return None
        if self.same_output and not step.same_info and self.threshold > 1:
            return None  # no earlier answer like this one: nothing can match (grams later)
        recent = history.recent(self.window - 1)
        if self.same_output:  # (the cheap test first: grams only for calls that could count)
            recent = [s for s in recent if s.index in step.same_info]
        mine = self._grams_of(step)
        matches = [
            s
            for s in recent
            if s.tool == step.tool
            and len(s.args_text) >= self.min_chars
            and similar(mine, self._grams_of(s), self.similarity)
        ]
        if self.same_output:  # progress-first: the stretch, plus the call that began it
            inside = [s for s in matches if history.in_stretch(s)]
            first = [s for s in matches if not history.in_stretch(s) and history.in_turn(s)]
            matches = [*first[-1:], *inside]  # (in the order they were made)
        if len(self._grams) > 2 * self.window:  # (now and then: those out of the window go)
            oldest = history.steps[0].index if history.steps else step.index
            self._grams = {i: g for i, g in self._grams.items() if i >= oldest}
        self._grams[step.index] = mine
        texts = {s.args_text for s in matches} | {step.args_text}
        if len(matches) + 1 < self.threshold or len(texts) < 2:
            return None
        rungs = judge([*matches, step])
        if rungs is None:
            return None  # one field swept over new values: different questions
        return Finding(
            kind="param_jitter",
            message=(
                f"You have called {step.tool} {len(matches) + 1} times with nearly the same "
                f"arguments (last: {args_preview(step)}). Small edits to the arguments are not "
                "a new approach: use what you have, change strategy, or finish."
            ),
            key=step.tool,
            details={"tool": step.tool, "count": len(matches) + 1},
            rungs=rungs,
        )
