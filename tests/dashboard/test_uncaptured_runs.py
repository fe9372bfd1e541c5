"""Runs whose content was not captured (the demo's scripts from agents with content capture off):
what the guard decided at the agent against what the collector, and a replay of the stored
runs, can tell from the store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from app_pages import APP, episode_page, policy_page
from streamlit.testing.v1 import AppTest

from loopscope_collector.reads import read
from loopscope_collector.storage import open_database
from loopscope_dashboard import truth

FUZZY = "scn-fuzzy_repeat-0-s0-enforce"

pytestmark = pytest.mark.timeout(180)


def _story_streak(story: str) -> tuple[int, int]:
    """(stop call, streak up to it) from a stop story."""
    found = re.search(r"at call (\d+) by .*?\((\d+) call\(s\) without progress up to "
                      r"call (\d+), that call included", story)
    assert found and found[1] == found[3], story
    return int(found[1]), int(found[2])


def test_the_steps_table_shows_the_guards_progress_where_content_was_not_captured(
        uncaptured_store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's fuzzy repeat, stopped by its guard at call 4 after 1 call without progress
    (its warning was answered in words, so it was not given twice):
    the Steps table says so (the guard saw new actions at calls 2 and 4), and shows the
    collector's own verdicts (none, a streak of 3) beside it, labelled, not instead."""
    at = episode_page(uncaptured_store_path, FUZZY, monkeypatch)
    story = "\n".join(str(w.value) for w in at.warning)
    assert ("Stopped at call 4 by fuzzy_repeat (1 call(s) without progress up to call 4, that "
            "call included") in story
    steps = next(d.value for d in at.dataframe if "shown_streak" in d.value.columns)
    by_call = steps.set_index("call")
    assert by_call.loc[4, "shown_streak"] == 1
    assert list(by_call["shown_progress"]) == ["new_info", "new_action", "none", "new_action"]
    assert set(by_call["progress_by"]) == {"guard"}
    assert by_call.loc[4, "collector_streak"] == 3  # what the table showed before
    captions = "\n".join(str(c.value) for c in at.caption)
    assert "Progress and no-progress streak are the guard's" in captions
    assert "The collector's own verdicts are beside them" in captions
    [table] = [d for d in at.dataframe if "shown_streak" in d.value.columns]
    order = list(table.proto.column_order)
    assert order.index("shown_streak") < order.index("collector_streak")


def test_every_demo_stop_says_the_streak_its_steps_table_shows(uncaptured_store_path: Path) -> None:
    """Over every enforce-mode run of the demo its guard stopped: the stop message's streak is
    the Steps table's at the stopped call (one number on the page), and the guard's own
    diagnostic counts the same calls, or all but the stopped one when the guard decided
    before the call ran. Several of these runs' collector streaks say otherwise."""
    db = open_database(uncaptured_store_path, read_only=True)
    try:
        episodes = [e for e in read(db, "episode_list", {"limit": 1000})
                    if e["guard_mode"] == "enforce" and e["happened"] == "stopped"]
        checked, collector_wrong = 0, []
        for row in episodes:
            episode = read(db, "episode", {"episode_id": row["episode_id"]})[0]
            diagnostic = json.loads(episode["stop_diagnostic"])
            calls = truth.number_calls(pd.DataFrame(
                read(db, "episode_tool_calls", {"episode_id": row["episode_id"]})))
            steps = truth.step_progress(calls)
            kind, story = truth.stop_story({**episode, "happened": "stopped"}, diagnostic,
                                           calls)
            assert kind == "stopped"
            at, streak = _story_streak(story)
            shown = steps.loc[steps["call"] == at, "shown_streak"]
            assert int(shown.iloc[0]) == streak, (row["episode_id"], story)
            assert diagnostic["no_progress_streak"] in (streak, streak - 1), story
            own = steps.loc[steps["call"] == at, "collector_streak"]
            if int(own.iloc[0]) != streak:
                collector_wrong.append(row["episode_id"])
            checked += 1
    finally:
        db.close()
    assert checked >= 15
    assert FUZZY in collector_wrong and len(collector_wrong) >= 3


def test_the_policy_page_lists_the_runs_its_replay_decides_otherwise_than_the_guard(
        uncaptured_store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the very policy the demo's guards ran as the current policy, the replay of the
    stored runs still differs from what the guards recorded on the runs whose content was not
    captured: the page counts them next to the current policy and lists them, with why. The
    demo's output stagnation, which its guard would have stopped at call 4, is one: without
    the outputs the replay cannot see that they said the same thing."""
    from demo_store import DEMO_BUDGET

    from loopscope_dashboard import replays

    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(uncaptured_store_path))
    at = policy_page()
    assert replays.build(json.loads(at.code[0].value)) == replays.build(DEMO_BUDGET)
    listed = next(d.value for d in at.dataframe if "why" in d.value.columns)
    row = listed[listed["open"].str.endswith("scn-output_stagnation-1-s0-observe")].iloc[0]
    assert (row["guard"], row["replay"]) == ("stop at call 4", "allow")
    assert "content not captured" in row["why"]
    assert not any("poll_timeout" in link for link in listed["open"])  # (the spans carry
    # the agent's clock: its deadlines replay as they ran)
    warning = "\n".join(str(w.value) for w in at.warning)
    assert f"On {len(listed)} of the " in warning
    compare = next(d.value for d in at.dataframe if "current" in d.value.columns
                   and "candidate" in d.value.columns)
    assert compare.loc["differs from guards", "current"] == len(listed)
    assert 10 <= len(listed) < 40  # most runs agree: the replay is the guard's core


def test_the_loops_page_says_how_to_capture_what_it_shows_as_not_captured(
        uncaptured_store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Arguments are opt-in (privacy): where the page shows "(not captured)", it says how to
    turn capture on."""
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(uncaptured_store_path))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/loops.py").run()
    assert not at.exception, at.exception
    signatures = next(d.value for d in at.dataframe if "args_preview" in d.value.columns)
    assert signatures["args_preview"].str.startswith("(not captured)").all()
    captions = "\n".join(str(c.value) for c in at.caption)
    assert "`loopscope.instrument(capture_content=True)`" in captions
