"""Collectors writing one DuckLake (issue 17, point 1): the catalog in a real PostgreSQL, the
data in a local directory; a 200 means the lake transaction committed, so a second process
reading the lake finds every acknowledged span."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from collector_process import CollectorProcess, free_port, start_collector
from lake_place import LakePlace
from otlp_requests import episode_request

from loopscope.offline.cli import main
from loopscope_collector.reads import read
from loopscope_collector.storage import Database, open_lake
from loopscope_collector.storage.ducklake import Lake


def lake_collector(lake: LakePlace, tmp_path: Path, name: str = "c") -> CollectorProcess:
    """A collector writing ``lake`` (its ``--db`` is never opened)."""
    return start_collector(tmp_path / f"{name}-unused.duckdb", grpc=False, extra=lake.args)


@pytest.fixture
def reader(lake: LakePlace) -> Iterator[Database]:
    """The lake opened by the test process: a second process beside the collectors."""
    db = open_lake(Lake.parse(lake.catalog, str(lake.data)))
    yield db
    db.close()


def _spans(db: Database) -> list[str]:
    cur = db.cursor()
    try:
        return [row[0] for row in cur.execute("select span_id from spans").fetchall()]
    finally:
        cur.close()


def test_a_collector_in_a_lake_acknowledges_what_the_lake_committed(
        lake: LakePlace, tmp_path: Path) -> None:
    """Three episodes (one a spin) and a client's retry: every acknowledged span is in the
    lake once, read by another process while the collector runs, and the collector's own
    reads and detections are the same as over a file."""
    collector = lake_collector(lake, tmp_path)
    acknowledged: list[str] = []
    try:
        for repeat in (True, False, False):
            body, ids = episode_request(6, repeat=repeat)
            assert collector.post(body.SerializeToString())[0] == 200
            assert collector.post(body.SerializeToString())[0] == 200  # a retry: stored once
            acknowledged += ids
        db = open_lake(Lake.parse(lake.catalog, str(lake.data)))
        try:
            assert sorted(_spans(db)) == sorted(acknowledged)
            summary = read(db, "summary")[0]
        finally:
            db.close()
        assert summary == collector.read("summary")[0]
        assert summary["tool_calls"] == 18 and summary["episodes"] == 3
        assert summary["flagged_episodes"] == 1
    finally:
        collector.stop()
    assert list(lake.data.rglob("*.parquet")), "the data are Parquet files in --lake-data"


def test_two_collectors_write_one_lake_concurrently(
        lake: LakePlace, tmp_path: Path, reader: Database) -> None:
    """Two collectors, each sent its own episodes (as the load balancer routes by trace id):
    both acknowledge every request, and the lake holds every span once."""
    first, second = lake_collector(lake, tmp_path, "a"), lake_collector(lake, tmp_path, "b")
    acknowledged: list[str] = []
    try:
        for i in range(6):
            body, ids = episode_request(5, repeat=i % 2 == 0)
            target = first if i % 2 else second
            assert target.post(body.SerializeToString())[0] == 200
            acknowledged += ids
    finally:
        first.stop()
        second.stop()
    stored = _spans(reader)
    assert sorted(stored) == sorted(acknowledged)
    assert read(reader, "summary")[0]["flagged_episodes"] == 3


@pytest.mark.parametrize(("args", "says"), [
    (["--lake", "postgres:dbname=x"], "must be a DuckLake catalog"),
    (["--lake", "ducklake:postgres:dbname=x"], "--lake needs --lake-data"),
    (["--lake-data", "/tmp/somewhere"], "--lake-data needs --lake"),
])
def test_a_malformed_lake_is_refused_naming_what_is_wrong(
        args: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["collector", "--http-port", "0", "--grpc-port", "0", *args])
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_an_unreachable_catalog_is_refused_at_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalog = f"ducklake:postgres:dbname=none host=127.0.0.1 port={free_port()} user=x"
    code = main(["collector", "--http-port", "0", "--grpc-port", "0", "--lake", catalog,
                 "--lake-data", str(tmp_path / "data")])
    assert code == 1
    assert "cannot open the lake" in capsys.readouterr().err


def test_collectors_starting_together_on_a_new_lake_all_start(
        lake: LakePlace, tmp_path: Path) -> None:
    """Three collectors started at once on a lake nobody created: they race to create
    DuckLake's catalog tables and loopscope's schema; the losers attach again and go on."""
    started: list[CollectorProcess] = []
    failed: list[BaseException] = []

    def start(name: str) -> None:
        try:
            started.append(lake_collector(lake, tmp_path, name))
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=start, args=(f"n{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    try:
        assert not failed, failed
        for node in started:
            body, _ = episode_request(3)
            assert node.post(body.SerializeToString())[0] == 200
    finally:
        for node in started:
            node.stop()
