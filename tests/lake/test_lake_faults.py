"""Faults (issue 17, point 5): a collector killed with SIGKILL under load loses nothing it
acknowledged, the others keep acknowledging, and after a restart it rebuilds the detection
state of its open episodes from the lake."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from collector_process import CollectorProcess, eventually, start_collector
from lake_place import LakePlace, Postgres, running_postgres
from otlp_requests import episode_request, request, tool_span
from test_chaos_store import _tmpfs

from loopscope_collector.reads import read
from loopscope_collector.storage import open_lake
from loopscope_collector.storage.ducklake import Lake

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


def _health(node: CollectorProcess) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(node.url + "/healthz", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_catalog_down_fails_health_with_a_reason_and_recovers_without_a_restart(
        tmp_path: Path) -> None:
    """A PostgreSQL of its own, stopped under a running collector: spans get 503, /healthz
    says why; once it is back the collector attaches again by itself, and every acknowledged
    span is in the lake."""
    with running_postgres() as server:
        place = LakePlace(server.catalog(server.new_database()), tmp_path / "data")
        node = start_collector(tmp_path / "c.duckdb", grpc=False, extra=place.args)
        acked: list[str] = []
        try:
            body, ids = episode_request(5)
            assert node.post(body.SerializeToString())[0] == 200
            acked += ids
            server.stop()
            body, ids = episode_request(5)
            assert node.post(body.SerializeToString())[0] == 503
            code, reason = _health(node)
            assert code == 503 and reason.startswith("failing:")
            server.start()
            eventually(lambda: _health(node) == (200, "ok\n"), timeout=60)
            assert node.post(body.SerializeToString())[0] == 200
            acked += ids
        finally:
            log = node.stop()
        assert log.count("the store cannot be written") == 1, log
        db = open_lake(Lake.parse(place.catalog, str(place.data)), read_only=True)
        try:
            stored = {row[0] for row in db.cursor().execute("select span_id from spans")
                      .fetchall()}
        finally:
            db.close()
        assert set(acked) == stored


def _fill(disk: Path) -> Path:
    """Fill the disk with one file, to the last block (unbuffered: nothing is left to flush
    when it closes); returns it (delete it to free the space)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as handle:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    handle.write(b"\0" * chunk)
            except OSError:
                pass
    return filler


def test_a_full_data_path_fails_health_and_recovers(tmp_path: Path,
                                                   postgres: Postgres) -> None:
    """The lake's data directory on a small disk that fills under a running collector (as a
    full share would): 503 with the reason, then ok again, without a restart, once space is
    freed; every acknowledged span is in the lake."""
    with _tmpfs(tmp_path / "disk", "32m") as disk:
        place = LakePlace(postgres.catalog(postgres.new_database()), disk / "lake")
        node = start_collector(tmp_path / "c.duckdb", grpc=False, extra=place.args)
        acked: list[str] = []
        try:
            body, ids = episode_request(5)
            assert node.post(body.SerializeToString())[0] == 200
            acked += ids
            filler = _fill(disk)
            body, ids = episode_request(200)
            assert node.post(body.SerializeToString())[0] == 503
            code, reason = _health(node)
            assert code == 503 and reason.startswith("failing:")
            filler.unlink()
            eventually(lambda: _health(node) == (200, "ok\n"), timeout=60)
            assert node.post(body.SerializeToString())[0] == 200
            acked += ids
        finally:
            node.stop()
        db = open_lake(Lake.parse(place.catalog, str(place.data)), read_only=True)
        try:
            stored = {row[0] for row in db.cursor().execute("select span_id from spans")
                      .fetchall()}
        finally:
            db.close()
        assert set(acked) == stored
