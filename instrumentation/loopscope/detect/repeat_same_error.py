"""Failure that repeats: retrying what failed teaches the model nothing, whatever the error says.

Error texts vary (a line number, a duration, a request id, another wording), so the same call
failing again is counted by its status, not its text; across different arguments, failures
are compared with numbers, ids, timestamps and durations masked.
"""

from __future__ import annotations

from .base import AFTER_RUNGS, BEFORE_RUNGS, Finding, args_preview, repeat_correction
from .events import StepView
from .history import History, SignatureStats
from .policy import Policy


class RepeatSameError:
    """Two rules.

    Before a call: the same call (same signature) has failed on every attempt since its last
    success, whatever else happened in between (nothing about the call changed, so neither
    will its result); the ``error_threshold``-th attempt is the first sign. A failure that
    reads as transient (503, rate limit, "try again") may be retried: only retries that did
    not wait (``retry_pace_s``, or the ``Retry-After`` the failure asked for) count, from
    the ``error_threshold + 1``-th, and ``retry_budget`` retries in all. The ladder climbs only while
    nothing else makes progress. A call that keeps answering "nothing found" while other
    calls make progress counts the same way (asking the same question again does not change
    the answer). After a call: one tool
    keeps failing with the same masked error for different arguments; that is a warning
    only (the agent is changing something, if not the right thing). A refusal that says when
    to try again (a rate limit's ``Retry-After``) refuses every argument alike for now: it
    is not counted across different arguments (a batch of calls refused together, then
    retried after the wait, is no loop).
    """

    name = "repeat_same_error"
    kinds = ("repeat_same_error",)
    rungs = BEFORE_RUNGS

    def __init__(self, policy: Policy) -> None:
        self.window = policy.window
        self.threshold = policy.error_threshold
        self.retry_budget = policy.retry_budget
        self.pace = policy.retry_pace_s

    def _paces(self, stats: SignatureStats, now: float) -> list[bool]:
        """For each retry of a failing call (the candidate's included), whether it waited:
        at least ``retry_pace_s``, and at least what the failure before it asked for."""
        times = [t for t, _ in stats.fail_paces] + [now]
        waits = [wait for _, wait in stats.fail_paces]
        return [
            times[k] - times[k - 1] >= max(self.pace, waits[k - 1]) for k in range(1, len(times))
        ]

    def before(self, history: History, candidate: StepView) -> Finding | None:
        if candidate.kind == "poll":
            return None
        stats = history.stats(candidate.signature)
        if stats is None or not stats.fails or stats.fails_epoch != history.epoch:
            return None  # never failed, or a write or an edit changed things since
        if candidate.kind == "write" and stats.last_status == "timeout":
            return None  # an UNKNOWN write: the ledger's business, not a repeated failure
        failures = len(stats.fails)  # since its last success, whatever happened in between
        count = failures + 1
        if stats.fail_transient:  # a retry that waits (as asked) is a retry done right
            unpaced = 1 + sum(1 for paced in self._paces(stats, candidate.t) if not paced)
            if unpaced < self.threshold + 1 and failures <= self.retry_budget:
                return None
        elif failures == 0 or count < self.threshold:
            return None
        soft = stats.last_status == "ok"  # it answered "nothing found", not an error
        if soft and all(i >= history.stretch_start for i in stats.fails):
            return None  # nothing else happened in between: a plain repeat (exact_repeat's)
        return Finding(
            kind="repeat_same_error",
            message=repeat_correction(candidate, count, error=True, nothing=soft),
            key=candidate.signature,
            details={"tool": candidate.tool, "count": count},
            evidence=(_error_evidence(stats.fail_paces[-1][1] if stats.fail_paces else 0.0),
                      "calls:same"),
        )

    def after(self, history: History, step: StepView) -> Finding | None:
        if step.status != "error":
            return None
        stats = history.stats(step.signature)
        if (
            stats is not None
            and stats.fails
            and stats.fails_epoch != history.epoch
            and (step.failure or step.output_hash) == stats.fail_output
            and len(stats.fails) + 1 >= self.threshold
        ):  # the same failure after an edit (where in the source aside: the edit may have
            # moved the code by a few lines): the edits change nothing for it
            return Finding(
                kind="repeat_same_error",
                message=(
                    f"{step.tool} {args_preview(step)} has failed {len(stats.fails) + 1} times "
                    "with exactly the same output, though things were changed in between: "
                    "those changes do not reach this failure. Read the error again and change "
                    "what it names, or report the failure."
                ),
                key=step.signature,
                details={"tool": step.tool, "count": len(stats.fails) + 1},
                rungs=AFTER_RUNGS,
                evidence=("calls:same", "error:unchanged"),
            )
        if step.retry_after > 0:
            return None  # a refusal for now (a rate limit), whatever the arguments: not theirs
        same = [
            s
            for s in history.recent(self.window - 1)
            if s.tool == step.tool
            and s.status == "error"
            and s.shape == step.shape
            and history.in_stretch(s)
        ]
        if len(same) + 1 < self.threshold or all(s.signature == step.signature for s in same):
            return None
        return Finding(
            kind="repeat_same_error",
            message=(
                f"{step.tool} has returned the same error {len(same) + 1} times for different "
                f"arguments (last: {args_preview(step)}). Changing the arguments this way does "
                "not help: read the error, try another approach, or report the failure."
            ),
            key=f"{step.tool}:{step.shape}",
            details={"tool": step.tool, "count": len(same) + 1},
            rungs=AFTER_RUNGS,
            evidence=("error:plain", "calls:different"),
        )


def _error_evidence(retry_after: float) -> str:
    """``error:retry-after`` when the failure says when to try again (a refusal for now,
    whatever the arguments: a rate limit), else ``error:plain``."""
    return "error:retry-after" if retry_after > 0 else "error:plain"
