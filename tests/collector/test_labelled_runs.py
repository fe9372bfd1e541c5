"""`loopscope calibrate --db` and `--lake`: a store's labelled runs (human labels, else
scenario labels) calibrated as the same runs are from Episode JSONL, through the
`loopscope.labelled_runs` entry point (`offline.labelled`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from labelled_store import as_labelled_jsonl, build_labelled_store, scenario_runs, store_runs

from loopscope.offline import cli
from loopscope_collector.offline.labelled import LABELLED_RUNS

pytestmark = pytest.mark.timeout(120)


def _calibrate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["calibrate", "--quiet", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """``labelled_store``: the scenario library with human labels."""
    path = build_labelled_store(tmp_path / "runs.duckdb")
    capsys.readouterr()
    return path


def test_a_stores_labelled_runs_calibrate_as_the_same_runs_in_episode_jsonl(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Human labels win over scenario labels and a false_kill label makes a healthy run,
    as the Policy page scores them; the store gives what Episode JSONL labelled so gives."""
    code, out, err = _calibrate(capsys, "--db", str(store))
    assert code == 0, err
    code, expected, err = _calibrate(capsys, str(as_labelled_jsonl(tmp_path / "runs.jsonl")))
    assert code == 0, err
    assert out == expected
    assert out.startswith("Calibrated on 27 labelled loops and 21 healthy runs")
    assert "  false stops: 0 of 21: the false-stop rate is at most 16.1% at 95%\n" in out
    policy = json.loads(out[out.index("\n{") + 1:])
    # the run a human said was no loop was killed on this evidence: it may only warn now
    assert policy == {"evidence_caps": {"write_duplicate/kind:declared+outcome:timeout": "warn"},
                      "ignored_calls": 2}


def test_too_few_labels_in_a_store_are_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    few = [run for run in scenario_runs()
           if run["episode_id"].startswith(("scn-read_spin", "scn-healthy"))]
    path = store_runs(tmp_path / "few.duckdb", few)
    capsys.readouterr()
    code, out, err = _calibrate(capsys, "--db", str(path))
    assert (code, out) == (1, "")
    assert err.startswith("loopscope calibrate: too few labels to calibrate: 2 labelled loops "
                          "(need 5) and 2 healthy runs"), err
    assert "Label more runs (the dashboard's Labels page" in err


def test_a_store_that_cannot_be_opened_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.duckdb"
    code, out, err = _calibrate(capsys, "--db", str(missing))
    assert (code, out) == (2, "")
    assert f"no such store file: {missing}" in err
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database", encoding="utf-8")
    code, out, err = _calibrate(capsys, "--db", str(junk))
    assert code == 2 and f"cannot open the store {junk}" in err, err


def test_without_a_store_the_files_alone_are_calibrated(
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert LABELLED_RUNS.episodes(cli.build_parser().parse_args(["calibrate"])) is None
    code, _, err = _calibrate(capsys)
    assert code == 2 and "give Episode JSONL files with labelled runs or a store (--db / " \
                          "--lake)" in err, err


@pytest.mark.usefixtures("lake_extensions")
def test_a_lakes_labelled_runs_calibrate_as_the_store_they_came_from(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store moved into a DuckLake (here with a DuckDB file as its catalog) keeps its
    runs and labels, so `--lake` gives what `--db` gives."""
    lake = ["--lake", f"ducklake:{tmp_path / 'catalog.ducklake'}",
            "--lake-data", str(tmp_path / "lake-data")]
    assert cli.main(["lake", "import", "--db", str(store), *lake]) == 0
    capsys.readouterr()
    code, from_lake, err = _calibrate(capsys, *lake)
    assert code == 0, err
    code, from_store, err = _calibrate(capsys, "--db", str(store))
    assert code == 0, err
    assert from_lake == from_store
