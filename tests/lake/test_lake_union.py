"""Union equals one node (issue 17): the scenario library's episodes sent once to a single
collector with a DuckDB file, and once partitioned by trace id over three collectors into one
lake (as the OpenTelemetry Collector's load_balancing exporter routes them): the four metrics
(with n and intervals), the episode verdicts and the detections are equal."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from collector_process import start_collector
from conftest import LakePlace

from loopscope.detect.replay import parse_episode
from loopscope.scenarios import generate
from loopscope_collector.metrics.compute import compute_metrics
from loopscope_collector.normalize.spans import SpanRecord
from loopscope_collector.offline.synthetic_spans import episode_spans
from loopscope_collector.storage import Database, open_database, open_lake
from loopscope_collector.storage.lake import Lake
from loopscope_dashboard.uploads import otlp_json

pytestmark = pytest.mark.timeout(600)

BASE_NS = 1_760_000_000_000_000_000
PER_REQUEST = 10
"""Episodes per export request (a batch of the SDK's exporter)."""


def scenario_traces() -> list[list[SpanRecord]]:
    """The scenario library (201 labelled episodes of every shape, faults included) as
    loopscope-shaped spans: one trace per episode."""
    episodes = generate(seed=7, per_shape=8)
    return [episode_spans(parse_episode(e), service="scenarios", base_ns=BASE_NS + i * 10**9)
            for i, e in enumerate(episodes)]


def send(url_post: Any, traces: Sequence[list[SpanRecord]]) -> None:
    for start in range(0, len(traces), PER_REQUEST):
        spans = [s for trace in traces[start:start + PER_REQUEST] for s in trace]
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


def test_three_collectors_into_one_lake_equal_one_collector_on_a_file(
        lake: LakePlace, tmp_path: Path) -> None:
    traces = scenario_traces()
    single = start_collector(tmp_path / "one.duckdb", grpc=False)
    try:
        send(single.post, traces)
    finally:
        single.stop()
    nodes = [start_collector(tmp_path / f"unused-{i}.duckdb", grpc=False, extra=lake.args)
             for i in range(3)]
    try:
        for i, node in enumerate(nodes):
            send(node.post, [t for t in traces if shard(t[0].trace_id, 3) == i])
    finally:
        for node in nodes:
            node.stop()
    file_db = open_database(tmp_path / "one.duckdb", read_only=True)
    lake_db = open_lake(Lake.parse(lake.catalog, str(lake.data)))
    try:
        expected, found = outcome(file_db), outcome(lake_db)
    finally:
        file_db.close()
        lake_db.close()
    assert len(expected["episodes"]) == len(traces)
    assert expected["detections"], "the scenarios hold loops"
    assert {shard(t[0].trace_id, 3) for t in traces} == {0, 1, 2}
    for key in ("episodes", "calls", "detections", "spans"):
        assert found[key] == expected[key], key
    assert found["metrics"] == expected["metrics"]
