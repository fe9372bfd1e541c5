"""A run whose calls' spans were partly lost on the way to the store, as a user meets it on the
Episode page: the calls keep the agent's numbers, the gaps are named, and "would stop at call
N" / "Stopped at call N" give the N the agent's own log and stop gave."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from app_pages import episode_page
from lossy_runs import AGENT, LOST
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.timeout(180)


def _texts(at: AppTest, kind: str) -> str:
    return "\n".join(str(e.value) for e in getattr(at, kind))


def _values(data: object) -> list:
    """A Plotly array as a list: figures send numbers as typed base64 (``bdata``)."""
    if isinstance(data, dict) and "bdata" in data:
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).tolist()
    return list(data or [])


def _table(at: AppTest, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_an_observe_run_with_lost_calls_keeps_the_agents_numbers_and_names_the_gap(
        lossy_store: tuple[Path, dict[str, int]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls 2–4 never arrived: the Steps table numbers the rest 1, 5, 6, … (not 1, 2, 3, …),
    the page says "Calls 2–4 not received", and the would-be stop is at the call the agent's
    log line named (call 8, which the collector holds as its 5th)."""
    store, stops = lossy_store
    at = episode_page(store, "lossy-observe", monkeypatch)
    assert at.title[0].value == AGENT
    steps = _table(at, "shown_streak")
    assert list(steps["call"]) == [1, 5, 6, 7, 8, 9, 10, 11]
    warning = _texts(at, "warning")
    assert "Calls 2–4 not received: the agent made 11 tool calls and 3 of their spans" in warning
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Tool calls"] == "8 of 11"
    would = stops["lossy-observe"]
    assert would == 8 and would not in LOST["lossy-observe"]
    assert f"Enforce mode would have stopped it at call {would} by " in _texts(at, "info")
    guard = _table(at, "enforce_would")
    assert guard.loc[guard["enforce_would"] == "would stop", "call"].iloc[0] == would
    flags = _table(at, "climbed_to")
    assert f"would stop at call {would}" in set(flags["climbed_to"])
    assert set(flags["call"]) <= set(steps["call"])
    timeline, trace = (json.loads(chart.proto.spec) for chart in at.get("plotly_chart"))
    notes = [a.get("text", "") for a in timeline["layout"].get("annotations", [])]
    assert "calls 2–4<br>not received" in notes
    used = next(t for t in timeline["data"] if t["name"] == "tool calls used")
    assert _values(used["y"]) == list(steps["call"])  # what the agent had used, gaps included
    named = {int(found[1]) for t in trace["data"] for y in _values(t.get("y"))
             if (found := re.search(r"\bcall (\d+) · ", str(y)))}
    assert named == set(steps["call"])  # the trace view names calls by the same numbers


def test_an_enforce_run_whose_stopped_call_was_lost_says_where_its_guard_stopped_it(
        lossy_store: tuple[Path, dict[str, int]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The call the guard stopped (the run's last, call 8) never arrived, nor did calls 2–4:
    the run's final span says the agent made 8 calls, so the page names both gaps, and the
    stop is at call 8, as the agent's ``LoopDetected`` said, not at a call the store holds."""
    store, stops = lossy_store
    at = episode_page(store, "lossy-enforce", monkeypatch)
    steps = _table(at, "shown_streak")
    assert list(steps["call"]) == [1, 5, 6, 7]
    assert "Calls 2–4 and 8 not received: the agent made 8 tool calls" in _texts(at, "warning")
    stopped = stops["lossy-enforce"]
    assert stopped == 8 and stopped in LOST["lossy-enforce"]
    assert f"Stopped at call {stopped} by " in _texts(at, "warning")
    assert {m.label: m.value for m in at.metric}["Tool calls"] == "4 of 8"


def test_the_policy_page_names_a_lossy_runs_calls_by_the_agents_numbers(
        lossy_store: tuple[Path, dict[str, int]]) -> None:
    """The Policy page's replay of the stored calls and the guard's own decision, side by
    side, are named by the agent's numbers, and the calls that never arrived are the reason
    the replay differs: the guard stopped at call 8, the replay, which never saw calls 2–4,
    at a later one."""
    import pandas as pd

    from loopscope.detect import Policy
    from loopscope_collector.reads import read
    from loopscope_collector.storage import open_database
    from loopscope_dashboard import replays

    store, stops = lossy_store
    db = open_database(store, read_only=True)
    try:
        runs = replays.stored_runs(pd.DataFrame(read(db, "replay_episodes", {})),
                                   read(db, "replay_calls", {}))
        decisions = pd.DataFrame(read(db, "guard_decisions", {"limit": 500}))
    finally:
        db.close()
    verdicts = replays.replay_all(runs, Policy())
    run = next(r for r in runs if r.episode_id == "lossy-observe")
    assert [run.call_number(n) for n in range(1, run.calls + 1)] == [1, 5, 6, 7, 8, 9, 10, 11]
    replayed = next(v for v in verdicts if v.episode_id == "lossy-observe")
    assert replayed.stop_call is not None and replayed.stop_call > 4  # an agent's number
    _, differs = replays.against_guards(runs, verdicts, decisions)
    row = differs.set_index("episode_id").loc["lossy-observe"]
    assert row["guard"] == f"stop at call {stops['lossy-observe']}"
    assert row["replay"].startswith(f"stop at call {replayed.stop_call} ")
    assert "calls 2–4 not received" in row["why"]
