"""A lake without its extensions, or on a DuckDB they are not built for, stops at once with a
message saying what to install (``storage.ducklake.extension_directory``). The installed packages
are shadowed by a ``duckdb_ext`` package of the test's own, ahead of them on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb

from loopscope_collector.storage.ducklake import LAKE_DUCKDB

ROOT = Path(__file__).resolve().parents[2]


def _lake_metrics(tmp_path: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``loopscope metrics --lake ...`` with ``site`` (a ``duckdb_ext`` package of its own)
    ahead of the installed packages."""
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get(
               "PYTHONPATH")]), *map(str, [ROOT / "instrumentation", ROOT / "collector"])])}
    return subprocess.run(
        [sys.executable, "-m", "loopscope", "metrics", "--lake",
         f"ducklake:{tmp_path / 'catalog.ducklake'}", "--lake-data", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=120, env=env)


def _duckdb_ext(site: Path, built_for: str | None) -> Path:
    """A ``duckdb_ext`` package in ``site``: empty, or holding extensions "built for" a DuckDB
    version (files in DuckDB's own layout, ``v{version}/{platform}/``)."""
    package = site / "duckdb_ext"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    if built_for is not None:
        folder = package / "extensions" / f"v{built_for}" / "linux_amd64"
        folder.mkdir(parents=True)
        for name in ("ducklake", "postgres_scanner", "httpfs"):
            (folder / f"{name}.duckdb_extension").write_bytes(b"")
    return site


def test_a_lake_without_its_extensions_says_what_to_install(tmp_path: Path) -> None:
    done = _lake_metrics(tmp_path, _duckdb_ext(tmp_path / "site", None))
    assert done.returncode == 1, done.stderr
    assert "a lake needs DuckDB's ducklake, postgres and httpfs extensions, which are not " \
           "installed: pip install 'loopscope[lake]'" in done.stderr, done.stderr


def test_a_lake_on_a_duckdb_its_extensions_are_not_built_for_says_what_to_install(
    tmp_path: Path,
) -> None:
    done = _lake_metrics(tmp_path, _duckdb_ext(tmp_path / "site", "0.9.0"))
    assert done.returncode == 1, done.stderr
    assert (f"built for DuckDB 0.9.0, and this is DuckDB {duckdb.__version__}: a lake needs "
            f"DuckDB {LAKE_DUCKDB}, which pip install 'loopscope[lake]' installs with them"
            ) in done.stderr, done.stderr
