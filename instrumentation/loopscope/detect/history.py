"""The per-episode memory detectors read: a bounded window of recent steps plus a few sets.

Work per step is O(window): the window is a deque of ``StepView`` and the episode-wide
aggregates are hash sets and dicts keyed by signature.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice

from .events import StepView

MAX_OUTPUTS_PER_SIGNATURE = 8
"""Distinct outputs remembered per signature: enough to tell 'changing' from 'fixed'."""


@dataclass(slots=True)
class SignatureStats:
    """What one signature has done so far in the episode."""

    calls: int = 0
    first_t: float = 0.0
    last_output: str = ""
    last_status: str = "ok"
    outputs: set[str] = field(default_factory=set)
    blocks: int = 0
    same_output_run: int = 0


class History:
    """The recent tool steps of one episode, newest last."""

    __slots__ = ("_by_sig", "_recent", "seen_outputs", "steps")

    def __init__(self, size: int) -> None:
        self.steps: deque[StepView] = deque(maxlen=size)
        self.seen_outputs: set[str] = set()
        self._by_sig: dict[str, SignatureStats] = {}
        self._recent: dict[int, list[StepView]] = {}  # cleared on append

    def __iter__(self) -> Iterator[StepView]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def recent(self, n: int) -> list[StepView]:
        """The last ``n`` steps (fewer at the start), oldest first. Do not modify the list:
        it is shared by every detector until the next ``append``."""
        cached = self._recent.get(n)
        if cached is None:
            if n >= len(self.steps):
                cached = list(self.steps)
            else:
                cached = list(islice(reversed(self.steps), n))
                cached.reverse()
            self._recent[n] = cached
        return cached

    def stats(self, signature: str) -> SignatureStats | None:
        """Stats of ``signature``, or ``None`` if it has not been called."""
        return self._by_sig.get(signature)

    def is_changing(self, signature: str) -> bool:
        """True when the same call has returned different outputs: polling by shape."""
        stats = self._by_sig.get(signature)
        return stats is not None and len(stats.outputs) > 1

    def append(self, step: StepView) -> None:
        """Record a completed step and update the aggregates."""
        stats = self._by_sig.get(step.signature)
        if stats is None:
            stats = self._by_sig[step.signature] = SignatureStats(first_t=step.t)
        if stats.calls and step.output_hash == stats.last_output:
            stats.same_output_run += 1
        else:
            stats.same_output_run = 0
        stats.calls += 1
        stats.last_output = step.output_hash
        stats.last_status = step.status
        if len(stats.outputs) < MAX_OUTPUTS_PER_SIGNATURE:
            stats.outputs.add(step.output_hash)
        self.steps.append(step)
        self._recent.clear()
        if step.status != "blocked":
            self.seen_outputs.add(step.output_hash)

    def note_block(self, signature: str) -> int:
        """Count a block of ``signature``; returns how many it has had."""
        stats = self._by_sig.setdefault(signature, SignatureStats())
        stats.blocks += 1
        return stats.blocks
