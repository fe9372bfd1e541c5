"""Recorded episodes through the core: Episode JSONL records in, flags and totals out.

Parsing takes text already read (no file access here), so the CLI, the evaluation and the
collector's after-the-fact import all share it. ``replay`` feeds every step to an
``EpisodeMonitor`` exactly as the live guard would, and reports the flags each guard mode
would raise.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .events import MODES, STATUSES, TOOL_KINDS, Decision, Flag, Status, ToolCall, ToolResult
from .false_kill import made_progress
from .fingerprint import output_text
from .monitor import EpisodeMonitor
from .policy import Policy
from .readings import Readings
from .steps import MessageStep, Step, ToolStep, call_numbers, feed_run, recorded_call

_STATUSES: Final[dict[str | None, Status]] = {None: "ok", **{s: s for s in STATUSES}}
_KINDS: Final = (None, *TOOL_KINDS)
COST_KEYS: Final = ("agent_cost_usd", "cost_usd", "accumulated_cost_usd", "instance_cost_usd")


class EpisodeFormatError(ValueError):
    """A record that is not a valid Episode; the message names the field."""


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """One recorded run, as a line of Episode JSONL holds it (docs/episode-format.md). Not the
    SDK's ``loopscope.Episode``, which is a run in progress."""

    episode_id: str
    steps: tuple[Mapping[str, Any], ...]
    task_type: str | None = None
    outcome: str | None = None
    label: Mapping[str, Any] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    task: str = ""

    @property
    def loop_label(self) -> bool | None:
        """Ground truth: True stuck, False legitimate, None unlabelled."""
        value = self.label.get("loop") if isinstance(self.label, Mapping) else None
        return value if isinstance(value, bool) else None

    @property
    def cost_usd(self) -> float | None:
        """The agent's recorded cost, if the source recorded one."""
        for key in COST_KEYS:
            value = self.meta.get(key)
            if isinstance(value, _NUMBERS) and not isinstance(value, bool):
                return float(value)
        return None


def parse_episode(record: Any) -> EpisodeRecord:
    """Validate one decoded JSON record as an Episode.

    Raises:
        EpisodeFormatError: naming the first field that is missing or of the wrong type.
    """
    if not isinstance(record, dict):
        raise EpisodeFormatError(f"an episode must be a JSON object, not {type(record).__name__}")
    episode_id = record.get("episode_id")
    if not isinstance(episode_id, str) or not episode_id:
        raise EpisodeFormatError("episode_id: missing or not a non-empty string")
    steps = record.get("steps")
    if not isinstance(steps, list):
        raise EpisodeFormatError(f"{episode_id}: steps: missing or not a list")
    for i, step in enumerate(steps):
        _check_step(episode_id, i, step)
    try:
        label = check_label(record.get("label"))
    except EpisodeFormatError as exc:
        raise EpisodeFormatError(f"{episode_id}: {exc}") from None
    meta = record.get("meta") or {}
    task = record.get("task")
    return EpisodeRecord(
        episode_id=episode_id,
        steps=tuple(steps),
        task_type=record.get("task_type") if isinstance(record.get("task_type"), str) else None,
        outcome=record.get("outcome") if isinstance(record.get("outcome"), str) else None,
        label=label,
        meta=meta if isinstance(meta, dict) else {},
        task=task if isinstance(task, str) else "",
    )


def check_label(label: Any) -> dict[str, Any]:
    """A run's ground-truth ``label``, checked: ``loop`` True, False or null; ``kind`` a
    string or null; ``first_loop_step`` a step index (int >= 0) or null. Other keys (``why``)
    pass through. None is an empty label.

    Raises:
        EpisodeFormatError: naming the field of the wrong type.
    """
    if label is None:
        return {}
    if not isinstance(label, Mapping):
        raise EpisodeFormatError(f"label: must be an object like {{'loop': true}}, not {label!r}")
    loop, kind, first = label.get("loop"), label.get("kind"), label.get("first_loop_step")
    if loop is not None and not isinstance(loop, bool):
        raise EpisodeFormatError(f"label.loop: must be true, false or null, not {loop!r}")
    if kind is not None and not isinstance(kind, str):
        raise EpisodeFormatError(f"label.kind: must be a string or null, not {kind!r}")
    if first is not None and (isinstance(first, bool) or not isinstance(first, int)
                              or first < 0):
        raise EpisodeFormatError(
            f"label.first_loop_step: must be a step index (an int >= 0) or null, not {first!r}")
    return dict(label)


