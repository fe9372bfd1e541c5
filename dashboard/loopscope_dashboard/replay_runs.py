"""The half of the Policy page's replay that runs in worker processes: a stored run (its raw
tool-call rows and labels), its ``Episode`` built by the collector's own rule, and its verdict
under a policy.

Kept apart from ``replays`` so a spawned worker imports only this, the core and the
collector's row assembly (no pandas, no Streamlit): a replay over thousands of runs starts
its workers sooner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from loopscope.detect import Policy
from loopscope.detect.events import ACTIONS
from loopscope.detect.false_kill import first_kill, kill_was_false
from loopscope.detect.replay import EpisodeRecord, replay
from loopscope.offline.analysis import flag_calls
from loopscope_collector.normalize.assembly import sort_key
from loopscope_collector.normalize.rows import MessageRow, ToolCallRow
from loopscope_collector.offline.otlp_files import episodes_from_rows

_RANK: Final[dict[str, int]] = {name: i for i, name in enumerate(ACTIONS)}
_FIELDS: Final = dataclasses.fields(ToolCallRow)


class StoredRun:
    """A stored run ready to replay: its tool-call rows as the store returned them, its labels,
    and (built on first use, by the collector's rule) its ``Episode`` and each call's agent
    step.

    The rows stay raw until a replay needs the episode, so the page's process only groups
    rows; a replay spread over worker processes ships the raw rows and each worker builds its
    chunk's episodes (``replay_all``). Pickling drops a built episode.
    """

    __slots__ = ("_built", "columns", "cost_usd", "episode_id", "first_loop_step",
                 "human_false_kill", "label", "label_source", "outcome", "rows", "task_type")

    def __init__(self, episode_id: str, columns: tuple[str, ...],
                 rows: tuple[tuple[Any, ...], ...], *, task_type: str | None = None,
                 outcome: str | None = None, cost_usd: float | None = None,
                 label: bool | None = None, label_source: str | None = None,
                 first_loop_step: int | None = None, human_false_kill: bool = False) -> None:
        self.episode_id = episode_id
        self.columns = columns
        """The names of the ``replay_calls`` columns, in the order of each row's values."""
        self.rows = rows
        """The run's tool calls and messages (a message has a ``role``): one tuple of values
        per step, in ``columns`` order."""
        self.task_type = task_type
        self.outcome = outcome
        self.cost_usd = cost_usd
        self.label = label
        """True a loop, False no loop, None unlabelled (human label first, then scenario)."""
        self.label_source = label_source
        self.first_loop_step = first_loop_step
        self.human_false_kill = human_false_kill
        self._built: tuple[EpisodeRecord, tuple[int | None, ...]] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickle, (self.episode_id, self.columns, self.rows, self.task_type,
                            self.outcome, self.cost_usd, self.label, self.label_source,
                            self.first_loop_step, self.human_false_kill))

    def __repr__(self) -> str:
        return f"StoredRun({self.episode_id!r}, {self.calls} calls, label={self.label})"

    @property
    def calls(self) -> int:
        """Tool calls stored for the run (its rows but the messages)."""
        if "role" not in self.columns:
            return len(self.rows)
        role = self.columns.index("role")
        return sum(1 for values in self.rows if values[role] is None)

    @property
    def episode(self) -> EpisodeRecord:
        """The run as the collector's detection sees it (built once, on first use)."""
        if self._built is None:
            build_episodes([self])
        assert self._built is not None
        return self._built[0]

    @property
    def agent_steps(self) -> tuple[int | None, ...]:
        """Per call (replayed step index): the agent's own step, as scenario labels count."""
        if self._built is None:
            build_episodes([self])
        assert self._built is not None
        return self._built[1]


def _unpickle(*fields: Any) -> StoredRun:
    (episode_id, columns, rows, task_type, outcome, cost_usd, label, label_source,
     first_loop_step, human_false_kill) = fields
    return StoredRun(episode_id, columns, rows, task_type=task_type, outcome=outcome,
                     cost_usd=cost_usd, label=label, label_source=label_source,
                     first_loop_step=first_loop_step, human_false_kill=human_false_kill)


_RowMaker = Callable[[tuple[Any, ...]], ToolCallRow]
_MAKERS: dict[tuple[str, ...], _RowMaker] = {}


def _row_maker(columns: tuple[str, ...]) -> _RowMaker:
    """A function from one row's values (in ``columns`` order) to its ``ToolCallRow``.

    Positional (every field, in declaration order: a column's value, else the field's
    default), which costs about 40 % less than keyword arguments over 200,000 rows; a
    default factory (``guard_flags``) gets a fresh value per row.
    """
    maker = _MAKERS.get(columns)
    if maker is not None:
        return maker
    where = {name: i for i, name in enumerate(columns)}
    spec: list[tuple[int, Any]] = [
        (where.get(f.name, -1), None if f.default is dataclasses.MISSING else f.default)
        for f in _FIELDS]
    fresh = [(k, f.default_factory) for k, f in enumerate(_FIELDS)
             if f.name not in where and f.default_factory is not dataclasses.MISSING]

    def make(values: tuple[Any, ...]) -> ToolCallRow:
        args = [values[i] if i >= 0 else default for i, default in spec]
        for k, factory in fresh:
            args[k] = factory()
        return ToolCallRow(*args)

    _MAKERS[columns] = make
    return make


