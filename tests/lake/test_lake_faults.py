"""Faults (issue 17, point 5): a collector killed with SIGKILL under load loses nothing it
acknowledged, the others keep acknowledging, and after a restart it rebuilds the detection
state of its open episodes from the lake."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from collector_process import CollectorProcess, eventually, start_collector
from lake_place import LakePlace
from otlp_requests import episode_request, request, tool_span

from loopscope_collector.reads import read
from loopscope_collector.storage import open_lake
from loopscope_collector.storage.lake import Lake

pytestmark = pytest.mark.timeout(600)

REQUESTS = 25
"""Requests each load thread sends (bounded: the test stops by itself)."""


def _spin(trace: bytes, first: int, last: int) -> bytes:
    """Calls ``first``..``last - 1`` of one episode that repeats one search."""
    return request([tool_span(trace, bytes([7, i, 0, 0, 0, 0, 0, 1]), tool="search",
                              args='{"q": "same"}', result="same", start_ns=10**18 + i * 10**7)
                    for i in range(first, last)]).SerializeToString()


def test_kill_9_of_one_of_three_loses_nothing_acknowledged_and_the_others_keep_going(
        lake: LakePlace, tmp_path: Path) -> None:
    nodes = [start_collector(tmp_path / f"c{i}.duckdb", grpc=False,
                             extra=[*lake.args, "--instance", f"c{i}"]) for i in range(3)]
    spin = bytes([7] * 16)
    acked: list[list[str]] = [[], [], []]
    refused: list[list[int]] = [[], [], []]
    victim_busy = threading.Event()

    def load(i: int, node: CollectorProcess) -> None:
        for n in range(REQUESTS):
            body, ids = episode_request(200, repeat=n % 3 == 0)
            try:
                status = node.post(body.SerializeToString())[0]
            except OSError:  # the killed collector: its connection is gone
                return
            if status == 200:
                acked[i].extend(ids)
            else:
                refused[i].append(status)
            if i == 1 and n == 3:
                victim_busy.set()

    try:
        assert nodes[1].post(_spin(spin, 0, 2))[0] == 200  # an open episode: two calls
        threads = [threading.Thread(target=load, args=(i, node)) for i, node in
                   enumerate(nodes)]
        for thread in threads:
            thread.start()
        assert victim_busy.wait(120)
        nodes[1].kill()  # SIGKILL, with requests in flight
        for thread in threads:
            thread.join(300)
        assert refused[0] == [] and refused[2] == []
        assert len(acked[0]) == len(acked[2]) == REQUESTS * 200
        port = nodes[1].http_port
        nodes[1] = start_collector(tmp_path / "c1.duckdb", grpc=False, http_port=port,
                                   extra=[*lake.args, "--instance", "c1"])
        assert nodes[1].post(_spin(spin, 2, 3))[0] == 200  # the third identical call
        flags = eventually(lambda: nodes[1].read("episode_detections",
                                                 episode_id=spin.hex()))
    finally:
        for node in nodes:
            node.stop()
    assert {f["span_id"] for f in flags} == {bytes([7, 2, 0, 0, 0, 0, 0, 1]).hex()}
    db = open_lake(Lake.parse(lake.catalog, str(lake.data)), read_only=True)
    try:
        cur = db.cursor()
        stored = [row[0] for row in cur.execute("select span_id from spans").fetchall()]
        calls = cur.execute("select count(*), count(distinct (trace_id, span_id)) "
                            "from tool_calls").fetchall()[0]
        summary = read(db, "summary")[0]
    finally:
        db.close()
    assert len(stored) == len(set(stored)), "no span stored twice"
    assert calls[0] == calls[1], "no tool call stored twice"
    everything_acked = {*acked[0], *acked[1], *acked[2]}
    assert everything_acked <= set(stored), "every acknowledged span is in the lake"
    assert acked[1], "the killed collector acknowledged some before it died"
    assert summary["tool_calls"] == calls[0]
