"""``loopscope lake import`` (issue 17, point 7): an embedded store moved into a lake keeps its
history; importing twice adds nothing; a file that is not a store is refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from collector_process import start_collector
from lake_place import LakePlace
from otlp_requests import episode_request

from loopscope.offline.cli import main

TABLES = ("spans", "tool_calls", "episodes", "detections")


def _counts(out: str) -> dict[str, int]:
    return {line.split()[0]: int(line.split()[1].replace(",", ""))
            for line in out.splitlines() if line.endswith("rows added")}


def test_a_file_moves_into_a_lake_once(lake: LakePlace, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "history.duckdb"
    collector = start_collector(store, grpc=False)
    try:
        for repeat in (True, False, True):
            assert collector.post(episode_request(8, repeat=repeat)[0].SerializeToString())[0] \
                == 200
    finally:
        collector.stop()
    assert main(["lake", "import", "--db", str(store), *lake.args]) == 0
    added = _counts(capsys.readouterr().out)
    assert {t: added[t] for t in TABLES} == {"spans": 24, "tool_calls": 24, "episodes": 3,
                                              "detections": added["detections"]}
    assert added["detections"] > 0
    assert main(["lake", "import", "--db", str(store), *lake.args]) == 0
    assert set(_counts(capsys.readouterr().out).values()) == {0}  # nothing twice
    assert main(["metrics", "--db", str(store), "--json"]) == 0
    over_file = json.loads(capsys.readouterr().out)
    assert main(["metrics", *lake.args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == over_file


def test_a_file_that_is_not_a_store_is_refused_and_the_lake_untouched(
        lake: LakePlace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.duckdb"
    notes.write_text("not a database")
    assert main(["lake", "import", "--db", str(notes), *lake.args]) == 1
    assert "notes.duckdb is not a DuckDB file" in capsys.readouterr().err
    assert not lake.data.exists() or not list(lake.data.rglob("*.parquet"))
