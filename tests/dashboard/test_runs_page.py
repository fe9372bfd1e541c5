"""The Runs page and its read, the trace view's rows, runs in flight, faults and hints: the
reads on the collector's fixture store, the pages through AppTest on the real entrypoint, the
fallback to the last good answer against a real collector process stopped and restarted."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from collector_process import start_collector
from streamlit.testing.v1 import AppTest

import loopscope_dashboard
from loopscope_collector.reads import run_read
from loopscope_dashboard import queries, uploads, waterfall

pytestmark = pytest.mark.timeout(120)
APP = str(Path(loopscope_dashboard.__file__).parent / "app.py")


def _read(store: Path, name: str, **params: object) -> list[dict]:
    with duckdb.connect(str(store), read_only=True) as con:
        return run_read(con.cursor(), name, params)


def test_the_rate_chart_gets_at_most_the_points_it_asks_for(store_path: Path) -> None:
    """``no_progress_rate`` with ``points``: buckets as wide as it takes for that many per
    service at most (the Overview's chart over a month of calls is a few hundred points), every
    call counted once either way; without it, one bucket a ``bucket_s``."""
    minute = _read(store_path, "no_progress_rate", bucket_s=60)
    assert {r["bucket_s"] for r in minute} == {60}
    assert _read(store_path, "no_progress_rate", bucket_s=60, points=10_000) == minute
    for points in (1, 2):
        wide = _read(store_path, "no_progress_rate", points=points)
        assert len({r["bucket_s"] for r in wide}) == 1 and wide[0]["bucket_s"] > 60
        for service in {r["service"] for r in minute}:
            ours = [r for r in wide if r["service"] == service]
            assert len(ours) <= points + 1  # the span cut into points, on bucket edges
            assert sum(r["calls"] for r in ours) == sum(
                r["calls"] for r in minute if r["service"] == service)
            assert sum(r["no_progress"] for r in ours) == sum(
                r["no_progress"] for r in minute if r["service"] == service)


def test_run_list_searches_filters_sorts_and_pages_in_sql(store_path: Path) -> None:
    everything = _read(store_path, "run_list", limit=1000)
    assert len(everything) == everything[0]["total"] == len(_read(store_path, "episodes",
                                                                  limit=1000))
    # happened / enforce_would are episode_list's own (one fragment, run_truth)
    listed = {r["episode_id"]: r for r in _read(store_path, "episode_list", limit=1000)}
    for row in everything:
        assert (row["happened"], row["enforce_would"], row["kills"], row["tool_calls"]) == (
            listed[row["episode_id"]]["happened"], listed[row["episode_id"]]["enforce_would"],
            listed[row["episode_id"]]["kills"], listed[row["episode_id"]]["tool_calls"])
    # search: a piece of the task, any case; a tool's name; the agent
    task = next(r for r in everything if r["task"])
    piece = task["task"].split()[1].upper()
    found = _read(store_path, "run_list", search=piece, limit=1000)
    assert task["episode_id"] in {r["episode_id"] for r in found}
    with duckdb.connect(str(store_path), read_only=True) as con:
        users = {e for (e,) in con.execute(
            "select distinct episode_id from tool_calls where tool = 'poll_export'").fetchall()}
    assert {r["episode_id"] for r in _read(store_path, "run_list", search="POLL_exp",
                                           limit=1000)} == users
    # verdicts
    flagged = _read(store_path, "run_list", verdict="flagged", limit=1000)
    clean = _read(store_path, "run_list", verdict="not flagged", limit=1000)
    assert flagged and clean and len(flagged) + len(clean) == len(everything)
    assert all(r["flags"] > 0 for r in flagged) and all(r["flags"] == 0 for r in clean)
    stopped = _read(store_path, "run_list", verdict="stopped", limit=1000)
    assert stopped and all(r["happened"] == "stopped" for r in stopped)
    would = _read(store_path, "run_list", verdict="would stop", limit=1000)
    assert would and all(r["enforce_would"] == "stop" and r["happened"] != "stopped"
                         for r in would)
    # sorted and paged: pages of 5 by calls cover every run once, in order
    pages = [_read(store_path, "run_list", sort="calls", ascending=True, limit=5, offset=o)
             for o in range(0, len(everything), 5)]
    ordered = [r for page in pages for r in page]
    assert sorted(r["episode_id"] for r in ordered) == sorted(r["episode_id"]
                                                              for r in everything)
    assert [r["tool_calls"] for r in ordered] == sorted(r["tool_calls"] for r in everything)
    newest = _read(store_path, "run_list", sort="calls", limit=1)[0]
    assert newest["tool_calls"] == max(r["tool_calls"] for r in everything)


def test_runs_without_a_final_span_are_running_or_ended_without_a_summary(
        store_path: Path, tmp_path: Path) -> None:
    store = tmp_path / "copy.duckdb"
    shutil.copy(store_path, store)
    now = time.time_ns()
    with duckdb.connect(str(store)) as con:
        con.execute("""insert into episodes (episode_id, service, agent, start_ns, end_ns)
                       values ('live-one', 'svc', 'bot', $now - 10e9, $now - 1e9),
                              ('gone-one', 'svc', 'bot', $now - 7200e9, $now - 3600e9)""",
                    {"now": now})
    statuses = {r["episode_id"]: r["status"] for r in _read(store, "run_list", limit=1000)}
    assert statuses.pop("live-one") == "running"
    assert statuses.pop("gone-one") == "ended without a summary"
    assert set(statuses.values()) == {"ended"}
    assert [r["episode_id"] for r in _read(store, "run_list", status="running")] == [
        "live-one"]
    assert _read(store, "episode", episode_id="gone-one", stale_s=7200)[0]["status"] == \
        "running"


def test_runs_page_lists_searches_and_links_every_run(store_path: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/runs.py").run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert len(table) == len(_read(store_path, "run_list", limit=1000))
    assert table["open"].str.startswith("episode?episode=scn-").all()
    assert (table["status"] == "ended").all()
    at.text_input(key="q").input("healthy").run()
    table = at.dataframe[0].value
    assert len(table) >= 1 and table["agent"].str.contains("healthy").all()
    at.selectbox(key="verdict").select("flagged").run()
    assert not at.exception
    assert any("No run matches" in str(i.value) for i in at.info)


def test_the_trace_view_marks_calls_guard_actions_and_flags() -> None:
    spans = pd.DataFrame([
        {"span_id": "root", "parent_span_id": "", "name": "invoke_agent bot", "start_ns": 0,
         "end_ns": 9_000_000, "status_code": 0, "operation": "invoke_agent", "tool": None,
         "tokens_in": 900, "tokens_out": 90, "cost_usd": 0.01, "is_call": False},
        {"span_id": "m1", "parent_span_id": "root", "name": "chat gpt", "start_ns": 100_000,
         "end_ns": 1_000_000, "status_code": 0, "operation": "chat", "tool": None,
         "tokens_in": 300, "tokens_out": 30, "cost_usd": None, "is_call": False},
        {"span_id": "u1", "parent_span_id": "root", "name": "message user", "start_ns": 50_000,
         "end_ns": 60_000, "status_code": 0, "operation": None, "tool": None, "tokens_in": None,
         "tokens_out": None, "cost_usd": None, "is_call": False},
        *({"span_id": f"c{i}", "parent_span_id": "root", "name": "execute_tool search",
           "start_ns": i * 2_000_000, "end_ns": i * 2_000_000 + 500_000, "status_code": 0,
           "operation": "execute_tool", "tool": "search", "tokens_in": 0, "tokens_out": 0,
           "cost_usd": None, "is_call": True} for i in (1, 2, 3)),
    ]).assign(trace_id="t1")
    calls = pd.DataFrame({"span_id": ["c1", "c2", "c3"], "call": [1, 2, 3],
                          "guard_action": ["allow", "warn", "allow"],
                          "guard_decision": ["allow", "warn", "stop"]})
    flags = pd.DataFrame({"span_id": ["c2", "c3"], "kind": ["exact_repeat", "exact_repeat"],
                          "action": ["warn", "stop"]})
    rows = waterfall.span_rows(spans, calls, flags)
    assert list(rows["what"]) == ["agent", "message", "model", "tool", "tool", "tool"]
    assert list(rows["label"]) == ["invoke_agent bot", "message user", "chat gpt",
                                   "call 1 · search", "call 2 · search", "call 3 · search"]
    assert rows["duration_ms"].tolist() == [9.0, 0.01, 0.9, 0.5, 0.5, 0.5]
    figure = waterfall.trace_waterfall(spans, calls, flags)
    names = [trace.name for trace in figure.data]
    assert names == ["agent run", "model turn", "message", "tool call", "guard warned",
                     "enforce would stop"]
    would = next(t for t in figure.data if t.name == "enforce would stop")
    assert list(would.y) == ["  6. call 3 · search"]
    # a click on a bar or a marker names its span (the point as Streamlit's selection has it)
    bars = next(t for t in figure.data if t.name == "tool call")
    assert [waterfall.picked_span({"customdata": list(d)}) for d in bars.customdata] == [
        ("t1", "c1"), ("t1", "c2"), ("t1", "c3")]
    assert waterfall.picked_span({"customdata": list(would.customdata[0])}) == ("t1", "c3")
    assert waterfall.picked_span({"x": 1.0}) is None
    # rows in start order on the axis, whichever trace draws them
    assert list(figure.layout.yaxis.categoryarray) == [
        "  1. invoke_agent bot", "  2. message user", "  3. chat gpt", "  4. call 1 · search",
        "  5. call 2 · search", "  6. call 3 · search"]


def test_a_file_that_is_neither_format_is_named_with_its_line_and_problem() -> None:
    analysis = uploads.analyse("notes.json", b'{"hello": "world"}\n')
    message = uploads.unreadable(analysis)
    assert message is not None
    assert message.startswith("notes.json is neither OTLP JSON nor Episode JSONL: line 1: ")
    assert "episode_id" in message
    assert uploads.unreadable(uploads.analyse("empty.jsonl", b"")) is None
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/importer.py").run()
    assert not at.exception


def test_empty_pages_name_the_collector_in_use(empty_store_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(empty_store_path))
    monkeypatch.setenv("LOOPSCOPE_COLLECTOR_URL", "http://127.0.0.1:4999")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    hint = "\n".join(str(i.value) for i in at.info)
    assert "http://127.0.0.1:4999" in hint and "4318" not in hint
    at.switch_page("views/runs.py").run()
    assert "loopscope demo --endpoint http://127.0.0.1:4999" in at.info[0].value


def test_reads_answer_from_the_last_good_read_while_the_collector_is_down(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    collector = start_collector(tmp_path / "live.duckdb", grpc=False)
    monkeypatch.delenv("LOOPSCOPE_DB_SNAPSHOT")
    monkeypatch.setenv("LOOPSCOPE_COLLECTOR_URL", collector.url)
    try:
        assert queries.runs(limit=1)[1] == 0
        assert queries.probe().down_since is None
        collector.stop()
        queries.runs.clear()
        assert queries.runs(limit=1)[1] == 0  # the last good answer
        down = queries.connection()
        assert down.down_since is not None and down.last_good_at is not None
        assert "cannot reach the collector" in down.reason
        with pytest.raises(queries.CollectorUnreachable):
            queries.alerts(service="never-read")
        assert queries.probe().down_since == down.down_since
        collector = start_collector(collector.db, grpc=False, http_port=collector.http_port)
        assert queries.probe().down_since is None
        assert queries.alerts(service="never-read").empty
    finally:
        collector.stop()
