"""Streaming detection in the collector: the same core as the guard, one monitor per episode.

Spans arrive in batches, late and out of order. Each episode keeps its tool-call rows sorted
by start time; rows that extend the end are fed to the episode's ``EpisodeMonitor`` as they
come, and a row that lands before the end makes the collector re-evaluate the episode from
the start with a fresh monitor (the flags are then re-written). Detection state is per
episode, so the work shards by episode; an episode not seen for a while is evicted and
rebuilt from the store when it comes back.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from loopscope.detect import Decision, EpisodeMonitor, Flag, Policy
from loopscope.detect.episode_records import EpisodeRecord, episode_steps
from loopscope.detect.readings import Readings
from loopscope.detect.replay import EpisodeReport, episode_report
from loopscope.detect.steps import Step, ToolStep, feed_run

from ..normalize.assembly import sort_key
from ..normalize.rows import MessageRow, ToolCallRow
from ..normalize.steps import Row, core_steps

logger = logging.getLogger(__name__)

MAX_ACTIVE_EPISODES = 20_000


@dataclass(slots=True)
class CallDetection:
    """What detection said about one tool call: its progress marker, streak and flags."""

    row: ToolCallRow
    ordinal: int
    progress: str | None
    streak: int
    flags: list[Flag] = field(default_factory=list)
    reconciled: tuple[str, ...] = ()
    """UNKNOWN writes (idempotency keys) this call looked up, by the core's rule."""
    before: Decision | None = None
    """The core's decision before the call (its signature, turn, deadline, intent)."""
    after: Decision | None = None
    """The core's decision after the call."""

    @property
    def signature(self) -> str:
        """The call's signature as the core computed it (what the store keeps)."""
        return self.before.signature if self.before is not None else self.row.signature


@dataclass(slots=True)
class MessageDetection:
    """What detection said about one message: its flags (a monologue). ``ordinal`` is the
    number of tool calls before it (the 0-based ordinal of the call that would follow)."""

    row: MessageRow
    ordinal: int
    flags: list[Flag] = field(default_factory=list)


@dataclass(slots=True)
class EpisodeResult:
    """Detection output for one episode after a batch."""

    episode_id: str
    verdicts: list[CallDetection]
    reevaluated: bool
    """True when the episode was re-run from the start: its stored flags must be replaced."""
    messages: list[MessageDetection] = field(default_factory=list)
    """The messages fed in this batch that raised a flag."""
    failed: str | None = None
    """Why detection failed on this episode (a fault of the core): its rows are stored
    without verdicts, the rest of the batch is judged as usual."""


class _Episode:
    """What an episode keeps between batches: its monitor and where the fed calls end.

    The rows themselves stay in the store; a late row makes the detector reload them.
    """

    __slots__ = ("fed", "first_ns", "last_key", "monitor", "task_type")

    def __init__(
        self, policy: Policy, episode_id: str, task_type: str | None, readings: Readings
    ) -> None:
        self.monitor = EpisodeMonitor(
            policy, episode_id=episode_id, task_type=task_type, readings=readings
        )
        self.fed = 0
        """Tool calls fed so far (the next one's ordinal)."""
        self.first_ns = 0
        self.last_key: tuple[int, int, str] | None = None
        self.task_type = task_type


Loader = Callable[[Sequence[str]], dict[str, list[Row]]]


