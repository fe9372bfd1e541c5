"""Every page through AppTest on the real entrypoint, reading a store the collector built."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from app_pages import app
from streamlit.testing.v1 import AppTest

import loopscope_dashboard
from loopscope_dashboard import state

APP = str(Path(loopscope_dashboard.__file__).parent / "app.py")  # from_file resolves a
# relative path against the calling file; build it from the package instead
PAGES = ("views/overview.py", "views/episode.py", "views/loops.py", "views/alerts.py",
         "views/labels.py", "views/importer.py")

pytestmark = pytest.mark.timeout(120)


def _page(path: str, *, episode: str | None = None) -> AppTest:
    at = app().run()
    assert not at.exception
    at.switch_page(path)
    if episode is not None:  # a deep link: /episode?episode=ID
        at.query_params["episode"] = episode
    at.run()
    assert not at.exception, at.exception
    return at


def _charts(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def _texts(at: AppTest, kind: str) -> str:
    return "\n".join(str(e.value) for e in getattr(at, kind))


def _stopped_episode(store: Path) -> str:
    """The enforce-mode read spin, which its guard really stopped."""
    with duckdb.connect(str(store), read_only=True) as con:
        return con.execute("select episode_id from episodes where stop_reason ="
                           " 'repeated_tool_call' and episode_id like 'scn-read_spin-%'"
                           " order by episode_id limit 1").fetchone()[0]


def _would_be_stopped_episode(store: Path) -> str:
    """An observe-mode run that finished, with a would-be stop diagnostic."""
    with duckdb.connect(str(store), read_only=True) as con:
        return con.execute("select episode_id from episodes where guard_mode = 'observe'"
                           " and stop_reason = 'completed' and stop_diagnostic is not null"
                           " and episode_id like 'scn-read_spin-%'"
                           " order by episode_id limit 1").fetchone()[0]


def test_overview_shows_the_metric_cards_the_rate_chart_and_the_flagged_list() -> None:
    at = app().run()
    assert not at.exception
    cards = {m.label: m.value for m in at.metric}
    assert list(cards) == ["Loop-detection rate", "False-stop rate",
                           "UNKNOWN reconcile latency", "Cost per successful task"]
    assert cards["Cost per successful task"].startswith("$")
    assert cards["UNKNOWN reconcile latency"].endswith("s p50")
    assert "95% CI" in _texts(at, "caption")
    [rate] = _charts(at)
    names = {trace.get("name") for trace in rate["data"]}
    assert {"shop-agent", "support-agent", "alert fired"} <= names
    flagged = at.dataframe[0].value
    assert len(flagged) == 10
    assert flagged["open"].str.startswith("episode?episode=scn-").all()


def test_a_new_sessions_first_run_holds_its_charts_back_and_draws_the_rest() -> None:
    at = AppTest.from_file(APP, default_timeout=60).run()  # no browser has shown a page yet
    assert not at.exception
    assert not at.get("plotly_chart")
    assert "Drawing the chart…" in _texts(at, "caption")
    assert len(at.metric) == 4 and len(at.dataframe[0].value) == 10  # the rest is there
    at.session_state[state.CHARTS_DRAWN] = True  # what the browser's signal sets (plots)
    assert len(_charts(at.run())) == 1


def test_overview_trend_compares_with_the_window_before() -> None:
    at = app()
    at.session_state["range"] = "Last 24 hours"
    at.run()
    assert not at.exception
    assert len(at.metric) == 4


def test_episode_page_opens_from_a_deep_link(store_path: Path) -> None:
    episode_id = _stopped_episode(store_path)
    at = _page("views/episode.py", episode=episode_id)
    assert at.title[0].value == "shop-read_spin"  # the agent, with the task under it
    assert "**Task:** Lena Fischer" in _texts(at, "markdown")
    assert episode_id in _texts(at, "caption")
    timeline, trace = _charts(at)  # the timeline, then the trace view
    assert {t["name"] for t in trace["data"]} >= {"tool call", "guard stopped"}
    tools = {t["name"] for t in timeline["data"] if t.get("legendgroup")}
    assert 'search_orders({"limit":5,"q":"customer:C-19545 usb-c d…)' in tools
    assert any(shape.get("fillcolor", "").startswith("rgba(214") for shape in
               timeline["layout"].get("shapes", []))  # a shaded loop segment
    assert {"blocked", "stopped"} <= {t["name"] for t in timeline["data"]}
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["What happened"] == "stopped"
    steps = _steps(at)
    assert steps["args_text"].notna().all()  # content was captured
    assert at.json  # the stop diagnostic
    assert "Stopped at call 7 by " in _texts(at, "warning")


def test_an_observe_run_with_would_be_kills_is_not_shown_as_stopped(store_path: Path) -> None:
    """The guard only recorded what enforce would have done: every part of the page says the
    run was allowed and finished, and names the would-be stop as such."""
    episode_id = _would_be_stopped_episode(store_path)
    at = _page("views/episode.py", episode=episode_id)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["What happened"] == "allowed"
    assert metrics["Enforce mode would have"] == "would stop"
    assert "Stopped" not in _texts(at, "warning")
    story = _texts(at, "info")
    assert "Not stopped: this observe-mode run ended with stop reason completed" in story
    assert "Enforce mode would have stopped it at call" in story
    timeline, trace = _charts(at)  # the timeline, then the trace view
    marked = {t["name"] for t in trace["data"]}
    assert "enforce would stop" in marked and "guard stopped" not in marked
    names = {t["name"] for t in timeline["data"]}
    assert "would stop (enforce)" in names
    assert not {"blocked", "stopped", "warned"} & names
    guard = next(d.value for d in at.dataframe if "enforce_would" in d.value.columns)
    assert set(guard["happened"]) == {"allowed"}
    assert "would stop" in set(guard["enforce_would"])
    # the flags agree with the guard decisions: a flag that starts at warn says the guard's
    # ladder then went to "would stop" at the very call Guard decisions names
    flags = next(d.value for d in at.dataframe if "climbed_to" in d.value.columns)
    would_stop = guard.loc[guard["enforce_would"] == "would stop", "call"].iloc[0]
    assert f"would stop at call {would_stop}" in set(flags["climbed_to"])
    assert not any(str(t).startswith(("stopped", "blocked")) for t in flags["climbed_to"])
    for page in ("views/overview.py", "views/labels.py"):
        listed = next(d.value for d in _page(page).dataframe if "happened" in d.value.columns)
        row = listed[listed["open"].str.endswith(episode_id)].iloc[0]
        assert (row["happened"], row["would_be"], row["stops"]) == ("allowed", "would stop", 0)
        assert row["would_stops"] > 0


def test_step_numbers_agree_between_steps_flags_and_the_diagnostic(store_path: Path) -> None:
    """One numbering, the tool-call ordinal: call 1 is the first tool call; the diagnostic's
    stop lands on the Steps row the guard stopped, and its streak counts the calls before."""
    episode_id = _stopped_episode(store_path)
    at = _page("views/episode.py", episode=episode_id)
    steps = _steps(at)
    assert list(steps["call"]) == list(range(1, len(steps) + 1))
    stopped = steps[steps["guard_action"] == "stop"].iloc[0]
    assert f"Stopped at call {stopped['call']} " in _texts(at, "warning")
    assert (f"{stopped['shown_streak']} call(s) without progress up to call "
            f"{stopped['call']}, that call included") in _texts(at, "warning")
    flags = next(d.value for d in at.dataframe if "detector" in d.value.columns)
    assert set(flags["call"]) <= set(steps["call"])
    assert stopped["call"] in set(flags["call"])
    # one numbering and one vocabulary in the flags table and its CSV: no 0-based ordinal,
    # no "kill" severity; each flag says where the guard's ladder went, as Guard decisions do
    assert not {"ordinal", "severity"} & set(flags.columns)
    assert set(flags["action"]) <= {"warn", "block", "stop"}
    assert f"stopped at call {stopped['call']}" in set(flags["climbed_to"])


def test_analyze_json_names_the_same_call_as_the_episode_page(
        store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The scripted run the store holds, replayed by ``loopscope analyze --json``: its stop
    flag's ``call`` is the call the Episode page says the guard stopped."""
    from loopscope.offline.cli import main
    from loopscope.offline.scenarios import generate, write_jsonl

    episode_id = _stopped_episode(store_path)
    [script] = generate(seed=0, per_shape=1, shapes=("read_spin",), faults=False)
    write_jsonl(str(tmp_path / "runs.jsonl"), [script])
    capsys.readouterr()
    assert main(["analyze", str(tmp_path / "runs.jsonl"), "--json"]) == 0
    [replayed] = json.loads(capsys.readouterr().out)["episodes"]
    stop_call = next(f["call"] for f in replayed["flags"] if f["action"] == "stop")
    at = _page("views/episode.py", episode=episode_id)
    steps = _steps(at)
    assert f"Stopped at call {stop_call} " in _texts(at, "warning")
    assert steps.loc[steps["call"] == stop_call, "guard_action"].item() == "stop"


