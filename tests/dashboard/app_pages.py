"""The dashboard's Streamlit app, opened on a page as a test reads it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import loopscope_dashboard
from loopscope_dashboard import state

APP = str(Path(loopscope_dashboard.__file__).parent / "app.py")


def app(timeout_s: float = 60) -> AppTest:
    """The app as a browser's session sees it once it has shown a page: its charts drawn (a
    session's first run holds them back until the browser says the page is on screen, a
    signal AppTest has no browser to send: ``plots``)."""
    at = AppTest.from_file(APP, default_timeout=timeout_s)
    at.session_state[state.CHARTS_DRAWN] = True
    return at


def episode_page(store: Path, episode_id: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The Episode page of ``episode_id``, reading the store file ``store``."""
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(store))
    at = app().run()
    at.switch_page("views/episode.py")
    at.query_params["episode"] = episode_id
    at.run()
    assert not at.exception, at.exception
    return at


def policy_page(*, opened: bool = True) -> AppTest:
    """The Policy page, once its replay has landed (``replayed``); ``opened``: with its
    expanders that draw only when open (the policies as JSON, the candidate's editor, every
    run's verdict) open, as a click opens them."""
    at = app(120).run()
    at.switch_page("views/policy.py").run()
    if opened:
        for key in (state.POLICY_CURRENT_JSON, state.POLICY_EDIT, state.POLICY_CANDIDATE_JSON,
                    state.POLICY_EVERY_RUN):
            at.session_state[key] = True
        at.run()
    return replayed(at)


def replayed(at: AppTest, timeout_s: float = 150.0) -> AppTest:
    """``at`` rerun until the Policy page shows no replay under way: replays run behind the
    page (``replay_jobs``), whose progress bar is its only progress element."""
    deadline = time.monotonic() + timeout_s
    while not at.exception and at.get("progress"):
        assert time.monotonic() < deadline, "the Policy page's replay did not land"
        time.sleep(0.2)
        at.run()
    assert not at.exception, at.exception
    return at
