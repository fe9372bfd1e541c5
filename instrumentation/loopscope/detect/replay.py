"""Recorded episodes through the core: Episode JSONL records in, flags and totals out.

Parsing takes text already read (no file access here), so the CLI, the evaluation and the
collector's after-the-fact import all share it. ``replay`` feeds every step to an
``EpisodeMonitor`` exactly as the live guard would, and reports the flags each guard mode
would raise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .episode_records import NUMBERS, EpisodeRecord, episode_steps
from .events import MODES, Decision, Flag
from .false_kill import made_progress
from .monitor import EpisodeMonitor
from .policy import Policy
from .readings import Readings
from .steps import MessageStep, Step, ToolStep, call_numbers, feed_run


@dataclass(frozen=True, slots=True)
class EpisodeReport:
    """What a guard in ``mode`` would have flagged on one episode."""

    episode: EpisodeRecord
    mode: str
    flags: tuple[Flag, ...]
    summary: Mapping[str, Any]
    stop: Decision | None
    calls: Mapping[int, tuple[Decision, Decision]] = field(default_factory=dict)
    """Each tool step's decisions (before the call, after it), by step index: what a guard
    would have recorded on the call's span (its turn, deadline, intent, reconciles)."""
    steps: tuple[Step, ...] = ()
    """The run's steps as the core takes them, in order: what the flags, the stop and
    ``calls`` index (a recorded run's, ``episode_steps``; a stored run's, its rows')."""
    numbers: tuple[int, ...] = ()
    """Per step: the number of its call (``steps.call_numbers``, set once where the report is
    made): what every report names a flag, a stop and a call by."""

    @property
    def first_flag(self) -> Flag | None:
        """The earliest flag of any severity."""
        return self.flags[0] if self.flags else None

    @property
    def first_kill(self) -> Flag | None:
        """The earliest flag at which the guard would block or stop."""
        return next((f for f in self.flags if f.severity == "kill"), None)

    @property
    def tool_calls(self) -> int:
        """The run's tool calls (its steps but the messages)."""
        return sum(1 for step in self.steps if isinstance(step, ToolStep))

    def call_at(self, step: int) -> int | None:
        """The number of the call at step index ``step`` (for a message, of the call that
        would follow it); None past the run's steps."""
        return self.numbers[step] if 0 <= step < len(self.numbers) else None

    @property
    def tokens_after(self) -> dict[int, int]:
        """Tokens spent at or after each step index (for cost after the first flag; counted
        when asked for, since most reports never are)."""
        return tokens_after(self._tokens())

    def _tokens(self) -> list[int]:
        return [step.tokens if isinstance(step, MessageStep)
                else step.result.tokens_in + step.result.tokens_out for step in self.steps]

    def cost_after(self, step: int) -> float | None:
        """The share of the episode's cost spent at or after ``step`` (by tokens, else calls)."""
        cost = self.episode.cost_usd
        if cost is None:
            return None
        tools = [i for i, s in enumerate(self.steps) if isinstance(s, ToolStep)]
        return cost_share(cost, self._tokens(), tools, step)

    def progress_after(self, step: int) -> bool:
        """Whether a tool call after ``step`` made progress (``false_kill.made_progress``):
        what the false-kill rule asks of an unlabelled run after its kill."""
        return progress_after(self.calls, step)

    def as_dict(self) -> dict[str, Any]:
        """The report in ``loopscope analyze --json`` shape."""
        return {
            "episode_id": self.episode.episode_id,
            "outcome": self.episode.outcome,
            "flags": [
                {"step": f.step, "detector": f.detector, "kind": f.kind, "severity": f.severity}
                for f in self.flags
            ],
        }


def replay(
    episode: EpisodeRecord | RecordedRun,
    policy: Policy | None = None,
    *,
    mode: str = "enforce",
    readings: Readings | None = None,
) -> EpisodeReport:
    """Run the core over every step of ``episode``; report the flags ``mode`` would raise.

    An Episode JSONL record's steps are read by ``episode_steps``; a ``RecordedRun`` (a stored
    run) brings its typed steps and its calls' numbers. ``observe`` records what enforce would
    do, so its severities equal enforce's; ``warn`` never kills, so every flag is a warning.
    The recorded run continues past a stop (it really did), and later flags are still
    reported. ``readings``, when given, is shared with the other runs replayed with it (an
    output read in one is not read again).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    numbers: tuple[int, ...] | None = None
    if isinstance(episode, RecordedRun):
        steps, numbers, episode = episode.steps, episode.numbers, episode.episode
        first_t = (steps[0].t if isinstance(steps[0], MessageStep) else steps[0].call.t
                   ) if steps else 0.0
    else:
        first_t = next(
            (float(s["t"]) for s in episode.steps if isinstance(s.get("t"), NUMBERS)), 0.0
        )
        steps = tuple(episode_steps(episode, first_t))
    monitor, calls = replay_steps(
        steps, policy, episode_id=episode.episode_id, task_type=episode.task_type,
        task=episode.task, first_t=first_t, readings=readings)
    return episode_report(episode, monitor, mode=mode, calls=calls, steps=steps,
                          numbers=numbers)


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """A recorded run as the core replays it without an Episode JSONL record of its steps: its
    record (id, task type, outcome, label, meta; ``steps`` left empty) and its typed steps
    with their calls' numbers (a stored run's, made by the collector's adapter from its
    rows). What calibration replays a store's labelled runs as."""

    episode: EpisodeRecord
    steps: tuple[Step, ...]
    numbers: tuple[int, ...] | None = None
    """Per step, its call's number (default: in order, ``steps.call_numbers``)."""


