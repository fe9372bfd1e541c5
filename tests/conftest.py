"""Fixtures every test gets: loud internal errors and a clean loopscope configuration; and
those several folders share: the session's one PostgreSQL (``postgres``) and ``store``, the
storage tests' one fixture, run once per backend."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from loopscope import _config

sys.path.insert(0, str(Path(__file__).resolve().parent / "lake"))

from lake_place import Postgres, running_postgres

if TYPE_CHECKING:
    from loopscope_collector.storage import Store

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"

# No property test is timed: on a loaded 2-core machine Hypothesis's default 200 ms deadline
# per example fails tests that are correct (speed is measured in benchmarks/, not asserted).
settings.register_profile("loopscope", deadline=None)
settings.load_profile("loopscope")


@pytest.fixture(autouse=True, scope="session")
def _kept_replays_in_a_session_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The dashboards the browser tests start keep the Policy page's replays in a folder of
    this session's (they inherit the environment), not the user's cache folder: a replay
    kept by an earlier run is not shown to this one."""
    os.environ["LOOPSCOPE_REPLAY_CACHE"] = str(tmp_path_factory.mktemp("kept-replays"))


@pytest.fixture(autouse=True)
def _loud_internal_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without it, a loopscope bug inside a test would be logged and swallowed, and pass."""
    monkeypatch.setenv("LOOPSCOPE_RAISE_INTERNAL_ERRORS", "1")


@pytest.fixture(autouse=True)
def _fresh_loopscope() -> Iterator[None]:
    """Without it, one test's instrument() settings and span processor leak into the next."""
    _config.reset_for_tests()
    yield
    _config.reset_for_tests()


@pytest.fixture
def shared_data() -> Path:
    """The real trajectories in ../shared/data; skips when the folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present beside the project")
    return SHARED_DATA


@pytest.fixture(scope="session")
def lake_extensions() -> None:
    """Skips, with the message that says what to install, where the lake's DuckDB extensions
    are missing or built for another DuckDB than this one (an environment on the current
    DuckDB rather than the lake's: ``storage.ducklake.extension_directory``)."""
    from loopscope_collector.storage.ducklake import LakeError, extension_directory

    try:
        extension_directory()
    except LakeError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """One PostgreSQL for the session (``lake_place.running_postgres``): the lakes' catalogs."""
    with running_postgres() as server:
        yield server


STORE_BACKENDS = ("duckdb_file", "ducklake")
"""The store's two implementations (``storage.port.Store``), each test of ``store`` run on
both; the lake's is skipped, saying what to install, where its extensions cannot load."""


@pytest.fixture(params=STORE_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A new, migrated store of the test's own: an embedded DuckDB file, or a DuckLake (a new
    catalog database in the session's PostgreSQL, its data under ``tmp_path``)."""
    from loopscope_collector.storage import open_database, open_lake
    from loopscope_collector.storage.ducklake import Lake

    if request.param == "duckdb_file":
        db = open_database(tmp_path / "store.duckdb")
    else:
        request.getfixturevalue("lake_extensions")
        server: Postgres = request.getfixturevalue("postgres")
        db = open_lake(Lake(server.catalog(server.new_database()), str(tmp_path / "lake")))
    try:
        yield db
    finally:
        db.close()
