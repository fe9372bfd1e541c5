"""Two lake collectors whose housekeeping runs every second while both ingest: one
collector's merge never makes the other refuse a request (issue 17, point 5: the others keep
acknowledging), and every acknowledged call is in the lake once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from collector_process import eventually, metric_value, start_collector
from lake_place import LakePlace
from otlp_requests import episode_request, request

pytestmark = pytest.mark.timeout(300)

REQUESTS = 40
"""Requests per collector: 20 episodes of 6 calls (a trace each), each in two requests, so
that episodes rows are rewritten across commits while files are merged."""


def test_housekeeping_on_two_collectors_never_refuses_the_other_ones_requests(
        lake: LakePlace, tmp_path: Path) -> None:
    # Merges every second; the files they replace are kept 30 s (under the 1 h minimum, so
    # --unsafe-lake-keep): a request's batch on a machine loaded to 20 lasts over a second,
    # and a keep of 1 s deleted files it was still scanning (the race --lake-keep's minimum
    # exists for), which is not what this test is about.
    schedule = ["--lake-maintain-every", "1s", "--lake-keep", "30s", "--unsafe-lake-keep"]
    nodes = [start_collector(tmp_path / f"c{i}.duckdb", grpc=False,
                             extra=[*lake.args, "--instance", f"node-{i}", *schedule])
             for i in range(2)]
    statuses: dict[int, list[int]] = {0: [], 1: []}
    try:
        def feed(i: int) -> None:
            for _ in range(REQUESTS // 2):  # each episode in two requests, its later half
                spans = list(episode_request(6)[0].resource_spans[0].scope_spans[0].spans)
                for half in (spans[3:], spans[:3]):  # first: its row is rewritten (a delete)
                    body = request(half).SerializeToString()
                    statuses[i].append(nodes[i].post(body)[0])

        threads = [threading.Thread(target=feed, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if statuses != {0: [200] * REQUESTS, 1: [200] * REQUESTS}:
            logs = "\n".join(node.stop()[-3000:] for node in nodes)
            pytest.fail(f"requests refused: {statuses}\ncollectors' logs:\n{logs}")
        expected = 2 * (REQUESTS // 2) * 6
        eventually(lambda: nodes[0].read("summary")[0]["tool_calls"] == expected, timeout=60)
        assert nodes[1].read("summary")[0]["tool_calls"] == expected
        for node in nodes:  # both collectors' housekeeping ran (a run may lose a race: retried)
            eventually(lambda node=node: metric_value(node.get("/metrics"),
                                                  "loopscope_lake_housekeeping_runs_total") >= 1,
                       timeout=30)
    finally:
        for node in nodes:
            node.stop()