class StreamingDetector:
    """Per-episode monitors for the pipeline thread (not thread-safe; one owner).

    ``load`` returns the stored steps of episodes (the pipeline's batch query); it is
    used when an episode comes back after an eviction or a restart, and when a late row
    makes an episode re-run from the start.
    """

    def __init__(self, policy: Policy | None = None, *, max_active: int = MAX_ACTIVE_EPISODES,
                 load: Loader | None = None) -> None:
        self.policy = policy or Policy()
        self.max_active = max_active
        self.load: Loader = load or (lambda ids: {})
        self._episodes: OrderedDict[str, _Episode] = OrderedDict()
        self._failed: set[str] = set()
        self._readings = Readings()
        """What was read of outputs, shared by this detector's episodes (an agent's runs answer
        alike: an output read in one is not read again in another)."""

    @property
    def active(self) -> int:
        """Episodes with detection state in memory."""
        return len(self._episodes)

    def has(self, episode_id: str) -> bool:
        """Whether the episode's detection state is in memory."""
        return episode_id in self._episodes

    def forget(self, episode_id: str) -> None:
        """Drop an episode's state (it is rebuilt from the store when needed)."""
        self._episodes.pop(episode_id, None)

    def add(
        self,
        episode_id: str,
        rows: Iterable[Row],
        *,
        task_type: str | None = None,
        stored: Iterable[Row] | None = None,
    ) -> EpisodeResult:
        """Add new steps (tool calls and messages) of one episode and run detection over what
        changed.

        ``stored`` are the episode's steps already in the store, when the caller has them at
        hand (otherwise they are loaded when needed). Never raises for a fault of detection:
        the result says it ``failed`` and carries no verdicts.
        """
        try:
            return self._add(episode_id, rows, task_type, stored)
        except Exception as exc:  # a fault of the core: this episode only, never the batch
            self.forget(episode_id)  # (its state may be half fed; rebuilt from the store)
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            if episode_id not in self._failed:
                if len(self._failed) >= MAX_ACTIVE_EPISODES:
                    self._failed.clear()
                self._failed.add(episode_id)
                logger.exception("loopscope collector: detection failed on episode %s; its "
                                 "calls are stored without verdicts (logged once per episode)",
                                 episode_id)
            return EpisodeResult(episode_id, [], False, failed=reason)

    def _add(self, episode_id: str, rows: Iterable[Row], task_type: str | None,
             stored: Iterable[Row] | None) -> EpisodeResult:
        new = sorted(rows, key=sort_key)
        state = self._episodes.get(episode_id)
        if state is not None:
            self._episodes.move_to_end(episode_id)
            task_type = task_type or state.task_type
            if not new or state.last_key is None or sort_key(new[0]) >= state.last_key:
                return self._feed_all(state, new, episode_id, reevaluated=False)
        # First sight, or a late row: (re)build from everything stored plus the new rows.
        known = {r.span_id for r in new}
        earlier = list(stored) if stored is not None else self.load([episode_id]).get(
            episode_id, [])
        earlier = [r for r in earlier if r.span_id not in known]
        state = self._episodes[episode_id] = _Episode(self.policy, episode_id, task_type, self._readings)
        self._episodes.move_to_end(episode_id)
        self._evict()
        return self._feed_all(state, sorted([*earlier, *new], key=sort_key), episode_id,
                              reevaluated=bool(earlier))

    def _feed_all(self, state: _Episode, rows: list[Row], episode_id: str, *,
                  reevaluated: bool) -> EpisodeResult:
        result = EpisodeResult(episode_id, [], reevaluated)
        if rows and state.last_key is None:
            state.first_ns = rows[0].start_ns
        steps = core_steps(rows, state.first_ns)
        for row, fed in zip(rows, feed_run(state.monitor, steps), strict=True):
            if isinstance(row, MessageRow):
                if isinstance(fed, Decision) and fed.new_flags:
                    result.messages.append(MessageDetection(row, state.fed, list(fed.new_flags)))
                continue
            assert isinstance(fed, tuple)  # (a tool step's before and after)
            before, after = fed
            result.verdicts.append(CallDetection(
                row, state.fed, after.progress, after.streak,
                [*before.new_flags, *after.new_flags], after.reconciled, before, after))
            state.fed += 1
        if rows:
            state.last_key = sort_key(rows[-1])
        return result

    def monitor(self, episode_id: str) -> EpisodeMonitor | None:
        """The episode's monitor (what it flagged, its stop, its totals), if in memory."""
        state = self._episodes.get(episode_id)
        return state.monitor if state is not None else None

    def _evict(self) -> None:
        while len(self._episodes) > self.max_active:
            self._episodes.popitem(last=False)


def detected_report(
    episode: EpisodeRecord, monitor: EpisodeMonitor, *, mode: str = "enforce",
    verdicts: Sequence[CallDetection] = (), steps: Sequence[Step] | None = None,
    numbers: Sequence[int] | None = None,
) -> EpisodeReport:
    """The report of a run whose calls went through streaming detection (``monitor``), in
    ``loopscope analyze``'s shape: ``episode`` names it, ``steps`` are its steps as the core
    takes them (a stored run's, ``normalize.steps.core_steps``; default: an Episode JSONL
    record's own, ``episode_steps``) and ``numbers`` its calls' numbers
    (``normalize.steps.call_numbers``). The monitor numbers the steps it was fed: every step
    when the spans carried the run's messages, else its tool calls only; flags, the stop and
    the calls' decisions are then given as indexes into ``steps``."""
    steps = tuple(episode_steps(episode) if steps is None else steps)
    tools = [i for i, step in enumerate(steps) if isinstance(step, ToolStep)]
    every_step = monitor.steps == len(steps)

    def call(ordinal: int) -> int:
        return tools[ordinal] if 0 <= ordinal < len(tools) else ordinal

    def at(step: int) -> int:
        return step if every_step else call(step)

    stop = monitor.stopped
    return episode_report(
        episode, monitor, mode=mode,
        flags=tuple(dataclasses.replace(f, step=at(f.step)) for f in monitor.flags),
        stop=dataclasses.replace(stop, step=at(stop.step)) if stop is not None else None,
        calls={call(v.ordinal): (v.before, v.after) for v in verdicts
               if v.before is not None and v.after is not None},
        steps=steps, numbers=numbers,
    )
