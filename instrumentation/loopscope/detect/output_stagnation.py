"""Output stagnation and parameter jitter: different calls, the same answer.

Every fingerprint differs (offsets 0,1,0,1; tiny query edits; another tool) yet the output is
the same or nearly the same, so the agent learns nothing. Same tool → ``param_jitter``;
several tools → ``output_stagnation``. Counting is progress-first: only calls inside the
current no-progress stretch, plus the one that first brought the answer.

Three shapes are told apart, because only one of them is a loop: *jitter* revisits arguments
(an offset back and forth, the same request reworded) and climbs the ladder; a *sweep* names
something new in every call (another store, another service) and gets the same answer, which
is exploring and raises nothing; anything in between climbs warn → warn → stop, as long as no
progress is made.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Final

from .answers import is_refusal
from .base import AFTER_RUNGS, Finding
from .events import Action, StepView
from .history import History
from .limits import SUBSTANTIVE_FACTS
from .policy import Policy
from .texts import PAGE_PARAMS, arg_values, path_values, similar


def same_info_indexes(
    step: StepView, others: Iterable[StepView], similarity: float
) -> frozenset[int]:
    """Indexes of ``others`` whose output carried the same information as ``step``'s: the
    same output, the same facts (``StepView.info``) or only some of theirs (a filtered
    listing of what they listed), or near-identical words.

    The monitor calls this once per step over the window and shares the result with the
    detectors. Outputs with no words at all (``""``, ``[]``) carry no information to share.
    """
    words, digest, info, told = step.words, step.output_hash, step.info, step.facts
    if words is not None and not words:
        return frozenset()
    asked = ""
    if step.negative:  # "no results for X" and "… for Y" tell different things; "… for page
        info, told = 0, None  # 4" and "… for page 5" of one question do not
        asked = _unpaged(step.loose)
    found = []
    for other in others:
        theirs = other.words
        if theirs is not None and not theirs:
            continue
        if (
            other.output_hash == digest
            or (info and other.info == info)
            or (asked and other.info == step.info and _unpaged(other.loose) == asked)
            or (told and other.facts and told <= other.facts)  # a part of what it said
        ) or (
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
    another service, another route): different questions that happen to get one answer.
    Another page or offset of one question names nothing new."""
    seen = set(map(_unpaged, values_of(steps[0])))
    for step in steps[1:]:
        values = frozenset(map(_unpaged, values_of(step)))
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
    refused), else the ladder. A loop that goes on after its warning ends (issue 16: every
    caught loop ends); the ladder climbs only while no progress is made."""
    latest = group[-1]  # the step being checked: its output is still at hand
    if (
        not nudged(group)
        and sweep(group)
        and not (substantive(latest) and reworded(group))
        and not (latest.negative and reworded(group, keeping=True))
        and not is_refusal(latest.output, latest.words)
    ):
        return None
    return AFTER_RUNGS


_PAGED: Final = re.compile(rf"\b({PAGE_PARAMS}) \d+\b")


def _unpaged(value: str) -> str:
    """A loosened argument value with its page or offset left out ("jobs q x page 4")."""
    return _PAGED.sub(r"\1 #", value) if " " in value else value


def reworded(steps: list[StepView], *, keeping: bool = False) -> bool:
    """Whether every call after the first changes its arguments only in phrases of words
    (a question asked again in other words: "postgres 17 eol" → "when does postgresql 17
    support end"; a command spelled another way; with ``keeping``, only words added to an
    earlier question: "aunt may" → "aunt may parker"), where a sweep names another thing (an id,
    a date, a store number, a file: "job-7f3a" → "job-9c2b")."""
    seen = set(values_of(steps[0]))
    for step in steps[1:]:
        new = values_of(step) - seen
        if not new or not all(phrase(value) for value in new) or not new.isdisjoint(
                _paths_of(step)):
            return False  # (another file is another thing, not the same words again)
        if keeping and not all(_keeps(value, seen) for value in new):
            return False
        seen |= new
    return True


def _keeps(value: str, seen: set[str]) -> bool:
    """Whether ``value`` holds every word of an earlier value ("aunt may" → "aunt may
    parker"): the same question asked again with words added, not another subject."""
    words = set(value.split())
    return any(set(old.split()) <= words for old in seen)


def _paths_of(step: StepView) -> frozenset[str]:
    try:
        args = json.loads(step.args_text) if step.args_text else None
    except ValueError:
        return frozenset()
    return path_values(args)


def phrase(value: str) -> bool:
    """Whether a loosened argument value is a phrase: two words of letters or more."""
    return sum(1 for word in value.split() if len(word) > 1 and word.isalpha()) >= 2


def substantive(step: StepView) -> bool:
    """Whether ``step``'s answer is a result set (several facts, not "nothing found" or a
    one-line verdict such as "out of stock"), so that asking for it in other words is
    jitter: the same records came back."""
    return not step.negative and step.facts is not None and len(step.facts) >= SUBSTANTIVE_FACTS


class OutputStagnation:
    """Fires when ``stagnation_threshold`` calls of the stretch, with at least two different
    signatures, returned the same information. Writes, polls, failures and outputs of fewer
    than ``stagnation_min_words`` words are not information and never count. A call whose
    kind nothing tells (a click) counts only with answers that say the same (``info``): one
    only near in words is the page it changed."""

    name = "output_stagnation"
    kinds = ("output_stagnation", "param_jitter")
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
        equal = all(s.info == step.info for s in same)
        if step.kind is None and not equal:
            return None  # (a call nothing tells the kind of may act: a click whose answer is
            # only near the last one's changed something on the page)
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
            details={"tools": sorted(tools), "count": count, "revisits": nudged(group)},
            rungs=rungs,
            evidence=("output:equal" if equal else "output:similar",),
        )

    def _informative(self, step: StepView) -> bool:
        return (
            step.status == "ok"
            and step.kind not in ("write", "poll")
            and (step.words is None or len(step.words) >= self.min_words)
        )
