"""Dashboard fixtures: stores built by the collector's real pipeline, fresh Streamlit caches."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "collector"))

from demo_store import build_demo_store, demo_spans
from fixture_store import build_empty_store, build_store
from lossy_runs import lossy_spans


@pytest.fixture(scope="session")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Scripted agents' runs (loops, look-alikes, UNKNOWN writes, guard decisions, alerts)."""
    return build_store(tmp_path_factory.mktemp("store") / "runs.duckdb")


@pytest.fixture(scope="session")
def demo_sdk_spans() -> list:
    """The demo's scripts driven through the SDK, content captured (``demo_store``)."""
    return demo_spans()


@pytest.fixture(scope="session")
def demo_store_path(tmp_path_factory: pytest.TempPathFactory, demo_sdk_spans: list) -> Path:
    """The demo's runs as ``loopscope up --demo`` stores them: content captured."""
    return build_demo_store(tmp_path_factory.mktemp("demo") / "demo.duckdb", demo_sdk_spans)


@pytest.fixture(scope="session")
def uncaptured_store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's runs from agents that left content capture off (``instrument()``'s
    default): no arguments, outputs or tasks as text."""
    return build_demo_store(tmp_path_factory.mktemp("uncaptured") / "uncaptured.duckdb",
                            demo_spans(capture_content=False))

@pytest.fixture(scope="session")
def lossy_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """Two runs whose calls' spans were partly lost on the way (``lossy_runs``), stored by
    the collector's pipeline, and the call each run's guard stopped, or would have, at."""
    spans, stops = lossy_spans()
    return build_demo_store(tmp_path_factory.mktemp("lossy") / "lossy.duckdb", spans), stops


@pytest.fixture(scope="session")
def empty_store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated store with no data: the empty states."""
    return build_empty_store(tmp_path_factory.mktemp("empty") / "empty.duckdb")


@pytest.fixture(autouse=True)
def _fresh_streamlit_caches(store_path: Path, monkeypatch: pytest.MonkeyPatch,
                            tmp_path: Path) -> Iterator[None]:
    """AppTest runs in-process, so st.cache_data / st.cache_resource (the data source and
    every read) would otherwise leak from one test, and one store, to the next, and the
    Policy page's kept replays too (a folder per test). Points the dashboard at the fixture
    store unless a test says otherwise."""
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(store_path))
    monkeypatch.setenv("LOOPSCOPE_REPLAY_CACHE", str(tmp_path / "kept-replays"))
    monkeypatch.delenv("LOOPSCOPE_COLLECTOR_URL", raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()
