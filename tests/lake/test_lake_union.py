"""Union equals one node (issue 17): the scenario library's episodes sent once to a single
collector with a DuckDB file, and once partitioned by trace id over three collectors into one
lake (as the OpenTelemetry Collector's load_balancing exporter routes them): the four metrics
(with n and intervals), the episode verdicts and the detections are equal; and the named
reads over the lake (``loopscope metrics``, ``export``, the dashboard) say what they say over
the file."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import streamlit as st
from collector_process import start_collector
from lake_place import LakePlace, Postgres
from streamlit.testing.v1 import AppTest

import loopscope_dashboard
from loopscope.detect.episode_records import parse_episode
from loopscope.offline.cli import main
from loopscope.offline.scenarios import generate
from loopscope_collector.metrics.compute import compute_metrics
from loopscope_collector.normalize.spans import SpanRecord
from loopscope_collector.runs.synthetic_spans import episode_spans
from loopscope_collector.storage import Database, open_database, open_lake
from loopscope_collector.storage.ducklake import Lake
from loopscope_dashboard.environment_variables import (
    COLLECTOR_URL_ENV,
    LAKE_DATA_ENV,
    LAKE_ENV,
    SNAPSHOT_ENV,
)
from loopscope_dashboard.uploads import otlp_json

pytestmark = pytest.mark.timeout(600)

BASE_NS = 1_760_000_000_000_000_000
APP = str(Path(loopscope_dashboard.__file__).parent / "app.py")
PER_REQUEST = 10
"""Episodes per export request (a batch of the SDK's exporter)."""


def scenario_traces() -> list[list[SpanRecord]]:
    """The scenario library (201 labelled episodes of every shape, faults included) as
    loopscope-shaped spans: one trace per episode."""
    episodes = generate(seed=7, per_shape=8)
    return [episode_spans(parse_episode(e), service="scenarios", base_ns=BASE_NS + i * 10**9)
            for i, e in enumerate(episodes)]


def send(url_post: Any, traces: Sequence[list[SpanRecord]]) -> None:
    """Each trace in two parts, its later half first and its earlier half in a second pass:
    spans that arrive out of order make the collector judge an episode again (verdicts
    rewritten, flags replaced), as exporters' batches can."""
    for part in (0, 1):
        for start in range(0, len(traces), PER_REQUEST):
            spans = [s for trace in traces[start:start + PER_REQUEST]
                     for s in (trace[:len(trace) // 2] if part else trace[len(trace) // 2:])]
            if spans:
                status = url_post(otlp_json(spans), content_type="application/json")[0]
                assert status == 200


def shard(trace_id: str, n: int) -> int:
    """A stable partition by trace id, as the load balancer's consistent hashing is."""
    return zlib.crc32(trace_id.encode()) % n


def outcome(db: Database) -> dict[str, Any]:
    """The four metrics, each episode's verdict, each call's and each flag."""
    cur = db.cursor()
    try:
        def rows(sql: str) -> list[tuple[Any, ...]]:
            return cur.execute(sql).fetchall()

        return {
            "metrics": compute_metrics(db),
            "episodes": rows("select episode_id, outcome, stop_reason, tool_calls, "
                             "first_flag_ns, scenario_loop, scenario_kind, start_ns, end_ns "
                             "from episodes order by episode_id"),
            "calls": rows("select trace_id, span_id, episode_id, signature, "
                          "collector_progress, collector_streak from tool_calls "
                          "order by trace_id, span_id"),
            "detections": rows("select episode_id, span_id, ordinal, detector, kind, "
                               "severity, action, message from detections "
                               "order by episode_id, span_id, detector"),
            "spans": rows("select count(*), count(distinct (trace_id, span_id)) from spans"),
        }
    finally:
        cur.close()


@dataclass(frozen=True)
class Union:
    """The same runs stored twice: by one collector in a file, by three in a lake."""

    file: Path
    lake: LakePlace
    traces: int


@pytest.fixture(scope="module")
def union(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> Union:
    tmp_path = tmp_path_factory.mktemp("union")
    lake = LakePlace(postgres.catalog(postgres.new_database()), tmp_path / "lake-data")
    traces = scenario_traces()
    single = start_collector(tmp_path / "one.duckdb", grpc=False)
    try:
        send(single.taken, traces)
    finally:
        single.stop()
    nodes = [start_collector(tmp_path / f"unused-{i}.duckdb", grpc=False, extra=lake.args)
             for i in range(3)]
    try:
        for i, node in enumerate(nodes):
            send(node.taken, [t for t in traces if shard(t[0].trace_id, 3) == i])
    finally:
        for node in nodes:
            node.stop()
    assert {shard(t[0].trace_id, 3) for t in traces} == {0, 1, 2}
    return Union(tmp_path / "one.duckdb", lake, len(traces))


def test_three_collectors_into_one_lake_equal_one_collector_on_a_file(union: Union) -> None:
    file_db = open_database(union.file, read_only=True)
    lake_db = open_lake(Lake.parse(union.lake.catalog, str(union.lake.data)), read_only=True)
    try:
        expected, found = outcome(file_db), outcome(lake_db)
    finally:
        file_db.close()
        lake_db.close()
    assert len(expected["episodes"]) == union.traces
    assert expected["detections"], "the scenarios hold loops"
    for key in ("episodes", "calls", "detections", "spans"):
        assert found[key] == expected[key], key
    assert found["metrics"] == expected["metrics"]


def test_loopscope_metrics_over_the_lake_prints_what_it_prints_over_the_file(
        union: Union, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--db", str(union.file), "--json"]) == 0
    over_file = json.loads(capsys.readouterr().out)
    assert main(["metrics", *union.lake.args, "--json"]) == 0
    over_lake = json.loads(capsys.readouterr().out)
    assert over_lake == over_file
    assert over_file["loop_detection_rate"]["n"] > 0


def test_loopscope_export_writes_the_lakes_tables(union: Union, tmp_path: Path) -> None:
    assert main(["export", "--db", str(union.file), "--out", str(tmp_path / "file")]) == 0
    assert main(["export", *union.lake.args, "--out", str(tmp_path / "lake")]) == 0
    for table in ("episodes", "tool_calls", "detections", "spans"):
        assert (pq.read_metadata(tmp_path / "lake" / f"{table}.parquet").num_rows
                == pq.read_metadata(tmp_path / "file" / f"{table}.parquet").num_rows), table


def test_the_dashboard_over_the_lake_shows_what_it_shows_over_the_file(
        union: Union, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Overview's four metric cards, read through the dashboard's lake source."""
    def cards(**env: str) -> dict[str, str]:
        for name in (SNAPSHOT_ENV, LAKE_ENV, LAKE_DATA_ENV, COLLECTOR_URL_ENV):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        st.cache_data.clear()
        st.cache_resource.clear()
        at = AppTest.from_file(APP, default_timeout=120).run()
        assert not at.exception
        return {m.label: m.value for m in at.metric}

    over_file = cards(LOOPSCOPE_DB_SNAPSHOT=str(union.file))
    over_lake = cards(LOOPSCOPE_LAKE=union.lake.catalog,
                      LOOPSCOPE_LAKE_DATA=str(union.lake.data))
    st.cache_data.clear()
    st.cache_resource.clear()
    assert len(over_file) == 4
    assert over_lake == over_file
