"""The Policy page's engine: stored runs replayed through the detection core under a policy.

Runs come from the store as the collector's detection sees them (the ``replay_episodes`` and
``replay_calls`` reads), become the core's steps through the adapter the collector's own
detection is fed by (``loopscope_collector.runs.stored``, ``normalize.steps``; in the worker
processes, for a replay spread over them), and go through ``loopscope.detect.replay``'s
``replay_steps`` in enforce mode: the same core the guard and the collector run, never a
re-implementation.

A policy is edited generically, field by field over ``dataclasses.fields(Policy)``, and built
with ``Policy.from_mapping``, so a field the core adds appears here without a change. Numbers
and switches get inputs; any other field is edited as JSON, exactly as a policy file holds it.

The verdicts are scored against the runs' labels, with the metrics' label sources (a human
label, else the run's scenario label; docs/metrics.md): a loop is *caught* when a flag lands at
or after its first loop step; whether a detector's first block or stop is a *false kill* is
``loopscope.detect.false_kill``'s rule, the one ``loopscope eval`` and the collector's metrics
use. Budget stops are the user's cap: counted apart, never as false kills.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

import pandas as pd

from loopscope.detect import Policy
from loopscope.policy_file import changes_of, plain, to_json
from loopscope_collector.runs.stored import stored_runs as runs_from_rows

from .replay_runs import (
    PolicyVerdict,
    StoredRun,
    build_episodes,
    lower_priority,
    replay_chunk,
    verdict,
)
from .truth import RANK, gap_text, gaps_in

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = [
    "FIELD_WORDS",
    "PARALLEL_FROM",
    "PolicyVerdict",
    "Replay",
    "ReplayCache",
    "Scorecard",
    "Setting",
    "StoredRun",
    "build",
    "build_episodes",
    "changed",
    "changes_of",
    "data_version",
    "episode_record",
    "plain",
    "replay_all",
    "score",
    "settings",
    "stored_runs",
    "sweep",
    "sweep_around",
    "sweep_values",
    "to_json",
    "verdict",
    "verdicts_frame",
]


# -- a policy as plain data ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Setting:
    """One field of ``Policy`` as the page edits it: ``widget`` is ``bool``, ``int``, ``float``
    or ``json``; ``default`` is the field's default as plain JSON data."""

    name: str
    widget: str
    default: Any
    doc: str
    label: str = ""
    """Plain words for the field (``repeat_threshold``: "Identical calls before a warning")."""
    help: str = ""
    """What the field does, in plain words, then its docstring and its policy-file key."""


def settings() -> list[Setting]:
    """Every field of ``Policy``, in declaration order, with its default and docstring."""
    defaults = Policy()
    docs = _field_docs()
    found = []
    for f in dataclasses.fields(Policy):
        value = getattr(defaults, f.name)
        if isinstance(value, bool):
            widget = "bool"
        elif isinstance(value, int):
            widget = "int"
        elif isinstance(value, float):
            widget = "float"
        else:
            widget = "json"
        label, words = FIELD_WORDS.get(f.name, (f.name.replace("_", " ").capitalize(), ""))
        doc = docs.get(f.name, "")
        help_text = " ".join(part for part in (words, doc) if part)
        found.append(Setting(f.name, widget, plain(value), doc, label,
                             f"{help_text} (policy file: `{f.name}`)".strip()))
    return found


