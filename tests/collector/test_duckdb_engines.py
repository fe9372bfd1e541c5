"""The embedded store on the two DuckDB engines the project tests.

The collector extra takes a range of DuckDB; a lake pins the one its extensions are built for
(``storage.ducklake.LAKE_DUCKDB``, the ``lake`` extra, which the dev install has: this process
runs on it). The current release, ``CURRENT_DUCKDB``, gets a second virtual environment of its
own: DuckDB first, then ``pip install -e '.[collector]'`` around it (which must keep it), and
the embedded store's storage and chaos tests (``EMBEDDED_STORE_TESTS``) run there once: an
install from pip's cache and one more run of those files is what the second engine costs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Final

import duckdb
import pytest

from loopscope_collector.reads import read
from loopscope_collector.storage import open_database
from loopscope_collector.storage.ducklake import LAKE_DUCKDB

ROOT = Path(__file__).resolve().parents[2]

CURRENT_DUCKDB: Final = "2.0.1"
"""The newest DuckDB release the collector extra takes, tested beside the lake's."""

EMBEDDED_STORE_TESTS: Final = (
    "tests/collector/test_schema.py",
    "tests/collector/test_chaos_store.py",
    "tests/collector/test_collector_ingest.py",
    "tests/collector/test_typed_attributes.py",
    "tests/collector/test_metrics.py",
    "tests/collector/test_span_filter.py",
)
"""The embedded store's storage and chaos tests, and the named reads and metrics over a store
(the Spans filter's reads among them), run again on ``CURRENT_DUCKDB``. (``test_chaos_poison``
is left out: it tests the decoder in front of the store, which no engine touches, and its
minutes are the suite's budget.)"""

ENGINE_NEUTRAL: Final = (
    "tests/collector/test_collector_ingest.py::"
    "test_bad_input_gets_its_status_and_the_collector_keeps_serving",
    "tests/collector/test_collector_ingest.py::"
    "test_json_and_protobuf_both_acknowledge_with_an_empty_response",
    "tests/collector/test_collector_ingest.py::test_auth_token_is_required_when_set",
    "tests/collector/test_collector_ingest.py::test_refuses_a_non_loopback_address_without_a_token",
)
"""Tests of ``EMBEDDED_STORE_TESTS`` deselected on ``CURRENT_DUCKDB``: each starts a collector
of its own (seconds apiece) to check what is decided before the store is reached (the
decoder's 4xx, the empty acknowledgement, the token and the bind rule), so a second engine
would run the same code to the same answer. Every test that writes, reads, migrates, locks,
checkpoints or recovers a store still runs on both engines."""

TEST_TOOLS: Final = ("pytest", "pytest-timeout", "pytest-xdist", "hypothesis")
"""What those tests need beyond the collector extra (taken at the dev extra's versions;
pytest-xdist because pyproject's pytest options spread the tests over two processes)."""


def _dev_specs(names: tuple[str, ...]) -> list[str]:
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["optional-dependencies"]["dev"]
    return [spec for spec in dev if re.split(r"[\s<>=!~\[;]", spec, maxsplit=1)[0] in names]


def _run(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def current_engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a virtual environment where DuckDB ``CURRENT_DUCKDB`` was installed
    first and loopscope's collector extra (editable) and the test tools after it."""
    venv = tmp_path_factory.mktemp("current-duckdb") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    for specs in ([f"duckdb=={CURRENT_DUCKDB}"],
                  ["-e", f"{ROOT}[collector]", *_dev_specs(TEST_TOOLS)]):
        done = _run(python, "-m", "pip", "install", "-q", *specs)
        assert done.returncode == 0, done.stderr
    return python


@pytest.mark.timeout(900)
def test_the_collector_extra_keeps_the_current_duckdb_and_pulls_no_lake_extension(
    current_engine: Path,
) -> None:
    """``pip install -e '.[collector]'`` where DuckDB CURRENT_DUCKDB is installed leaves it
    there, and installs none of the lake's extension packages (they pin the lake's DuckDB)."""
    version = _run(current_engine, "-c", "import duckdb; print(duckdb.__version__)")
    assert version.stdout.strip() == CURRENT_DUCKDB, version.stdout + version.stderr
    listed = _run(current_engine, "-m", "pip", "list", "--format=json")
    names = {package["name"].lower() for package in json.loads(listed.stdout)}
    assert not {name for name in names if name.startswith("duckdb-ext")}, names


@pytest.mark.timeout(1800)
def test_the_embedded_store_passes_its_storage_and_chaos_tests_on_the_current_duckdb(
    current_engine: Path, tmp_path: Path,
) -> None:
    """EMBEDDED_STORE_TESTS, run in the second environment (a failure shows their summary)."""
    done = _run(current_engine, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "--basetemp", tmp_path / "tests", *EMBEDDED_STORE_TESTS,
                *(f"--deselect={test}" for test in ENGINE_NEUTRAL), timeout=1700)
    assert done.returncode == 0, f"on DuckDB {CURRENT_DUCKDB}:\n{done.stdout[-6000:]}"


SPINNING_RUN: Final = {
    "episode_id": "spinner", "task": "find the order", "outcome": "failure",
    "steps": [{"type": "tool", "tool": "search", "kind": "read", "args": {"query": "order 3"},
               "output": "no results", "status": "ok", "t": float(step)}
              for step in range(6)],
}


@pytest.mark.timeout(900)
def test_a_store_written_on_the_current_duckdb_opens_on_the_lakes(
    current_engine: Path, tmp_path: Path,
) -> None:
    """A store that the current DuckDB wrote, and a copy it exported, open on the lake's
    DuckDB (``lake import --db`` reads a store there): every file is written in the storage
    format both read (``storage.duckdb_file.connect.STORAGE_VERSION``), not in DuckDB 2's own."""
    if duckdb.__version__ != LAKE_DUCKDB:
        pytest.skip(f"runs on the lake's DuckDB {LAKE_DUCKDB} (this is {duckdb.__version__})")
    runs, store, copy = tmp_path / "runs.jsonl", tmp_path / "store.duckdb", tmp_path / "copy.duckdb"
    runs.write_text(json.dumps(SPINNING_RUN) + "\n", encoding="utf-8")
    stored = _run(current_engine, "-m", "loopscope", "analyze", runs, "--db", store)
    assert stored.returncode == 0, stored.stderr
    exported = _run(current_engine, "-c", "import sys\n"
                    "from loopscope_collector.storage import open_database\n"
                    "db = open_database(sys.argv[1])\ndb.export(sys.argv[2])\ndb.close()",
                    store, copy)
    assert exported.returncode == 0, exported.stderr
    for path in (store, copy):
        db = open_database(path, read_only=True)
        try:
            assert read(db, "summary")[0]["episodes"] == 1, path
            assert read(db, "episode_detections", {"episode_id": "spinner"}), path
        finally:
            db.close()


def test_the_lake_extra_pins_the_duckdb_its_extensions_are_built_for() -> None:
    """pyproject's ``lake`` extra, ``LAKE_DUCKDB`` and the dev install agree: the dev
    install (and so CI's lake tests) is on the lake's DuckDB."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["optional-dependencies"]
    assert f"duckdb=={LAKE_DUCKDB}" in extras["lake"]
    extensions = [spec for spec in extras["lake"] if spec.startswith("duckdb-ext-")]
    assert len(extensions) == 3
    assert all(spec.split("==")[1].startswith(f"{LAKE_DUCKDB}.") for spec in extensions)
    assert "loopscope[lake]" in extras["dev"]
    assert not [spec for spec in extras["collector"] if spec.startswith("duckdb-ext-")]
