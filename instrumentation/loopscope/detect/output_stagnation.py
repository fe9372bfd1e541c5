"""Output stagnation and parameter jitter: different calls, the same answer (seed 002 §3.2).

Every fingerprint differs (offsets 0,1,0,1; tiny query edits; another tool) yet the output is
the same or nearly the same, so the agent learns nothing. Same tool → ``param_jitter``;
several tools → ``output_stagnation``.
"""

from __future__ import annotations

from collections.abc import Iterable

from .base import Finding
from .events import StepView
from .fingerprint import similar
from .history import History
from .policy import Policy


def same_info_indexes(
    step: StepView, others: Iterable[StepView], similarity: float
) -> frozenset[int]:
    """Indexes of ``others`` whose output carried the same information as ``step``'s.

    The monitor calls this once per step over the window and shares the result with the
    detectors. Outputs with no words at all (``""``, ``[]``) carry no information to share.
    """
    words, digest = step.words, step.output_hash
    if words is not None and not words:
        return frozenset()
    found = []
    for other in others:
        theirs = other.words
        if theirs is not None and not theirs:
            continue
        if other.output_hash == digest or (
            words is not None and theirs is not None and similar(words, theirs, similarity)
        ):
            found.append(other.index)
    return frozenset(found)


class OutputStagnation:
    """Fires when ``stagnation_threshold`` calls in the window, with at least two different
    signatures, returned the same information. Writes, polls, failures and outputs of fewer
    than ``stagnation_min_words`` words are not information and never count."""

    name = "output_stagnation"

    def __init__(self, policy: Policy) -> None:
        self.window = policy.window
        self.threshold = policy.stagnation_threshold
        self.min_words = policy.stagnation_min_words

    def after(self, history: History, step: StepView) -> Finding | None:
        if not self._informative(step):
            return None
        same = [
            s
            for s in history.recent(self.window - 1)
            if s.index in step.same_info and self._informative(s)
        ]
        signatures = {s.signature for s in same} | {step.signature}
        if len(same) + 1 < self.threshold or len(signatures) < 2:
            return None
        tools = {s.tool for s in same} | {step.tool}
        kind = "param_jitter" if len(tools) == 1 else "output_stagnation"
        calls = " and ".join(sorted(tools))
        return Finding(
            kind=kind,
            action="warn",
            message=(
                f"The last {len(same) + 1} calls to {calls} used different arguments but "
                "returned the same result. Varying the arguments is not producing new "
                "information: use the result you have, try a different approach, or finish."
            ),
            key=kind + ":" + ",".join(sorted(tools)),
            details={"tools": sorted(tools), "count": len(same) + 1},
        )

    def _informative(self, step: StepView) -> bool:
        return (
            step.status == "ok"
            and step.kind not in ("write", "poll")
            and (step.words is None or len(step.words) >= self.min_words)
        )
