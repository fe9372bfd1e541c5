"""The Policy page: a policy edited field by field, stored runs replayed through the core,
the comparison, the sweep, and an export that ``loopscope analyze --policy`` agrees with."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from app_pages import policy_page, replayed
from demo_store import otlp_json
from fixture_store import scenario_bodies
from streamlit.testing.v1 import AppTest

import loopscope_dashboard
from loopscope.detect import Policy
from loopscope.offline.cli import main
from loopscope_collector.reads import read
from loopscope_collector.storage import open_database
from loopscope_dashboard import replays, state

APP = str(Path(loopscope_dashboard.__file__).parent / "app.py")

pytestmark = pytest.mark.timeout(180)


def _stored(store: Path) -> list[replays.StoredRun]:
    import pandas as pd

    db = open_database(store, read_only=True)
    try:
        return replays.stored_runs(pd.DataFrame(read(db, "replay_episodes", {})),
                                   read(db, "replay_calls", {}))
    finally:
        db.close()


def _fields(at: AppTest) -> list:
    """The candidate editor's fields on the page."""
    return [e for e in (*at.number_input, *at.text_area, *at.checkbox)
            if e.key and e.key.startswith("policy_field_")]


def test_every_policy_field_is_a_setting_and_round_trips() -> None:
    """Fields the core adds appear without a change here; the export is a valid policy."""
    names = [s.name for s in replays.settings()]
    assert names == [f.name for f in dataclasses.fields(Policy)]
    assert {s.widget for s in replays.settings()} <= {"bool", "int", "float", "json"}
    policy = replays.build({"repeat_threshold": 4, "actions": {"exact_repeat": "warn"}})
    assert json.loads(replays.to_json(policy)) == {"repeat_threshold": 4,
                                                   "actions": {"exact_repeat": "warn"}}
    assert replays.build(json.loads(replays.to_json(policy))) == policy
    assert replays.to_json(Policy()) == "{}\n"
    with pytest.raises(ValueError, match="repeat_threshold"):
        replays.build({"repeat_threshold": 0})


def test_stored_runs_carry_their_labels_and_calls(store_path: Path) -> None:
    runs = _stored(store_path)
    assert len(runs) == 16
    spin = next(r for r in runs if r.episode.episode_id == "scn-read_spin-0-s0-observe")
    assert (spin.label, spin.label_source) == (True, "scenario")
    tools = [s for s in spin.episode.steps if s["type"] == "tool"]
    assert len(tools) == spin.calls == 8 and spin.episode.task_type == "lookup"
    assert [s["role"] for s in spin.episode.steps if s["type"] == "message"] == ["user"]
    healthy = next(r for r in runs if r.episode.episode_id.startswith("scn-healthy_lookup"))
    assert healthy.label is False


def test_a_looser_policy_catches_less_and_the_changes_are_listed(store_path: Path) -> None:
    runs = _stored(store_path)
    was = replays.replay_all(runs, Policy())
    now = replays.replay_all(runs, replays.build({"actions": {
        "exact_repeat": "warn"}}))
    before, after = replays.score(was), replays.score(now)
    assert before.stopped > after.stopped
    assert after.calls_saved <= before.calls_saved
    changes = replays.changed(was, now)
    assert "scn-read_spin-0-s0-observe" in set(changes["episode_id"])
    observe = next(v for v in was if v.episode_id == "scn-read_spin-0-s0-observe")
    assert observe.action == "stop" and observe.calls_saved == 8 - observe.stop_call