FIELD_WORDS: Final[dict[str, tuple[str, str]]] = {
    "repeat_threshold": ("Identical calls before a warning",
                         "How many times the same call may return the same thing before the "
                         "guard warns."),
    "window": ("Recent calls compared", "How many of the latest calls the window detectors "
               "look back over."),
    "fuzzy_min_chars": ("Shortest arguments compared loosely",
                        "Arguments shorter than this many characters are only compared "
                        "exactly."),
    "fuzzy_similarity": ("How alike near-identical arguments are (0–1)",
                         "Arguments at least this similar (3-gram overlap) count as the same "
                         "call reworded."),
    "fuzzy_threshold": ("Reworded calls before a warning",
                        "How many near-identical calls in a row start the ladder."),
    "fuzzy_requires_same_output": ("Reworded calls count only with the same answer",
                                   "Count a reworded call only when it brought nothing new."),
    "oscillation_max_period": ("Longest back-and-forth cycle",
                               "The most calls in one A→B→A cycle the oscillation detector "
                               "looks for."),
    "oscillation_cycles": ("Back-and-forth cycles before a warning",
                           "Full A→B→A→B cycles before the guard warns."),
    "stagnation_similarity": ("How alike answers must be to count as nothing new (0–1)", ""),
    "stagnation_threshold": ("Same answers to different calls before a warning", ""),
    "stagnation_min_words": ("Shortest answer that can stagnate (words)", ""),
    "ignored_calls": ("Calls after a warning before a stop",
                      "Calls without progress after the first warning, after which the run "
                      "is stopped."),
    "error_threshold": ("Same failure before a warning",
                        "How many times one call may fail the same way before the guard "
                        "warns."),
    "retry_budget": ("Retries of a transient failure allowed", ""),
    "retry_pace_s": ("Seconds a retry should wait", ""),
    "cursor_threshold": ("Pages with a stuck cursor before a warning", ""),
    "poll_deadline_s": ("How long a poll may wait unchanged (seconds)", ""),
    "poll_deadlines": ("Poll deadlines by task type (seconds)", ""),
    "poll_max_unchanged": ("Unchanged polls before a warning", ""),
    "poll_min_interval_s": ("Shortest wait between status polls (seconds)", ""),
    "poll_pace_s": ("Wait that makes a repeated call a poll (seconds)", ""),
    "monologue_threshold": ("Model turns without a tool call before a warning", ""),
    "monologue_similarity": ("How alike repeated messages are (0–1)", ""),
    "monologue_min_words": ("Shortest sentence that counts as repeated (words)", ""),
    "ack_max_words": ("Longest answer that counts as a bare acknowledgement (words)", ""),
    "write_oscillation_cycles": ("Edit-and-undo cycles before a warning", ""),
    "idempotency_args": ("Argument names that carry an idempotency key", ""),
    "ladders": ("Steps of each detector's ladder",
                "What each detector does at its first sign and each time the loop goes on "
                "(warn, block, stop)."),
    "task_ladders": ("Ladders by task type", "Like the ladders, per task type; wins over "
                     "them."),
    "no_progress_k": ("Calls without progress before the breaker, by task type",
                      "How many calls in a row may bring nothing new before the no-progress "
                      "breaker warns; it stops two calls later."),
    "poll_tools": ("Tools always treated as polls", ""),
    "tool_kinds": ("Read / write / poll, by tool name", ""),
    "volatile_args": ("Arguments left out of a call's identity, by tool", ""),
    "actions": ("Strongest action per detector",
                "Caps a detector's ladder: \"warn\" means it never blocks or stops."),
    "evidence_caps": ("Strongest action per evidence source",
                      "Caps what a finding may do on its own by the evidence it rests on (its "
                      "detector, and a kind declared or guessed, outputs equal or similar, ...): "
                      "\"warn\" means it never blocks or stops alone. Calibrate from labels "
                      "(below) sets them."),
    "budgets": ("Hard limits (calls, turns, tokens, cost, time)",
                "Each stops the run before the call that would pass it; none by default."),
    "required_tools": ("Tools a turn must call", "Rules that ask the model to call a tool "
                       "before it answers."),
}
"""Each ``Policy`` field's plain-words label and help, as the Policy page shows them. A field
the core adds later gets its name as words and its docstring until it is added here."""