def _steps(at: AppTest):
    return next(d.value for d in at.dataframe if "tool" in d.value.columns
                and "signature" in d.value.columns)


def test_episode_page_says_when_an_episode_is_missing() -> None:
    at = _page("views/episode.py", episode="no-such-run")
    assert "has no run 'no-such-run'" in _texts(at, "warning")


def test_loops_page_ranks_looping_calls_and_its_costs_add_up() -> None:
    at = _page("views/loops.py")
    assert at.metric[0].value == "10 of 16 runs"
    card = float(at.metric[1].value.lstrip("$").replace(",", ""))
    signatures = next(d.value for d in at.dataframe if "args_preview" in d.value.columns)
    assert signatures["args_preview"].notna().all()  # content was captured
    assert "capture_content=True" not in _texts(at, "caption")  # nothing to turn on
    assert (signatures["calls"].diff().dropna() <= 0).all()  # most calls first
    assert signatures["strip"].map(lambda s: set(s) <= {0, 1} and 1 in s).all()
    tools = next(d.value for d in at.dataframe if "flagged_runs" in d.value.columns
                 and "flags" in d.value.columns)
    assert tools["cost_in_loops_usd"].sum() == pytest.approx(card, abs=1e-4)
    assert (tools["cost_in_loops_usd"] > 0).any()
    assert (tools["cost_in_loops_usd"].diff().dropna() <= 0).all()  # most cost first
    rankings = [d.value for d in at.dataframe
                if list(d.value.columns) in (["tool", "flags"], ["key", "loops_detected"])]
    assert len(rankings) == 3  # by tool, agent and model, bars in the cells
    for ranked in rankings:
        counts = ranked.iloc[:, 1]
        assert len(ranked) and (counts > 0).all() and (counts.diff().dropna() <= 0).all()
    assert list(rankings[0]["tool"]) == list(
        tools[tools["flags"] > 0].sort_values(["flags", "tool"], ascending=[False, True])["tool"])
    assert not _charts(at)  # no Plotly: its script held this page back in a fresh browser