def _message(columns: tuple[str, ...], values: tuple[Any, ...]) -> MessageRow:
    """A ``replay_calls`` row that is a message (it has a ``role``)."""
    got = dict(zip(columns, values, strict=True))
    return MessageRow(got["trace_id"], got["span_id"], got["episode_id"], got["service"],
                      got["role"], got["start_ns"], content=got.get("content"),
                      step=got.get("step"), tokens=int(got.get("tokens_out") or 0))


def build_episodes(runs: Sequence[StoredRun]) -> None:
    """Build the ``Episode`` of every run not built yet, by the collector's own rule
    (``episodes_from_rows``), all in one call."""
    todo = list({run.episode_id: run for run in runs if run._built is None}.values())
    if not todo:
        return
    rows: list[ToolCallRow] = []
    messages: list[MessageRow] = []
    for run in todo:
        make = _row_maker(run.columns)
        role = run.columns.index("role") if "role" in run.columns else None
        for values in run.rows:
            if role is not None and values[role] is not None:
                messages.append(_message(run.columns, values))
            else:
                rows.append(make(values))
    built = {e.episode_id: e for e in episodes_from_rows(rows, [], messages)}
    steps_of: dict[str, list[int | None]] = {}
    steps: list[ToolCallRow | MessageRow] = [*rows, *messages]
    for row in sorted(steps, key=sort_key):
        steps_of.setdefault(row.episode_id, []).append(row.step)
    for run in runs:
        if run._built is not None:
            continue
        base = built.get(run.episode_id) or EpisodeRecord(episode_id=run.episode_id, steps=())
        meta = {**base.meta,
                **({"cost_usd": float(run.cost_usd)} if run.cost_usd is not None else {})}
        episode = dataclasses.replace(base, task_type=run.task_type, outcome=run.outcome,
                                      meta=meta)
        run._built = (episode, tuple(steps_of.get(run.episode_id, ())))


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    """What enforce mode under one policy does to one run (calls are 1-based ordinals)."""

    episode_id: str
    action: str
    """The strongest action: allow, warn, block or stop."""
    first_flag_call: int | None
    first_kill_call: int | None
    stop_call: int | None
    stop_reason: str | None
    budget_stop: bool
    label: bool | None
    caught: bool
    kill_judged: bool
    """A detector kill the false-kill rule could judge (``detect.false_kill``)."""
    false_kill: bool
    calls_saved: int
    cost_saved: float


def verdict(run: StoredRun, policy: Policy) -> PolicyVerdict:
    """Replay ``run`` in enforce mode under ``policy`` and judge it against its label."""
    report = replay(run.episode, policy, mode="enforce")
    stop = report.stop
    stop_step = stop.step if stop is not None and stop.step < len(run.episode.steps) else None
    # the recorded run went on past a stop; under enforce it would have ended there
    flags = [f for f in report.flags if stop_step is None or f.step <= stop_step]
    action = max((f.action if f.severity == "kill" else "warn" for f in flags),
                 key=_RANK.__getitem__, default="allow")
    budget_stop = stop is not None and stop.stop_reason == "budget"
    if stop is not None:
        action = "stop"
    first = flags[0] if flags else None
    kill = first_kill(report.flags, stop_step)
    loop_from = run.first_loop_step
    caught = run.label is True and any(
        loop_from is None or _at_or_after(run, f.step, loop_from)
        for f in flags if f.kind != "budget")
    judged = None if kill is None else kill_was_false(
        label=run.label,
        kill_step=_agent_step(run, kill.step),
        first_loop_step=loop_from,
        human_false_kill=run.human_false_kill,
        outcome=run.outcome,
        progress_after_kill=report.progress_after(kill.step),
    )
    calls = flag_calls(run.episode)
    saved = 0 if stop_step is None else sum(
        1 for step in run.episode.steps[stop_step + 1:] if step.get("type") == "tool")
    cost = report.cost_after(stop_step + 1) if stop_step is not None else None
    return PolicyVerdict(
        episode_id=run.episode.episode_id, action=action,
        first_flag_call=None if first is None else calls[first.step],
        first_kill_call=None if kill is None else calls[kill.step],
        stop_call=None if stop_step is None else calls[stop_step],
        stop_reason=None if stop is None else stop.stop_reason, budget_stop=budget_stop,
        label=run.label, caught=caught, kill_judged=judged is not None,
        false_kill=bool(judged), calls_saved=saved,
        cost_saved=float(cost or 0.0))


def _agent_step(run: StoredRun, step: int) -> int:
    """The agent's own step of replayed step ``step`` (as scenario labels count), else
    ``step``."""
    agent_step = run.agent_steps[step] if step < len(run.agent_steps) else None
    return agent_step if agent_step is not None else step


def _at_or_after(run: StoredRun, step: int, loop_from: int) -> bool:
    return _agent_step(run, step) >= loop_from


def replay_chunk(runs: Sequence[StoredRun], policy: Policy) -> list[PolicyVerdict]:
    """In a worker: the chunk's episodes built from its raw rows, then each run replayed."""
    build_episodes(runs)
    return [verdict(run, policy) for run in runs]