def _field_docs() -> dict[str, str]:
    """The attribute docstrings of ``Policy`` (the string right after a field), by field."""
    import ast
    import inspect
    import itertools

    try:
        tree = ast.parse(inspect.getsource(Policy))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for before, node in itertools.pairwise(body):
        if (isinstance(before, ast.AnnAssign) and isinstance(before.target, ast.Name)
                and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            docs[before.target.id] = " ".join(node.value.value.split())
    return docs


def build(changes: Mapping[str, Any], *, source: str = "the Policy page") -> Policy:
    """``Policy.from_mapping(changes)``; raises ``ValueError`` naming a bad field."""
    return Policy.from_mapping(dict(changes), source=source)


# -- stored runs as episodes ----------------------------------------------------------------


def stored_runs(episodes: pd.DataFrame,
                calls: Sequence[Mapping[str, Any]] | pd.DataFrame) -> list[StoredRun]:
    """The ``replay_episodes`` frame and the ``replay_calls`` rows (as the read returns them:
    plain dicts, which skips a costly DataFrame round trip) as runs to replay, newest first:
    the collector's ``runs.stored``, which ``loopscope calibrate --db`` reads with."""
    if episodes.empty:
        return []
    if isinstance(calls, pd.DataFrame):
        calls = [{str(k): _none(v) for k, v in record.items()} for record in
                 calls.to_dict("records")]
    rows = [{str(k): _none(v) for k, v in record.items()}
            for record in episodes.to_dict("records")]
    return runs_from_rows(rows, calls)


def _none(value: Any) -> Any:
    """NaN / NaT / pandas NA as None."""
    try:
        return None if pd.isna(value) else value
    except (TypeError, ValueError):  # lists and arrays are values
        return value


# -- replay and score -----------------------------------------------------------------------


PARALLEL_FROM: Final = 2_000
"""Runs from which ``replay_all`` spreads the work over worker processes (one per CPU)."""
_CHUNK: Final = 500


def replay_all(runs: Sequence[StoredRun], policy: Policy, *,
               progress: Callable[[int, int], None] | None = None,
               workers: int | None = None) -> list[PolicyVerdict]:
    """``verdict`` of every run, in order; ``progress(done, total)`` as runs finish.

    From ``PARALLEL_FROM`` runs the work goes to ``workers`` processes (default: one per CPU;
    detection is CPU-bound Python, so threads would not help). Processes are spawned, never
    forked, because the caller (Streamlit) runs threads. ``workers=1`` stays in process.
    """
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if workers > 1 and len(runs) >= PARALLEL_FROM:
        return _replay_parallel(runs, policy, progress, workers)
    found = []
    for index, run in enumerate(runs, start=1):
        found.append(verdict(run, policy))
        if progress is not None and (index % 100 == 0 or index == len(runs)):
            progress(index, len(runs))
    return found


def worker_pool(workers: int, initializer: Callable[[], None] = lower_priority
                ) -> ProcessPoolExecutor:
    """Processes for work behind the page: spawned, never forked (the caller, Streamlit, runs
    threads), each started by ``initializer`` (default: the idle scheduling class,
    ``lower_priority``). Submit under ``neutral_main``: workers are spawned as tasks are
    submitted."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(
        "spawn"), initializer=initializer)


def _replay_parallel(runs: Sequence[StoredRun], policy: Policy,
                     progress: Callable[[int, int], None] | None,
                     workers: int) -> list[PolicyVerdict]:
    chunks = [runs[i:i + _CHUNK] for i in range(0, len(runs), _CHUNK)]
    results: list[list[PolicyVerdict]] = [[] for _ in chunks]
    done = 0
    with worker_pool(workers) as pool:
        with neutral_main():  # workers are spawned as tasks are submitted
            futures = {pool.submit(replay_chunk, chunk, policy): i
                       for i, chunk in enumerate(chunks)}
        from concurrent.futures import as_completed

        for future in as_completed(futures):
            results[futures[future]] = future.result()
            done += len(results[futures[future]])
            if progress is not None:
                progress(done, len(runs))
    return [v for chunk in results for v in chunk]


_MAIN_LOCK: Final = threading.Lock()


@contextlib.contextmanager
def neutral_main() -> Iterator[None]:
    """Spawn workers under an empty ``__main__``. A spawned process first re-runs the parent's
    ``__main__`` script (as ``__mp_main__``), and under Streamlit that is the dashboard's
    ``app.py`` (the script runner installs it as ``__main__`` and leaves it there): each worker
    drew the Overview and started the Policy page's warm-up replay, whose workers did the same,
    a tree of processes that held both cores and outlived the dashboard. An empty module has
    neither a spec nor a file, so the workers run nothing but ``replay_chunk``."""
    with _MAIN_LOCK:
        saved = sys.modules.get("__main__")
        neutral = types.ModuleType("__main__")
        sys.modules["__main__"] = neutral
        try:
            yield
        finally:
            if sys.modules.get("__main__") is neutral:  # else a script run replaced it since
                if saved is None:
                    del sys.modules["__main__"]
                else:
                    sys.modules["__main__"] = saved


@dataclass(frozen=True, slots=True)
class Scorecard:
    """Totals of one policy's verdicts."""

    runs: int
    labelled_loops: int
    caught: int
    judged_stops: int
    """Runs with a detector's stop (a block or a stop) the false-kill rule could judge: the
    false-stop rate's n (docs/glossary.md)."""
    false_stops: int
    warned: int
    blocked: int
    stopped: int
    budget_stops: int
    calls_saved: int
    cost_saved: float

    def as_row(self) -> dict[str, Any]:
        """The scorecard as one table row."""
        return dataclasses.asdict(self)


def score(verdicts: Sequence[PolicyVerdict]) -> Scorecard:
    """Count caught loops, false stops, runs per strongest action and what stopping saved."""
    return Scorecard(
        runs=len(verdicts),
        labelled_loops=sum(v.label is True for v in verdicts),
        caught=sum(v.caught for v in verdicts),
        judged_stops=sum(v.kill_judged for v in verdicts),
        false_stops=sum(v.false_kill for v in verdicts),
        warned=sum(v.action == "warn" for v in verdicts),
        blocked=sum(v.action == "block" for v in verdicts),
        stopped=sum(v.action == "stop" for v in verdicts),
        budget_stops=sum(v.budget_stop for v in verdicts),
        calls_saved=sum(v.calls_saved for v in verdicts),
        cost_saved=round(sum(v.cost_saved for v in verdicts), 6),
    )


def changed(current: Sequence[PolicyVerdict], candidate: Sequence[PolicyVerdict]) -> pd.DataFrame:
    """The runs whose verdict differs between two policies (same runs, same order)."""
    rows = []
    for was, now in zip(current, candidate, strict=True):
        if (was.action, was.first_kill_call, was.stop_call) != (
                now.action, now.first_kill_call, now.stop_call):
            rows.append({"episode_id": now.episode_id,
                         "label": _label_name(now.label),
                         "current": _describe(was), "candidate": _describe(now),
                         "false_stop_now": now.false_kill, "caught_now": now.caught})
    return pd.DataFrame(rows, columns=["episode_id", "label", "current", "candidate",
                                       "false_stop_now", "caught_now"])


def _label_name(label: bool | None) -> str:
    return "" if label is None else "loop" if label else "no loop"


def verdicts_frame(verdicts: Sequence[PolicyVerdict]) -> pd.DataFrame:
    """One row per run: its verdict under a policy, as the page lists it."""
    return pd.DataFrame([{
        "episode_id": v.episode_id, "verdict": _describe(v), "action": v.action,
        "first_stop_call": v.first_kill_call, "stop_call": v.stop_call,
        "label": _label_name(v.label), "caught": v.caught,
        "false_stop": v.false_kill, "calls_saved": v.calls_saved,
        "cost_saved_usd": v.cost_saved} for v in verdicts],
        columns=["episode_id", "verdict", "action", "first_stop_call", "stop_call", "label",
                 "caught", "false_stop", "calls_saved", "cost_saved_usd"])


def episode_record(run: StoredRun) -> dict[str, Any]:
    """A stored run as an Episode JSONL record (docs/episode-format.md), so ``loopscope
    analyze`` can replay exactly what the page replayed."""
    episode = run.episode
    return {"episode_id": episode.episode_id, "task_type": episode.task_type,
            "outcome": episode.outcome, "steps": [dict(step) for step in episode.steps],
            "meta": dict(episode.meta)}


def _describe(v: PolicyVerdict) -> str:
    if v.stop_call is not None:
        return f"stop at call {v.stop_call} ({v.stop_reason})"
    if v.first_kill_call is not None:
        return f"{v.action} from call {v.first_kill_call}"
    if v.first_flag_call is not None:
        return f"warn from call {v.first_flag_call}"
    return "allow"


def sweep_values(setting: Setting, around: Any = None) -> list[Any]:
    """Five values around ``around`` (the setting's default when None): 2–6 for a count of
    3, steps of 0.05 for a similarity, halves to doubles for other numbers."""
    default = setting.default if around is None else around
    if setting.widget == "int":
        low = max(1, default - 1)
        return list(range(low, low + 5))
    if setting.widget == "float":
        if 0 < default <= 1:
            return [round(min(1.0, max(0.05, default + d)), 2)
                    for d in (-0.1, -0.05, 0.0, 0.05, 0.1)]
        return [round(default * f, 3) for f in (0.5, 0.75, 1.0, 1.5, 2.0)]
    raise ValueError(f"{setting.name} is not a number; only numbers can be swept")


def sweep(runs: Sequence[StoredRun], base: Mapping[str, Any], name: str,
          values: Sequence[Any], *,
          progress: Callable[[int, int], None] | None = None,
          replay: Replay | None = None,
          marks: Mapping[Any, str] | None = None) -> pd.DataFrame:
    """One scorecard per value of ``name`` (other settings from ``base``), replayed by
    ``replay`` (default ``replay_all``; the page passes its cache). ``marks`` names values in
    a ``policy`` column (``{3: "current", 4: "candidate"}``)."""
    replay = replay or replay_all
    rows = []
    total = len(values) * max(len(runs), 1)
    for i, value in enumerate(values):
        policy = build({**base, name: value})

        def step(done: int, _total: int, offset: int = i * len(runs)) -> None:
            if progress is not None:
                progress(offset + done, total)

        row = {name: value, **score(replay(runs, policy, progress=step)).as_row()}
        if marks is not None:
            row = {name: value, "policy": marks.get(value, ""), **row}
        rows.append(row)
    return pd.DataFrame(rows)


def sweep_around(setting: Setting, candidate: Any, current: Any) -> list[Any]:
    """``sweep_values`` around the candidate's value, with the current policy's value too
    (sorted), so the sweep always shows where the guards are now."""
    values = sweep_values(setting, candidate)
    if current not in values:
        values = sorted([*values, current])
    return values


class Replay(Protocol):
    """``replay_all``'s shape: verdicts of ``runs`` under ``policy``."""

    def __call__(self, runs: Sequence[StoredRun], policy: Policy, *,
                 progress: Callable[[int, int], None] | None = None) -> list[PolicyVerdict]: ...


def data_version(runs: Sequence[StoredRun]) -> str:
    """What the replayed data is: the runs and how many calls each has (a run that gained a
    call, or a new run, is another version)."""
    import hashlib

    digest = hashlib.blake2b(digest_size=12)
    for run in runs:
        digest.update(f"{run.episode_id}\x00{run.calls}\x00{run.label}\x00"
                      f"{run.first_loop_step}\x00{run.human_false_kill}\x01".encode())
    return digest.hexdigest()


class ReplayCache:
    """Verdicts by (data version, policy): a policy replayed once on one version of the data
    is never replayed again (the page reruns on every click). Keeps the ``size`` newest."""

    def __init__(self, size: int = 24, *, workers: int | None = None) -> None:
        self.size = size
        self.workers = workers
        """``replay_all``'s: None spreads a big replay over processes, 1 keeps it here."""
        self.entries: dict[tuple[str, str], list[PolicyVerdict]] = {}
        self.replays = 0
        """How many replays actually ran (the rest came from the cache)."""

    def keep(self, version: str, policy: Policy, verdicts: list[PolicyVerdict]) -> None:
        """Remember ``verdicts`` of ``policy`` on ``version`` (replayed elsewhere)."""
        key = (version, to_json(policy))
        self.entries.pop(key, None)  # (the newest last)
        self.entries[key] = verdicts
        while len(self.entries) > self.size:
            self.entries.pop(next(iter(self.entries)))

    def replay(self, version: str) -> Replay:
        """A ``Replay`` for one data version, answering from the cache where it can."""

        def run(runs: Sequence[StoredRun], policy: Policy, *,
                progress: Callable[[int, int], None] | None = None) -> list[PolicyVerdict]:
            found = self.entries.get((version, to_json(policy)))
            if found is None:
                found = replay_all(runs, policy, progress=progress, workers=self.workers)
                self.replays += 1
            self.keep(version, policy, found)
            return found

        return run


# -- the replay against what the guards recorded ---------------------------------------------

GUARD_COLUMNS: Final = ("episode_id", "guard_mode", "guard", "replay", "why")


def guard_recorded(runs: Sequence[StoredRun],
                   decisions: pd.DataFrame) -> dict[str, tuple[str, int | None, set[str]]]:
    """Per run a guard reported on: what it decided (its strongest decision, the call it
    first decided that, and the detectors it named), from the ``guard_decisions`` read (one
    row per call a guard reported; ``time_ns`` is the call's start)."""
    if decisions.empty:
        return {}
    calls_of: dict[str, dict[tuple[int, str], int]] = {}
    reported = set(decisions["episode_id"])  # number only those runs' calls
    for run in runs:
        if not run.rows or run.episode_id not in reported:
            continue
        start, tool = run.columns.index("start_ns"), run.columns.index("tool")
        calls_of[run.episode_id] = {(int(row[start]), str(row[tool])): run.call_number(i)
                                    for i, row in reversed(list(enumerate(_calls(run), 1)))}
    found: dict[str, tuple[str, int | None, set[str]]] = {}
    for episode_id, time_ns, tool, decision, action, flags in zip(
            decisions["episode_id"], decisions["time_ns"], decisions["tool"],
            decisions["decision"], decisions["action"], decisions["flags"], strict=True):
        calls = calls_of.get(episode_id)
        if calls is None:
            continue
        call = calls.get((int(time_ns), str(tool)))
        decided = decision if isinstance(decision, str) else action
        strongest, first, named = found.get(episode_id, ("allow", None, set()))
        rank = RANK.get(decided, 0) if isinstance(decided, str) else 0
        if call is not None and (rank > RANK[strongest] or (
                rank == RANK[strongest] and rank > 0 and (first is None or call < first))):
            strongest, first = str(decided), call
        if rank > 0 and flags is not None:
            named = named | {str(f) for f in list(flags)}
        found[episode_id] = (strongest, first, named)
    return found


def _calls(run: StoredRun) -> list[tuple[Any, ...]]:
    """The rows of a stored run that are tool calls (not messages), in order."""
    if "role" not in run.columns:
        return list(run.rows)
    role = run.columns.index("role")
    return [row for row in run.rows if row[role] is None]


def against_guards(runs: Sequence[StoredRun], verdicts: Sequence[PolicyVerdict],
                   decisions: pd.DataFrame) -> tuple[int, pd.DataFrame]:
    """How many runs a guard reported on, and those on which the replay (``verdicts``, one
    per run, same order) does not give what the guard recorded: its strongest action and the
    call it first took it. With the policy the guards ran, the replay still differs where the
    store lacks what the guard saw, which ``why`` names."""
    recorded = guard_recorded(runs, decisions)
    rows = []
    for run, v in zip(runs, verdicts, strict=True):
        if run.episode_id not in recorded:
            continue
        action, call, _named = recorded[run.episode_id]
        replayed = {"stop": v.stop_call, "block": v.first_kill_call,
                    "warn": v.first_flag_call}.get(v.action)
        if (action, call) == (v.action, replayed):
            continue
        rows.append({"episode_id": run.episode_id, "guard_mode": _mode_of(decisions, run),
                     "guard": "allow" if call is None else f"{action} at call {call}",
                     "replay": _describe(v), "why": _why(run)})
    return len(recorded), pd.DataFrame(rows, columns=list(GUARD_COLUMNS))


def _mode_of(decisions: pd.DataFrame, run: StoredRun) -> str:
    modes = decisions.loc[decisions["episode_id"] == run.episode_id, "mode"].dropna()
    return str(modes.iloc[0]) if not modes.empty else ""


def _why(run: StoredRun) -> str:
    """What the guard saw that the stored run lacks."""
    reasons = []
    text = [run.columns.index(c) for c in ("args_text", "output_text") if c in run.columns]
    if text and not any(row[i] is not None for row in _calls(run) for i in text):
        reasons.append("content not captured (the store has hashes, not arguments and "
                       "outputs)")
    gaps = gaps_in(run.call_number(n) for n in range(1, run.calls + 1))
    if gaps:
        reasons.append(f"{gap_text(gaps)} (the agent's spans of them never reached the store)")
    if len(_calls(run)) == len(run.rows):
        reasons.append("the model's messages are not stored (the agent did not record them: "
                       "`ep.record_message`)")
    return "; ".join(reasons)