def test_policy_page_replays_compares_and_sweeps() -> None:
    closed = policy_page(opened=False)  # the policies' JSON, the editor, every run's verdict:
    assert closed.metric and not closed.code  # on a click
    assert not _fields(closed)
    assert not any("stop_call" in d.value.columns for d in closed.dataframe)
    assert any(c.value.startswith("The current policy, until you change a setting")
               for c in closed.caption)
    at = policy_page()
    assert len(at.code) == 2  # the current policy's JSON, the candidate's
    assert any("stop_call" in d.value.columns for d in at.dataframe)
    metrics = {m.label: m.value for m in at.metric}
    assert {"Loops caught", "False stops", "Runs warned", "Runs blocked", "Runs stopped",
            "Tool calls saved"} <= set(metrics)
    assert not metrics["Loops caught"].startswith("0 ")
    fields = _fields(at)
    keys = {e.key.removeprefix("policy_field_") for e in fields}
    assert {f.name for f in dataclasses.fields(Policy)} <= keys
    for field in fields:  # plain words, and help that names the policy file's key
        name = field.key.removeprefix("policy_field_")
        assert field.label == replays.FIELD_WORDS[name][0] and "_" not in field.label
        assert f"(policy file: `{name}`)" in field.help
    at.number_input(key="policy_field_repeat_threshold").set_value(6)
    replayed(at.button(key="FormSubmitter:policy_form-Replay with this policy").click().run())
    assert not at.exception, at.exception
    assert '"repeat_threshold": 6' in at.code[-1].value
    said = "Differs from the current policy in: Identical calls before a warning 3 → 6."
    assert any(c.value.startswith(said) for c in at.caption)
    at.session_state[state.POLICY_EDIT] = False  # the editor closed: the candidate stays
    at.run()
    assert not _fields(at) and '"repeat_threshold": 6' in at.code[-1].value
    assert any(c.value.startswith(said) for c in at.caption)
    at.session_state[state.POLICY_EDIT] = True  # and opened again, at the candidate's values
    assert at.run().number_input(key="policy_field_repeat_threshold").value == 6
    at.button(key="policy_sweep_run").click().run()
    assert not at.exception, at.exception
    sweep = next(json.loads(c.proto.spec) for c in at.get("plotly_chart"))
    assert {t["name"] for t in sweep["data"]} == {"loops caught", "false stops"}
    # around the candidate's 6, and the current policy's 3 (the guards'), marked
    assert [str(x) for x in sweep["data"][0]["x"]] == ["3", "5", "6", "7", "8", "9"]
    # each mark over its value: by position on the category axis (a number-like category
    # given by name is read as a position, which put "current" over the 7)
    assert {(a["text"], a["x"]) for a in sweep["layout"]["annotations"]} == {
        ("current", 0), ("candidate", 2)}
    assert sorted(s["x0"] for s in sweep["layout"]["shapes"]) == [0, 2]
    table = next(d.value for d in at.dataframe if "policy" in d.value.columns)
    assert dict(zip(table["repeat_threshold"], table["policy"], strict=True)) == {
        3: "current", 5: "", 6: "candidate", 7: "", 8: "", 9: ""}
    downloads = " ".join(str(e.proto.id) for e in at.get("download_button"))
    for table in ("policy_compare", "policy_sweep"):  # every table the page shows
        assert f"download_{table}_csv" in downloads and f"download_{table}_parquet" in downloads


