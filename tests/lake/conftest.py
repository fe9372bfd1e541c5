"""Lake tests' fixtures: a lake of its own for each test, in the session's one real PostgreSQL
(``postgres`` in tests/conftest.py: Debian's server in a temp folder on a free loopback port;
installed with apt-get when absent, as the browser tests install Chromium, and ``.ci/run``
installs it first). Where the
lake's extensions cannot load (a DuckDB other than the lake's), every lake test is skipped with
the message that says what to install."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "collector"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lake_place import LakePlace, Postgres


@pytest.fixture(scope="session", autouse=True)
def _lake_extensions(lake_extensions: None) -> None:
    """Every lake test needs the lake's extensions: skipped, saying what to install, without
    them (set up before PostgreSQL is, as a session fixture used first)."""


@pytest.fixture
def lake(postgres: Postgres, tmp_path: Path) -> LakePlace:
    """A lake of the test's own."""
    return LakePlace(postgres.catalog(postgres.new_database()), tmp_path / "lake-data")
