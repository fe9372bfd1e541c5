"""The dashboard's Streamlit app, opened on a page as a test reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import loopscope_dashboard

APP = str(Path(loopscope_dashboard.__file__).parent / "app.py")


def episode_page(store: Path, episode_id: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The Episode page of ``episode_id``, reading the store file ``store``."""
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(store))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/episode.py")
    at.query_params["episode"] = episode_id
    at.run()
    assert not at.exception, at.exception
    return at