def test_alerts_page_draws_the_series_the_rule_evaluated_and_its_threshold() -> None:
    """The fixture's rule: a 3600 s window and a 30% threshold (fixture_store.build_store);
    the plotted window rate at the firing is the rate the alert fired at."""
    at = _page("views/alerts.py")
    assert at.metric[0].value == "2"
    charts = _charts(at)
    assert len(charts) == 2
    for chart in charts:
        assert any(shape.get("y0") == 0.3 for shape in chart["layout"]["shapes"])
        assert any("threshold 30%" in note.get("text", "")
                   for note in chart["layout"]["annotations"])
        names = {t["name"] for t in chart["data"]}
        assert {"no-progress rate (3600 s)", "fired"} <= names
    assert "No baseline yet" in _texts(at, "caption")
    assert "**Sent to:** webhook hooks.example.com, Prometheus (/metrics)." in _texts(
        at, "caption")


def test_the_alert_series_at_the_firing_is_the_rate_that_fired() -> None:
    from loopscope_dashboard import queries

    for _, alert in queries.alerts().iterrows():
        series = queries.alert_series(alert)
        at = series[series["bucket"] >= alert["fired_at"]].iloc[0]
        assert at["rate"] == pytest.approx(alert["rate"])
        assert at["calls"] == alert["volume"]


def test_labels_page_needs_a_live_collector_for_a_file() -> None:
    at = _page("views/labels.py")
    assert "Labels need a live collector" in _texts(at, "warning")
    assert at.button[0].disabled


def test_import_page_offers_the_uploader() -> None:
    at = _page("views/importer.py")
    assert at.get("file_uploader")
    assert "Choose a file" in _texts(at, "info")


@pytest.mark.parametrize("page", PAGES)
def test_every_page_has_an_empty_state(page: str, empty_store_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(empty_store_path))
    at = _page(page)
    said = _texts(at, "info") + _texts(at, "warning") + _texts(at, "success")
    assert said, "an empty page must say what to do next"


def test_overview_of_an_empty_store_says_how_to_send_runs(empty_store_path: Path,
                                                          monkeypatch) -> None:
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(empty_store_path))
    at = app().run()
    assert "No episodes yet" in _texts(at, "info")
    assert "loopscope demo --endpoint" in _texts(at, "info")


def test_alerts_empty_state(empty_store_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(empty_store_path))
    at = _page("views/alerts.py")
    assert "No alerts yet" in _texts(at, "info")


def test_a_missing_snapshot_is_a_message_not_a_traceback(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(tmp_path / "nope.duckdb"))
    at = app().run()
    assert not at.exception
    assert "no such DuckDB file" in _texts(at, "error")


