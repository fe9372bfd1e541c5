"""The in-process guard: one per episode, the detection core plus what only the agent has.

The core decides; the guard applies the decision in the configured mode and keeps the
results the core cannot (a blocked read is answered with the real last result, a write
retried under a settled idempotency key with the cached one).

- observe: the tool always runs and its result is untouched; the decision is recorded.
- warn: the tool always runs; any flag's correction is put in front of the result.
- enforce: a block answers with the correction plus the cached result without running the
  tool; a stop raises ``LoopDetected`` after the call's output is recorded; a warning is
  injected as in warn mode.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from .detect import Decision, EpisodeMonitor, Policy
from .detect.events import ACTION_RANK, Action
from .detect.fingerprint import output_text

MAX_CACHED_RESULTS: Final = 256


def applied_action(mode: str, decision: Decision) -> Action:
    """What a guard in ``mode`` does with ``decision``."""
    if decision.action == "allow" or mode == "observe":
        return "allow"
    if mode == "warn":
        return "warn"
    return decision.action


def stronger(a: Action, b: Action) -> Action:
    """The more severe of two actions."""
    return a if ACTION_RANK[a] >= ACTION_RANK[b] else b


def with_correction(result: Any, correction: str, *, blocked: bool = False) -> Any:
    """``result`` as the model should see it with ``correction`` in front.

    Strings get the correction prepended; dicts get a ``loopscope_correction`` key; any other
    value becomes text. A blocked call's result is labelled as the earlier, unchanged one.
    """
    label = "Previous result (unchanged):\n" if blocked else ""
    if isinstance(result, str):
        return f"[loopscope] {correction}\n\n{label}{result}"
    if isinstance(result, dict):
        return {**result, "loopscope_correction": correction}
    return f"[loopscope] {correction}\n\n{label}{output_text(result)}"


class Guard:
    """Per-episode guard state. Thread-safe: parallel tool calls share it under a lock."""

    def __init__(
        self,
        *,
        mode: str,
        policy: Policy,
        episode_id: str,
        task_type: str | None = None,
        task: str = "",
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.mode = mode
        self._clock = clock
        self.monitor = EpisodeMonitor(
            policy, episode_id=episode_id, task_type=task_type, task=task
        )
        self.lock = threading.RLock()
        self.started = time.monotonic()
        self.started_ns = time.time_ns()
        self._last_ns = 0
        self._results: OrderedDict[str, Any] = OrderedDict()
        self._writes: dict[str, Any] = {}

    def now(self) -> float:
        """Seconds since the episode started: the core's clock, passed in."""
        if self._clock is not None:
            return self._clock()
        return time.monotonic() - self.started

    def span_ns(self) -> int | None:
        """When a span of the run starts or ends, on the guard's clock: ``None`` (the wall
        clock, OpenTelemetry's own) unless a clock was passed in. With one, the run's start
        plus the clock's seconds, at least a nanosecond after the last such time (steps at one
        clock time keep their order), so the spans say when the guard saw each step and every
        door replaying them judges the times it judged (calls of one model turn, deadlines)."""
        if self._clock is None:
            return None
        with self.lock:
            ns = self._last_ns = max(self.started_ns + int(self._clock() * 1e9),
                                     self._last_ns + 1)
        return ns

    def remember(self, signature: str, key: str | None, result: Any) -> None:
        """Keep the latest real result of a call (for a later block) and of a write key."""
        self._results[signature] = result
        self._results.move_to_end(signature)
        if len(self._results) > MAX_CACHED_RESULTS:
            self._results.popitem(last=False)
        if key is not None:
            self._writes[key] = result

    def cached(self, signature: str, key: str | None) -> tuple[bool, Any]:
        """(found, result): a write key's cached result first, else the signature's last."""
        if key is not None and key in self._writes:
            return True, self._writes[key]
        if signature in self._results:
            return True, self._results[signature]
        return False, None

    def reconcile(self, ref: str, *, found: bool, result: Any = None) -> bool:
        """Settle an UNKNOWN write; with ``found`` and a ``result``, retries get that result."""
        with self.lock:
            record = self.monitor.writes.reconcile(ref, found)
            if record is None:
                return False
            if found and result is not None:  # a retry, under any key, gets the record
                self.remember(record.signature, record.key, result)
            return True