def parse_episode_line(line: str) -> EpisodeRecord:
    """Decode and validate one JSONL line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise EpisodeFormatError(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    return parse_episode(record)


def _check_step(episode_id: str, i: int, step: Any) -> None:
    where = f"{episode_id}: steps[{i}]"
    if not isinstance(step, dict):
        raise EpisodeFormatError(f"{where}: not an object")
    kind = step.get("type")
    if kind == "tool":
        if not isinstance(step.get("tool"), str) or not step["tool"]:
            raise EpisodeFormatError(f"{where}.tool: missing or not a string")
        if step.get("status") not in _STATUSES:
            raise EpisodeFormatError(
                f"{where}.status: {step.get('status')!r} is not {', '.join(STATUSES)} or null"
            )
        if step.get("kind") not in _KINDS:
            raise EpisodeFormatError(
                f"{where}.kind: {step.get('kind')!r} is not {', '.join(TOOL_KINDS)} or null"
            )
    elif kind == "message":
        if step.get("role") not in ("user", "assistant", "system"):
            raise EpisodeFormatError(f"{where}.role: {step.get('role')!r} is not user or assistant")
    else:
        raise EpisodeFormatError(f"{where}.type: {kind!r} is not 'tool' or 'message'")


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
            (float(s["t"]) for s in episode.steps if isinstance(s.get("t"), _NUMBERS)), 0.0
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


def episode_steps(episode: EpisodeRecord, first_t: float = 0.0) -> Iterator[Step]:
    """The steps of a recorded episode as the core takes them, one at a time (a step is
    read when it is fed). A step without a time ``t`` happened when the one before it did
    (the first: at ``first_t``)."""
    t = first_t
    for index, step in enumerate(episode.steps):
        get = step.get
        at = get("t")
        if isinstance(at, _NUMBERS):
            t = float(at)
        if get("type") == "message":
            yield MessageStep(
                str(get("role", "")), str(get("content") or ""), t,
                _int(get("tokens_in")) + _int(get("tokens_out")), True)
            continue
        call_id = get("tool_call_id")
        call_id = str(call_id) if call_id else f"step-{index}"
        output = get("output")
        took = get("duration_s")
        yield ToolStep(_tool_call(step, call_id, t), ToolResult(
            None if output is None else output_text(output),
            _text(get("output_hash")),
            _STATUSES[get("status")],
            call_id,
            t,
            _int(get("tokens_in")),
            _int(get("tokens_out")),
        ), t + took if isinstance(took, _NUMBERS) and took > 0 else None)


_NUMBERS: Final = (int, float)


def _tool_call(step: Mapping[str, Any], call_id: str, t: float) -> ToolCall:
    get = step.get
    args, signature, args_text = get("args"), _text(get("signature")), get("args_text")
    if not isinstance(args_text, str):
        args_text = None
    if args is None and args_text is None and not signature:
        args = {}  # (a step without arguments or a recorded signature called the tool with none)
    occasional: dict[str, Any] = {}
    if not _OCCASIONAL.isdisjoint(step):  # (most steps record none of them: defaults stand)
        deadline, intent, found, stated = (
            get("deadline_s"), get("intent"), get("found"), get("deadline_stated"))
        occasional = {
            "intent": intent if isinstance(intent, str) else None,
            "idempotency_key": get("idempotency_key") or None,
            "reconciles": get("reconciles") or None,
            "found": found if isinstance(found, bool) else None,
            "deadline_s": float(deadline) if isinstance(deadline, _NUMBERS) else None,
            "deadline_stated": stated if isinstance(stated, bool) else None,
            "turn": _int(get("turn")) or None,
        }
    return recorded_call(step["tool"], args=args, args_text=args_text, signature=signature,
                         unique=call_id, call_id=call_id, kind=get("kind"), t=t, **occasional)


_OCCASIONAL: Final = frozenset(
    ["intent", "idempotency_key", "reconciles", "found", "deadline_s", "deadline_stated", "turn"]
)
"""Step fields only some calls carry (docs/episode-format.md): read when a step has one."""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    if value is None or type(value) is int:  # the common cases, first
        return value or 0
    return int(value) if isinstance(value, _NUMBERS) and not isinstance(value, bool) else 0


def _as_warning(flag: Flag) -> Flag:
    if flag.severity == "warn":
        return flag
    return dataclasses.replace(flag, severity="warn", action="warn")
