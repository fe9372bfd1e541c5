"""Housekeeping (issue 17, point 6): ``loopscope lake maintain``, and each lake collector on its
own schedule (``--lake-maintain-every``), run DuckLake's own functions over a lake that frequent
commits left in small files; the reads say the same after."""

from __future__ import annotations

from pathlib import Path

import pytest
from collector_process import eventually, metric_value, start_collector
from lake_place import LakePlace
from otlp_requests import episode_request

from loopscope.offline.cli import main


def test_maintain_merges_the_small_files_and_the_reads_stay_the_same(
        lake: LakePlace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = start_collector(tmp_path / "c.duckdb", grpc=False, extra=lake.args)
    try:
        for i in range(12):  # twelve commits: twelve small files per table
            assert node.post(episode_request(4, repeat=i % 2 == 0)[0].SerializeToString())[0] \
                == 200
        before = node.read("summary")
    finally:
        node.stop()
    spans = lake.data / "main" / "spans"
    files_before = len(list(spans.glob("*.parquet")))
    assert files_before >= 12
    assert main(["lake", "maintain", *lake.args, "--keep", "0s", "--unsafe-keep"]) == 0
    out = capsys.readouterr().out
    assert "expired snapshots" in out and "deleted files" in out
    assert len(list(spans.glob("*.parquet"))) < files_before
    assert main(["metrics", *lake.args, "--json"]) == 0
    node = start_collector(tmp_path / "c.duckdb", grpc=False, extra=lake.args)
    try:
        assert node.read("summary") == before
    finally:
        node.stop()


def test_a_bad_keep_is_refused_by_name(lake: LakePlace,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["lake", "maintain", *lake.args, "--keep", "a week"])
    assert "not a duration: 'a week'" in capsys.readouterr().err


@pytest.mark.parametrize(("command", "option", "override"), [
    (["lake", "maintain"], "--keep", "--unsafe-keep"),
    (["collector", "--http-port", "0", "--grpc-port", "0"], "--lake-keep", "--unsafe-lake-keep"),
])
def test_a_keep_under_an_hour_is_refused_naming_the_option_and_the_minimum(
        lake: LakePlace, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        command: list[str], option: str, override: str) -> None:
    """Issue 29, point 6: a keep of 1s let one collector's housekeeping delete the files
    another was reading (503s); a keep under the minimum (an hour) is refused before anything
    opens the lake, as argparse refuses (status 2), unless the override says so."""
    spans = lake.data / "main" / "spans"
    with pytest.raises(SystemExit) as refused:
        main([*command, *lake.args, option, "1s"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert f"{option} 1s is below the minimum of 1h" in err and override in err
    assert not spans.exists()  # refused before the lake was opened


def test_a_keep_of_an_hour_is_taken_by_both_commands(lake: LakePlace, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    node = start_collector(tmp_path / "c.duckdb", grpc=False,
                           extra=[*lake.args, "--lake-maintain-every", "1s", "--lake-keep", "1h"])
    try:
        assert node.post(episode_request(4)[0].SerializeToString())[0] == 200
        eventually(lambda: metric_value(node.get("/metrics"),
                                        "loopscope_lake_housekeeping_runs_total") >= 1)
    finally:
        node.stop()
    assert main(["lake", "maintain", *lake.args, "--keep", "1h"]) == 0
    assert "expired snapshots" in capsys.readouterr().out


def test_a_lake_collector_merges_its_small_files_on_its_own_schedule(
        lake: LakePlace, tmp_path: Path) -> None:
    spans = lake.data / "main" / "spans"
    node = start_collector(tmp_path / "c.duckdb", grpc=False,
                           extra=[*lake.args, "--lake-maintain-every", "1s", "--lake-keep", "1s",
                                  "--unsafe-lake-keep"])
    try:
        for i in range(12):  # twelve commits: twelve small files per table, until merged
            assert node.post(episode_request(4, repeat=i % 2 == 0)[0].SerializeToString())[0] \
                == 200
        before = node.read("summary")
        # merged, and the files it replaced deleted once older than --lake-keep
        eventually(lambda: len(list(spans.glob("*.parquet"))) == 1, timeout=30)
        assert node.read("summary") == before
        assert node.post(episode_request(4)[0].SerializeToString())[0] == 200  # still writes
    finally:
        node.stop()


def test_the_collector_refuses_a_bad_schedule_by_name(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["collector", "--lake-maintain-every", "often"])
    assert "not a duration: 'often'" in capsys.readouterr().err