def test_an_exported_policy_gives_analyze_the_verdicts_the_page_showed(
        demo_store_path: Path, demo_sdk_spans: list, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The policy the page exports, given to ``loopscope analyze --policy`` with the spans the
    store was built from as OTLP JSON (what an OpenTelemetry Collector's file exporter
    writes beside a loopscope collector): analyze gives every run the verdict the page
    showed, the runs whose content was not captured included (both see the same spans).

    The limit, tested in test_uncaptured_runs: a guard running the same policy live saw more
    than the spans hold there (content, messages, its clock) and can decide otherwise."""
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(demo_store_path))
    at = policy_page()
    actions = at.text_area(key="policy_field_actions")
    actions.input(json.dumps({"exact_repeat": "warn"}))
    replayed(at.button(key="FormSubmitter:policy_form-Replay with this policy").click().run())
    assert not at.exception, at.exception
    exported = tmp_path / "policy.json"
    exported.write_text(at.code[-1].value, encoding="utf-8")
    # the candidate started from the guards' policy (a budget) and changed one field
    assert replays.build(json.loads(exported.read_text())) == replays.build(
        {"actions": {"exact_repeat": "warn"}, "budgets": {"tool_calls": 40}})
    shown = next(d.value for d in at.dataframe if "stop_call" in d.value.columns)
    spans = tmp_path / "otel-traces.jsonl"
    spans.write_text(otlp_json(demo_sdk_spans), encoding="utf-8")
    capsys.readouterr()
    assert main(["analyze", str(spans), "--policy", str(exported), "--json"]) == 0
    analysed = {e["episode_id"]: e for e in json.loads(capsys.readouterr().out)["episodes"]}
    assert len(analysed) == len(shown) > 100
    for row in shown.itertuples():
        flags = analysed[row.episode_id]["flags"]
        stop = next((f["call"] for f in flags if f["action"] == "stop"), None)
        kill = next((f["call"] for f in flags if f["action"] in ("block", "stop")
                     and f["kind"] != "budget"), None)
        assert (None if row.stop_call != row.stop_call else row.stop_call) == stop
        assert (None if row.first_stop_call != row.first_stop_call
                else row.first_stop_call) == kill


def test_worker_processes_build_the_episodes_and_give_the_same_verdicts(
        store_path: Path) -> None:
    """A replay spread over spawned workers ships each run's raw rows (not an ``Episode``),
    the workers build the episodes by the collector's rule, and the verdicts are the ones
    the page's own process gives."""
    import pickle

    runs = _stored(store_path)
    assert all(r._built is None for r in runs)  # grouping only: no episode built yet
    parallel = replays._replay_parallel(runs, Policy(), None, 2)
    assert all(r._built is None for r in runs)  # built in the workers, not here
    assert parallel == replays.replay_all(runs, Policy(), workers=1)
    shipped = pickle.loads(pickle.dumps(runs[0]))
    assert shipped._built is None and shipped.rows == runs[0].rows
    assert shipped.episode == runs[0].episode and shipped.agent_steps == runs[0].agent_steps


def test_replay_workers_do_not_rerun_the_script_that_started_them(
        store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under Streamlit, ``__main__`` is the dashboard's script. A spawned worker re-runs its
    parent's ``__main__``; the dashboard's did the Overview and a warm-up replay with workers
    of its own, which did the same: a tree of processes. The workers must run only the replay,
    and the script's own ``__main__`` is back once they are started; ``app.py`` run as a
    worker's ``__mp_main__`` draws and starts nothing."""
    import runpy
    import sys
    import types

    marker = tmp_path / "ran"
    script = tmp_path / "app_like.py"
    script.write_text(f"open({str(marker)!r}, 'a').write('ran\\n')\n")
    streamlit_main = types.ModuleType("__main__")
    streamlit_main.__file__ = str(script)  # as Streamlit's script runner leaves it
    monkeypatch.setitem(sys.modules, "__main__", streamlit_main)
    runs = _stored(store_path)
    replays._replay_parallel(runs, Policy(), None, 2)
    assert not marker.exists(), marker.read_text()
    assert sys.modules["__main__"] is streamlit_main

    from loopscope_dashboard import replay_jobs
    drawn: list[str] = []
    monkeypatch.setattr(st, "set_page_config", lambda **_: drawn.append("page"))
    monkeypatch.setattr(replay_jobs, "warm", lambda: drawn.append("replay"))
    runpy.run_path(APP, run_name="__mp_main__")
    assert drawn == []


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux's idle scheduling class")
def test_replay_workers_take_only_cpu_nothing_else_wants() -> None:
    """A replay's worker processes run in the idle scheduling class (``lower_priority``), not
    merely at a lower nice value, which still slows the page being opened."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from loopscope_dashboard.replay_runs import lower_priority

    with ProcessPoolExecutor(1, mp_context=get_context("spawn"),
                             initializer=lower_priority) as pool:
        assert pool.submit(os.sched_getscheduler, 0).result(timeout=60) == os.SCHED_IDLE


def test_on_captured_runs_the_replay_gives_what_the_guards_recorded() -> None:
    """Content captured (the fixture store's agents), the current policy the guards ran: the
    replay of every stored run gives what its guard recorded (strongest action, same call),
    and the page says so. Where content was not captured it cannot always (the list the page
    shows then is tested in test_uncaptured_runs)."""
    from loopscope_dashboard import state

    at = policy_page()
    # the current policy is the one the guards recorded, not the library default
    assert replays.build(json.loads(at.code[0].value)) == replays.build(
        {"budgets": {"tool_calls": 40}})
    assert at.number_input(key="policy_field_repeat_threshold").value == 3
    assert json.loads(at.text_area(key="policy_field_budgets").value)["tool_calls"] == 40
    assert state.POLICY_RECORDED not in at.session_state  # one policy: nothing to choose
    assert "On all 16 runs a guard reported on, the replay under the current policy gives " \
        "what the guard recorded" in "\n".join(str(s.value) for s in at.success)
    compare = next(d.value for d in at.dataframe if "candidate" in d.value.columns)
    assert compare.loc["differs from guards", "current"] == 0


def test_invalid_json_keeps_the_last_results_and_replays_are_cached(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A typo in a JSON field shows an error naming the field and keeps the last results;
    going back to a policy already replayed on the same data replays nothing, nor does the
    first visit after the dashboard restarts."""
    from loopscope_dashboard import replay_jobs

    at = policy_page()
    cache = replay_jobs.jobs()
    assert cache.replay_count == 1  # the candidate starts as the current policy: one replay
    shown = {m.label: m.value for m in at.metric}
    at.text_area(key="policy_field_actions").input('{"exact_repeat": "warn"')
    replayed(at.button(key="FormSubmitter:policy_form-Replay with this policy").click().run())
    assert not at.exception, at.exception
    errors = "\n".join(str(e.value) for e in at.error)
    assert "Strongest action per detector (`actions`): not valid JSON" in errors
    assert {m.label: m.value for m in at.metric} == shown
    assert any("last valid candidate" in str(w.value) for w in at.warning)
    at.text_area(key="policy_field_actions").input('{"exact_repeat": "warn"}')
    replayed(at.button(key="FormSubmitter:policy_form-Replay with this policy").click().run())
    assert cache.replay_count == 2  # the new candidate only
    at.text_area(key="policy_field_actions").input("{}")
    replayed(at.button(key="FormSubmitter:policy_form-Replay with this policy").click().run())
    assert not at.exception, at.exception
    assert cache.replay_count == 2  # back to a policy replayed before: from the cache
    assert {m.label: m.value for m in at.metric} == shown
    # the dashboard restarted (a new process's replays): the first visit shows the replay
    # kept in LOOPSCOPE_REPLAY_CACHE at once, says when it ran, and replays nothing (the data
    # did not change)
    st.cache_resource.clear()
    again = policy_page()
    assert replay_jobs.jobs().replay_count == 0
    assert {m.label: m.value for m in again.metric} == shown
    assert any("before the dashboard started (kept from its last run)" in str(c.value)
               for c in again.caption)


def test_a_sweep_and_a_calibration_outlive_the_next_replay_of_a_live_collector(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a live collector a new replay lands whenever the data changed (every REFRESH_S at
    most): what the user swept or calibrated stays on the page, saying which data it was of."""
    from collector_process import eventually, start_collector

    from loopscope_dashboard import queries, replay_jobs

    def send(shapes: tuple[str, ...], seed: int) -> None:
        queries.send_traces(scenario_bodies(shapes, seed=seed, service="live"))

    collector = start_collector(tmp_path / "live.duckdb", grpc=False)
    monkeypatch.delenv("LOOPSCOPE_DB_SNAPSHOT")
    monkeypatch.setenv("LOOPSCOPE_COLLECTOR_URL", collector.url)
    monkeypatch.setattr(replay_jobs, "REFRESH_S", 0.0)  # replay again at once when data changed
    try:
        send(("read_spin", "healthy_lookup"), seed=0)
        eventually(lambda: queries.runs(limit=1)[1] == 2 or queries.runs.clear())
        at = policy_page(opened=False)
        at.button(key="policy_sweep_run").click().run()
        at.button(key="policy_calibrate_run").click().run()
        assert not at.exception, at.exception
        assert at.get("plotly_chart") and "too few" in at.info[-1].value.lower()
        assert not any("the data has changed since" in c.value for c in at.caption)
        send(("oscillation",), seed=1)  # a new run: another data version
        eventually(lambda: queries.runs(limit=1)[1] == 3 or queries.runs.clear())
        replayed(at.run())
        assert any("3 runs" in c.value for c in at.caption)  # the new replay is shown
        assert at.get("plotly_chart") and "too few" in at.info[-1].value.lower()
        older = [c.value for c in at.caption if "the data has changed since" in c.value]
        assert [c.split(" of the runs")[0] for c in older] == [
            "This sweep is", "This calibration is"]
    finally:
        collector.stop()


def test_the_warm_up_replays_in_a_worker_process_and_the_page_starts_from_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up's replay (its reads, the runs built from them, both policies, the
    comparison with the guards, the file kept for the next start) runs in a worker process, so
    the dashboard's interpreter stays free for the page being drawn: this process replays
    nothing, yet the default view is there, equal to a replay here, a sweep or calibration
    starts from its verdicts, and a restarted dashboard finds it kept."""
    from collector_process import eventually, start_collector

    from loopscope_dashboard import queries, replay_jobs

    collector = start_collector(tmp_path / "warm.duckdb", grpc=False)
    monkeypatch.delenv("LOOPSCOPE_DB_SNAPSHOT")
    monkeypatch.setenv("LOOPSCOPE_COLLECTOR_URL", collector.url)
    try:
        queries.send_traces(scenario_bodies(("read_spin", "healthy_lookup", "oscillation"),
                                            seed=3, service="warm"))
        eventually(lambda: queries.runs(limit=1)[1] == 3 or queries.runs.clear())
        shared = replay_jobs.jobs()
        replay_jobs._warm_default(shared)
        params = {"limit": replay_jobs.DEFAULT_NEWEST}
        current = replay_jobs.current_policy(queries.guard_policies(**params))
        view = replay_jobs.View.of(params, current, current)
        running = shared.running(view)
        assert running is not None and running.label == replay_jobs.ELSEWHERE
        done = shared.wait(view, timeout_s=120)
        assert done is not None and shared.running(view) is None
        assert shared.replay_count == 0  # nothing replayed in this process
        here = replay_jobs.replay_view(view, current, current, ())
        assert (done.version, done.current, done.candidate) == (
            here.version, here.current, here.candidate)
        assert len(done.runs) == 3 and done.guarded[0] == here.guarded[0]
        pd.testing.assert_frame_equal(done.guarded[1], here.guarded[1])
        assert shared.replay_for(done.version)(done.runs, current) == done.current
        assert shared.replay_count == 0  # the sweep's first replay came from the worker's
        kept = replay_jobs.KeptReplays(queries.source_description()).load(view)
        assert kept is not None and kept.current == done.current  # for the next start
    finally:
        collector.stop()


def test_the_guards_policies_are_read_from_the_root_spans(demo_store_path: Path) -> None:
    """The read behind "Current policy": the demo's guards ran the defaults and a budget."""
    from demo_store import DEMO_BUDGET

    db = open_database(demo_store_path, read_only=True)
    try:
        rows = read(db, "guard_policies", {})
        assert len(rows) == 1
        assert replays.build(json.loads(rows[0]["policy"])) == replays.build(DEMO_BUDGET)
        assert rows[0]["runs"] == len(read(db, "replay_episodes", {}))
        assert rows[0]["modes"] == "enforce, observe"
    finally:
        db.close()
