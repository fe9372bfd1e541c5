"""The Policy page's "Calibrate from labels": `loopscope calibrate` on the stored runs' labels
(human, else scenario) with the current policy as the base, what it changes, and its export."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from app_pages import policy_page
from labelled_store import build_labelled_store
from streamlit.testing.v1 import AppTest

import loopscope_dashboard
from loopscope.detect import Policy
from loopscope_dashboard import state

APP = str(Path(loopscope_dashboard.__file__).parent / "app.py")

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def labelled_store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scenario library with human labels (``labelled_store``): enough to calibrate."""
    return build_labelled_store(tmp_path_factory.mktemp("labelled") / "labelled.duckdb")


def _calibrated(store: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(store))
    at = policy_page()
    at.button(key="policy_calibrate_run").click().run()
    assert not at.exception, at.exception
    return at


def _table(at: AppTest, *columns: str) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if set(columns) <= set(d.value.columns))


def test_calibration_shows_the_bound_the_policy_changes_and_the_export(
    labelled_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _calibrated(labelled_store_path, monkeypatch)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["False stops on healthy runs"] == "0 of 21"
    assert metrics["False-stop rate, at most"] == "16.1%"
    assert metrics["Calls ignored after a warning"] == "2"
    assert metrics["Labelled loops caught"].endswith(" of 27")
    assert any("False stops 0 of 21: at most 16.1% at 95%." in c.value for c in at.caption)
    # the human said this run was no loop: the evidence that killed it may only warn now
    changes = _table(at, "change")
    row = changes[changes["setting"]
                  == "evidence_caps: write_duplicate/kind:declared+outcome:timeout"]
    assert row[["current", "calibrated", "change"]].values.tolist() == [
        ["stop (not capped)", "warn", "added"]]
    # the current policy is the defaults (no guard recorded one): their caps with no false
    # kill here are removed, and ignored_calls is listed only when it changed
    defaults = Policy()
    removed = {f"evidence_caps: {s}" for s in defaults.evidence_caps}
    assert set(changes.loc[changes["change"] == "removed", "setting"]) == removed
    assert (changes["setting"] == "ignored_calls").any() == (defaults.ignored_calls != 2)
    moved = _table(at, "calibrated", "open")  # episode, label, before → after
    assert {"label", "current", "calibrated"} <= set(moved.columns)
    assert state.episode_link("scn-write_duplicate-1-s3") in set(moved["open"])
    exported = [e for e in at.get("download_button")
                if "policy_calibration_export" in str(e.proto.id)]
    assert exported and exported[0].proto.label == "Export the calibrated policy (JSON)"
    policy = json.loads(at.code[-1].value)
    assert policy["evidence_caps"] == {"write_duplicate/kind:declared+outcome:timeout": "warn"}
    exported_policy = Policy.from_mapping(policy)  # only what differs from the defaults
    assert exported_policy.ignored_calls == 2
    assert exported_policy.evidence_caps == policy["evidence_caps"]


def test_too_few_labels_say_so_without_a_traceback(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _calibrated(store_path, monkeypatch)  # the fixture store: 16 runs
    said = " ".join(i.value for i in at.info)
    assert "too few labels to calibrate" in said and "Label more runs" in said
    assert not [e for e in at.get("download_button")
                if "policy_calibration_export" in str(e.proto.id)]
