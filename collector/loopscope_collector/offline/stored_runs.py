"""Stored runs as episodes: the rows the ``replay_episodes`` and ``replay_calls`` reads return,
grouped per run with its labels (``StoredRun``), and each run's ``Episode`` built by the
collector's own rule (``otlp_files.episodes_from_rows``), the one the live detection is fed by.

One conversion for everything that replays what a store holds: the dashboard's Policy page
(its worker processes too: nothing here imports pandas or Streamlit) and ``loopscope
calibrate --db/--lake`` (``labelled``). The labels are the metrics' label sources
(docs/metrics.md): a human label (``true_loop`` / ``no_loop`` on the run, ``false_kill``
anywhere in it), else the run's scenario label.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from loopscope.detect.replay import EpisodeRecord

from ..normalize.assembly import sort_key
from ..normalize.rows import MessageRow, ToolCallRow
from .otlp_files import episodes_from_rows

__all__ = ["StoredRun", "build_episodes", "labelled_episode", "stored_runs"]

_FIELDS: Final = dataclasses.fields(ToolCallRow)


class StoredRun:
    """A stored run ready to replay: its tool-call rows as the store returned them, its labels,
    and (built on first use, by the collector's rule) its ``Episode`` and each call's agent
    step.

    The rows stay raw until a replay needs the episode, so the page's process only groups
    rows; a replay spread over worker processes ships the raw rows and each worker builds its
    chunk's episodes (the Policy page's ``replay_all``). Pickling drops a built episode.
    """

    __slots__ = ("_built", "_numbers", "columns", "cost_usd", "episode_id", "first_loop_step",
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
        self._numbers: tuple[int, ...] | None = None

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

    def call_number(self, call: int) -> int:
        """The agent's own number of the run's ``call``-th stored tool call (1-based, as a
        replay counts the calls it was given): its ``call_ordinal`` when every stored call
        of the run carries a distinct one, so a run whose calls were partly lost names them
        as the agent's log and the Episode page do; else ``call``. Past the last stored call
        (a flag at a message after it), counted on from the agent's last number."""
        if self._numbers is None:
            self._numbers = self._agent_numbers()
        numbers = self._numbers
        if not numbers or call < 1:
            return call
        return numbers[call - 1] if call <= len(numbers) else numbers[-1] + call - len(numbers)

    def _agent_numbers(self) -> tuple[int, ...]:
        """The stored calls' ``call_ordinal`` in the order they ran, or () when one lacks it
        or two share it (then calls are numbered as stored)."""
        if "call_ordinal" not in self.columns:
            return ()
        own = self.columns.index("call_ordinal")
        role = self.columns.index("role") if "role" in self.columns else None
        numbers = [values[own] for values in self.rows
                   if role is None or values[role] is None]
        if any(not isinstance(n, int) or n < 1 for n in numbers) or len(set(numbers)) < len(
                numbers):
            return ()
        return tuple(numbers)

    def agent_step(self, step: int) -> int:
        """The agent's own step of replayed step ``step`` (as scenario labels count it), else
        ``step``."""
        steps = self.agent_steps
        found = steps[step] if step < len(steps) else None
        return found if found is not None else step


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



def stored_runs(episodes: Sequence[Mapping[str, Any]],
                calls: Sequence[Mapping[str, Any]]) -> list[StoredRun]:
    """The ``replay_episodes`` rows and the ``replay_calls`` rows (as a read returns them:
    plain dicts, None for a missing value) as runs to replay, in the order of ``episodes``
    (newest first).

    Only groups the rows by episode (as value tuples, cheap to ship to a worker process);
    each run's ``Episode`` is built when a replay first needs it. A run's label is its human
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


def labelled_episode(run: StoredRun) -> EpisodeRecord:
    """The run's ``Episode`` with its label as Episode JSONL holds one (``label.loop``,
    ``label.first_loop_step``, and ``label.source``: human or scenario), for what judges a run
    by the label on the record (``loopscope.offline.calibration``).

    The scenario's first loop step counts the agent's own steps; it becomes the first
    replayed step at or after it (the store may hold fewer steps than the agent took: its
    messages are stored only when recorded), so a kill before it is before the loop began,
    as the Policy page judges. A run a human said was killed falsely (``false_kill``) and
    did not label a loop is labelled no loop: any kill on it is false, as the false-kill rule
    says (``detect.false_kill``). One also labelled a loop stays a loop: the label cannot say
    where such a loop began.
    """
    episode = run.episode
    label = run.label
    if label is None and run.human_false_kill:
        label = False
    if label is None:
        return episode
    found: dict[str, Any] = {"loop": label, "source": run.label_source or "human"}
    if label and run.first_loop_step is not None:
        found["first_loop_step"] = next(
            (i for i in range(len(episode.steps)) if run.agent_step(i) >= run.first_loop_step),
            len(episode.steps))
    return dataclasses.replace(episode, label=found)
