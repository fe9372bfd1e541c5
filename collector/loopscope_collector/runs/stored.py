"""Stored runs to replay: the rows the ``replay_episodes`` and ``replay_calls`` reads return,
grouped per run with its labels (``StoredRun``). A run goes to the core as typed steps
through the one adapter the live detection is fed by (``normalize.steps.core_steps``), its
calls numbered by the agent's own numbers (``normalize.steps.call_numbers``); calibration
replays it the same way (``labelled_episode``: its steps with its label). Its Episode JSONL
record (``episodes.episodes_from_rows``) is built only for an export (the Policy page's
download).

One conversion for everything that replays what a store holds: the dashboard's Policy page
(its worker processes too: nothing here imports pandas or Streamlit) and ``loopscope
calibrate --db/--lake`` (``offline.labelled``). The labels are the metrics' label sources
(docs/metrics.md): a human label (``true_loop`` / ``no_loop`` on the run, ``false_kill``
anywhere in it), else the run's scenario label.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from loopscope.detect.episode_records import EpisodeRecord
from loopscope.detect.replay import RecordedRun
from loopscope.detect.steps import Step

from ..normalize.assembly import sort_key
from ..normalize.rows import MessageRow, ToolCallRow
from ..normalize.steps import Row, call_numbers, core_steps
from .episodes import episodes_from_rows

__all__ = ["StoredRun", "build_episodes", "labelled_episode", "stored_runs"]

_FIELDS: Final = dataclasses.fields(ToolCallRow)


class StoredRun:
    """A stored run ready to replay: its tool-call rows as the store returned them, its labels,
    and (built on first use) its steps as the core takes them, each step's call number and
    agent step, and (for an export) its ``Episode`` record.

    The rows stay raw until a replay needs the steps, so the page's process only groups
    rows; a replay spread over worker processes ships the raw rows and each worker builds its
    chunk's steps (the Policy page's ``replay_all``). Pickling drops what was built.
    """

    __slots__ = ("_built", "_numbered", "_steps", "columns", "cost_usd", "episode_id", "first_loop_step",
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
        self._built: EpisodeRecord | None = None
        self._numbered: _Numbered | None = None
        self._steps: list[Step] | None = None

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
        """The run as an Episode JSONL record, for an export (built once, on first use); a
        replay takes ``steps``."""
        if self._built is None:
            build_episodes([self])
        assert self._built is not None
        return self._built

    @property
    def steps(self) -> list[Step]:
        """The run's calls and messages as the core takes them, in the order they ran
        (``normalize.steps.core_steps``, as the collector's detection is fed)."""
        if self._steps is None:
            rows = self._numbering().rows
            self._steps = core_steps(rows, rows[0].start_ns if rows else 0)
        return self._steps

    @property
    def numbers(self) -> tuple[int, ...]:
        """Per step: the number of its call (``normalize.steps.call_numbers``: the agent's
        own where its SDK set them; for a message, the call that would follow it)."""
        return self._numbering().numbers

    @property
    def agent_steps(self) -> tuple[int | None, ...]:
        """Per step: the agent's own step, as scenario labels count."""
        return self._numbering().agent_steps

    def call_number(self, call: int) -> int:
        """The number of the run's ``call``-th stored tool call (1-based, as a replay counts
        the calls it was given): the agent's own where its SDK set them
        (``normalize.steps.call_numbers``). Past the last stored call, counted on from it."""
        tools = self._numbering().tools
        if call < 1 or not tools:
            return call
        if call <= len(tools):
            return self.numbers[tools[call - 1]]
        return self.numbers[tools[-1]] + call - len(tools)

    def agent_step(self, step: int) -> int:
        """The agent's own step of replayed step ``step`` (as scenario labels count it), else
        ``step``."""
        steps = self.agent_steps
        found = steps[step] if step < len(steps) else None
        return found if found is not None else step

    def _numbering(self) -> _Numbered:
        """The rows in the order they ran and their numbers, built once: without the core's
        steps, which only a replay needs (the page numbers every stored run's calls to
        compare them with what the guards reported)."""
        if self._numbered is None:
            rows = sorted(_rows(self), key=sort_key)
            self._numbered = _Numbered(
                rows, tuple(call_numbers(rows)), tuple(row.step for row in rows),
                tuple(i for i, row in enumerate(rows) if isinstance(row, ToolCallRow)))
        return self._numbered


class _Numbered(NamedTuple):
    rows: list[Row]
    """The run's rows in the order they ran (``assembly.sort_key``)."""
    numbers: tuple[int, ...]
    agent_steps: tuple[int | None, ...]
    tools: tuple[int, ...]
    """The indexes of the tool steps."""


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


def _rows(run: StoredRun) -> list[Row]:
    """The run's stored values as rows (a ``replay_calls`` row with a ``role`` is a message)."""
    make = _row_maker(run.columns)
    role = run.columns.index("role") if "role" in run.columns else None
    return [_message(run.columns, values) if role is not None and values[role] is not None
            else make(values) for values in run.rows]


def build_episodes(runs: Sequence[StoredRun]) -> None:
    """Build the Episode JSONL record of every run not built yet, by the collector's own rule
    (``episodes_from_rows``), all in one call: for an export."""
    todo = list({run.episode_id: run for run in runs if run._built is None}.values())
    if not todo:
        return
    rows: list[ToolCallRow] = []
    messages: list[MessageRow] = []
    for run in todo:
        for row in _rows(run):
            if isinstance(row, MessageRow):
                messages.append(row)
            else:
                rows.append(row)
    built = {e.episode_id: e for e in episodes_from_rows(rows, [], messages)}
    for run in runs:
        if run._built is not None:
            continue
        base = built.get(run.episode_id) or EpisodeRecord(episode_id=run.episode_id, steps=())
        meta = {**base.meta,
                **({"cost_usd": float(run.cost_usd)} if run.cost_usd is not None else {})}
        run._built = dataclasses.replace(base, task_type=run.task_type, outcome=run.outcome,
                                         meta=meta)


def stored_runs(episodes: Sequence[Mapping[str, Any]],
                calls: Sequence[Mapping[str, Any]]) -> list[StoredRun]:
    """The ``replay_episodes`` rows and the ``replay_calls`` rows (as a read returns them:
    plain dicts, None for a missing value) as runs to replay, in the order of ``episodes``
    (newest first).

    Only groups the rows by episode (as value tuples, cheap to ship to a worker process);
    each run's steps are built when a replay first needs them. A run's label is its human
    label (``true_loop`` / ``no_loop``), else its scenario label, else None; the first loop
    step comes with a scenario label only."""
    columns: tuple[str, ...] = tuple(calls[0]) if calls else ()
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for call in calls:
        values = tuple(call.values())  # the read's rows share one column order
        if len(values) != len(columns):
            values = tuple(call.get(name) for name in columns)
        grouped.setdefault(call["episode_id"], []).append(values)
    runs = []
    for record in episodes:
        episode_id = record["episode_id"]
        cost = record.get("cost_usd")
        human = record.get("human_label")
        scenario = record.get("scenario_loop")
        if human is not None:
            label, source = human == "true_loop", "human"
        elif scenario is not None:
            label, source = bool(scenario), "scenario"
        else:
            label, source = None, None
        first = record.get("scenario_first_loop_step") if source == "scenario" else None
        runs.append(StoredRun(
            episode_id, columns, tuple(grouped.get(episode_id, ())),
            task_type=record.get("task_type"), outcome=record.get("outcome"),
            cost_usd=None if cost is None else float(cost), label=label, label_source=source,
            first_loop_step=None if first is None else int(first),
            human_false_kill=bool(record.get("human_false_kill"))))
    return runs


def labelled_episode(run: StoredRun) -> RecordedRun:
    """The run as the core replays it (its typed steps and calls' numbers, ``steps`` and
    ``numbers``; no Episode JSONL record of its steps), with its label as Episode JSONL holds
    one (``label.loop``, ``label.first_loop_step``, and ``label.source``: human or scenario),
    for what judges a run by the label on its record (``loopscope.offline.calibration``).

    The scenario's first loop step counts the agent's own steps; it becomes the first
    replayed step at or after it (the store may hold fewer steps than the agent took: its
    messages are stored only when recorded), so a kill before it is before the loop began,
    as the Policy page judges. A run a human said was killed falsely (``false_kill``) and
    did not label a loop is labelled no loop: any kill on it is false, as the false-kill rule
    says (``detect.false_kill``). One also labelled a loop stays a loop: the label cannot say
    where such a loop began.
    """
    steps = tuple(run.steps)
    label = run.label
    if label is None and run.human_false_kill:
        label = False
    found: dict[str, Any] = {}
    if label is not None:
        found = {"loop": label, "source": run.label_source or "human"}
        if label and run.first_loop_step is not None:
            found["first_loop_step"] = next(
                (i for i in range(len(steps)) if run.agent_step(i) >= run.first_loop_step),
                len(steps))
    record = EpisodeRecord(
        episode_id=run.episode_id, steps=(), task_type=run.task_type, outcome=run.outcome,
        label=found,
        meta={"cost_usd": float(run.cost_usd)} if run.cost_usd is not None else {})
    return RecordedRun(record, steps, run.numbers)