def replay_steps(
    steps: Iterable[Step],
    policy: Policy | None = None,
    *,
    episode_id: str = "",
    task_type: str | None = None,
    task: str = "",
    first_t: float = 0.0,
    readings: Readings | None = None,
) -> tuple[EpisodeMonitor, dict[int, tuple[Decision, Decision]]]:
    """Feed a recorded run's typed steps (``feed_run``) to a fresh monitor: the monitor (its
    flags, its stop, its totals) and each tool step's decisions (before the call, after it)
    by step index. ``first_t`` is when the run began (its budget's clock); ``readings`` as
    ``replay``'s."""
    monitor = EpisodeMonitor(policy, episode_id=episode_id, task_type=task_type, task=task,
                             readings=readings)
    monitor.budget.start_t = first_t
    calls: dict[int, tuple[Decision, Decision]] = {}
    for index, fed in enumerate(feed_run(monitor, steps)):
        if isinstance(fed, tuple):
            calls[index] = fed
    return monitor, calls


def tokens_after(tokens: Sequence[int]) -> dict[int, int]:
    """Per step index, the tokens spent at or after it (``tokens``: each step's)."""
    remaining = 0
    after: dict[int, int] = {}
    for index in range(len(tokens) - 1, -1, -1):
        remaining += tokens[index]
        after[index] = remaining
    return after


def cost_share(cost: float, tokens: Sequence[int], tools: Sequence[int], step: int) -> float:
    """The share of a run's ``cost`` spent at or after ``step``: by the tokens of each step
    (``tokens``), else, when none were counted, by its tool calls (``tools``: their step
    indexes)."""
    after_step = tokens_after(tokens)
    total = after_step.get(0, 0)
    if total > 0:
        after = max((v for k, v in after_step.items() if k >= step), default=0)
        return cost * after / total
    if not tools:
        return 0.0
    return cost * sum(1 for i in tools if i >= step) / len(tools)


def progress_after(calls: Mapping[int, tuple[Decision, Decision]], step: int) -> bool:
    """Whether a tool call after ``step`` made progress (``false_kill.made_progress``), from
    each tool step's decisions by step index."""
    return any(made_progress(after.progress)
               for index, (_, after) in calls.items() if index > step)


def episode_report(
    episode: EpisodeRecord,
    monitor: EpisodeMonitor,
    *,
    mode: str = "enforce",
    calls: Mapping[int, tuple[Decision, Decision]] | None = None,
    flags: tuple[Flag, ...] | None = None,
    stop: Decision | None = None,
    steps: Sequence[Step] | None = None,
    numbers: Sequence[int] | None = None,
) -> EpisodeReport:
    """The report of ``episode`` once its steps were fed to ``monitor``: by ``replay``, or by
    the collector's streaming detection over the episode's calls.

    ``flags`` and ``stop`` default to the monitor's; a caller whose monitor numbered the
    steps otherwise (tool calls only) passes them renumbered as indexes into ``steps``.
    ``steps`` are the run's typed steps (default: ``episode``'s, ``episode_steps``);
    ``numbers`` its calls' numbers (default: in order, ``steps.call_numbers``).
    """
    steps = tuple(episode_steps(episode) if steps is None else steps)
    numbers = tuple(call_numbers(isinstance(s, ToolStep) for s in steps)
                    if numbers is None else numbers)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    flags = tuple(monitor.flags) if flags is None else flags
    stop = monitor.stopped if stop is None else stop
    summary = monitor.summary()
    if mode == "warn":  # a warn-mode guard nudges; it never blocks or stops
        flags = tuple(_as_warning(f) for f in flags)
        summary["stop_reason"] = None
    return EpisodeReport(
        episode=episode,
        mode=mode,
        flags=flags,
        summary=summary,
        stop=stop if mode != "warn" else None,
        calls=dict(calls or {}),
        steps=steps,
        numbers=numbers,
    )


def _as_warning(flag: Flag) -> Flag:
    if flag.severity == "warn":
        return flag
    return dataclasses.replace(flag, severity="warn", action="warn")
