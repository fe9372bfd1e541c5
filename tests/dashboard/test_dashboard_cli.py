"""``loopscope dashboard``: help with an example, the streamlit command line it runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from loopscope.offline import cli
from loopscope_dashboard import cli as dashboard_cli


def _args(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["dashboard", *argv])


def test_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["dashboard", "--help"])
    out = capsys.readouterr().out
    assert "Example:\n  loopscope dashboard\n" in out
    assert "--collector URL" in out and "--db FILE" in out


def test_it_runs_streamlit_on_the_packaged_app() -> None:
    args = _args("--port", "8600", "--host", "0.0.0.0")
    assert dashboard_cli.command(args) == [
        sys.executable, "-m", "loopscope_dashboard.server", "run", str(dashboard_cli.app_path()),
        "--server.port", "8600", "--server.address", "0.0.0.0",
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "viewer", "--server.fileWatcherType", "none",
        "--runner.postScriptGC", "false"]
    assert dashboard_cli.app_path().is_file()


def test_the_source_is_passed_in_the_environment(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    env = dashboard_cli.environment(_args("--collector", "http://10.0.0.2:4318"))
    assert env["LOOPSCOPE_COLLECTOR_URL"] == "http://10.0.0.2:4318"
    assert "LOOPSCOPE_DB_SNAPSHOT" not in env
    monkeypatch.delenv("LOOPSCOPE_DB_SNAPSHOT")
    env = dashboard_cli.environment(_args("--db", str(tmp_path / "runs.duckdb")))
    assert env["LOOPSCOPE_DB_SNAPSHOT"] == str(tmp_path / "runs.duckdb")


def test_collector_and_db_exclude_each_other() -> None:
    with pytest.raises(SystemExit):
        _args("--collector", "http://x", "--db", "f")


def test_a_missing_db_file_is_refused(tmp_path: Path, capsys) -> None:
    assert cli.main(["dashboard", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "no such DuckDB file" in capsys.readouterr().err