def test_alerts_store_their_rule_and_the_chart_reads_it_not_the_message() -> None:
    """The fixture's collector judged with a 3600 s window and a 30% threshold: each alert
    row holds them, and the rule the chart draws is the stored one even when the message
    says otherwise."""
    from loopscope_dashboard import charts, queries

    rows = queries.alerts()
    assert not rows.empty
    assert set(rows["threshold"]) == {0.3} and set(rows["window_s"]) == {3600.0}
    assert set(rows["baseline_s"]) == {900.0} and set(rows["min_volume"]) == {5}
    alert = rows.iloc[0].copy()
    alert["message"] = "no-progress spike: 90% in the last 60 s (above the threshold 50%)"
    rule = queries.alert_rule(alert)
    assert (rule["threshold"], rule["window_s"]) == (0.3, 3600.0)
    figure = charts.alert_context(queries.alert_series(alert), alert, rule)
    assert any(shape.y0 == 0.3 for shape in figure.layout.shapes)
    assert "no-progress rate (3600 s)" in {trace.name for trace in figure.data}


def test_an_alert_without_a_stored_rule_falls_back_to_its_message() -> None:
    from loopscope_dashboard import queries

    old = {"message": "spike: 60% of 40 tool calls in the last 120 s made no progress "
                      "(above the threshold 45%)", "threshold": None, "window_s": None}
    rule = queries.alert_rule(old)
    assert (rule["threshold"], rule["window_s"]) == (0.45, 120.0)


def test_an_alert_fired_inside_a_bucket_sits_on_its_series(monkeypatch) -> None:
    """The rule judges at every commit, so an alert often fires inside a bucket and calls keep
    coming after it (``loopscope up --demo``: 52% of 46 calls at 04:54:08, while the bucket
    ending 04:54:10 held 35%). The series has the firing moment itself, at the alert's rate."""
    import pandas as pd

    from loopscope_dashboard import queries

    fired_ns = 1_000_000 * 1_000_000_000 + 3_400_000_000  # 3.4 s into a 5 s bucket
    # (start_ns, no progress): 10 looping calls before the firing, 30 healthy ones after it
    calls = ([(fired_ns - 3_000_000_000 + i * 100_000_000, True) for i in range(10)]
             + [(fired_ns - 1_000_000_000, False)] * 2
             + [(fired_ns + 100_000_000 + i * 10_000_000, False) for i in range(30)])

    def rates(*, bucket_s: int = 60, since_ns=None, until_ns=None, **_: object) -> pd.DataFrame:
        step = bucket_s * 1_000_000_000
        rows: dict[int, list[int]] = {}
        for start, stuck in calls:
            if (since_ns is None or start >= since_ns) and (until_ns is None
                                                            or start < until_ns):
                row = rows.setdefault(start // step * step, [0, 0])
                row[0] += 1
                row[1] += stuck
        return pd.DataFrame([{"bucket_ns": b, "service": "s", "calls": c, "no_progress": n}
                             for b, (c, n) in sorted(rows.items())])

    monkeypatch.setattr(queries, "no_progress_rate", rates)
    alert = {"fired_at": pd.Timestamp(fired_ns, unit="ns"), "rate": 10 / 12, "volume": 12,
             "service": "s", "window_s": 60.0, "threshold": 0.5, "factor": 3.0, "floor": 0.2,
             "message": ""}
    series = queries.alert_series(alert)
    at = series[series["bucket"] == alert["fired_at"]].iloc[0]
    assert (at["calls"], at["rate"]) == (12, pytest.approx(10 / 12))
    after = series[series["bucket"] > alert["fired_at"]].iloc[0]
    assert after["calls"] == 42  # the bucket's end holds the calls after the firing too
    assert list(series["bucket"]) == sorted(series["bucket"])


def _downloads(at: AppTest) -> set[str]:
    """The keys of the page's download buttons (``downloads.offer``: download_KEY_csv and
    download_KEY_parquet)."""
    return {str(e.proto.id) for e in at.get("download_button")}


@pytest.mark.parametrize(("page", "tables"), [
    ("views/episode.py", ("flags", "guard", "steps")),
    ("views/labels.py", ("flagged_to_label",)),
    ("views/overview.py", ("flagged",)),
])
def test_every_table_a_page_shows_can_be_downloaded_and_reads_no_none(
        page: str, tables: tuple[str, ...], store_path: Path) -> None:
    at = _page(page, episode=_stopped_episode(store_path) if "episode" in page else None)
    ids = " ".join(_downloads(at))
    for table in tables:
        assert f"download_{table}_csv" in ids and f"download_{table}_parquet" in ids, table
    # and an empty cell reads "—", never the grid's default "None" (issue 30)
    assert at.dataframe and {e.proto.placeholder for e in at.dataframe} == {"—"}


def test_a_snapshot_file_is_not_called_live() -> None:
    """``loopscope dashboard --db FILE`` reads a file that does not change."""
    at = app().run()
    assert not at.exception
    headers = [h.value for h in at.subheader]
    assert "Flagged runs" in headers
    assert not [h for h in headers if "live" in h.lower()]
