"""``loopscope eval`` on the labelled sets of ../shared/eval, scored as their README says:
the numbers detection v4 reached are held here, so no later change quietly brings back a
false kill or loses a loop (issue 28)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopscope.offline.cli import main

EVAL = Path(__file__).resolve().parents[2].parent / "shared" / "eval"


@pytest.fixture(scope="module")
def scored() -> dict:
    files = sorted(EVAL.glob("dev-*.jsonl"))
    if len(files) != 4:
        pytest.skip("../shared/eval is not present beside the project")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["eval", *map(str, files), "--json"]) == 0
    return json.loads(out.getvalue())


def test_no_healthy_run_is_blocked_or_stopped_and_no_loop_before_it_began(scored):
    """A detector change that kills a look-alike, or a loop before its first loop step."""
    assert scored["sets_overall"]["false_kill_runs"] == []
    assert [s["false_kills"] for s in scored["sets"]] == [0, 0, 0, 0]


def test_the_loops_caught_and_ended_do_not_fall(scored):
    """Floors at what v4 reached (116 of 121 caught, 95 of 100 ended by the third step,
    5 look-alikes warned); issue 28 asks for 115, 95% and 5."""
    total = scored["sets_overall"]
    assert (total["loops"], total["healthy"]) == (121, 113)
    assert total["caught"] >= 116, total["missed_runs"]
    assert total["ended_within_3"] >= 95, total["not_ended_runs"]
    assert total["ended_within_3"] >= 0.95 * total["caught_that_go_on"], total["not_ended_runs"]
    assert total["false_warnings"] <= 5, total["false_warning_runs"]


def test_each_set_and_each_detector_is_reported(scored):
    assert [s["set"] for s in scored["sets"]] == ["dev-1", "dev-2", "dev-3", "dev-4"]
    assert sum(s["loops"] for s in scored["sets"]) == 121
    precision = scored["sets_overall"]["detector_precision"]
    assert all(row["precision"] == 1.0 for row in precision.values()), precision
    assert precision["exact_repeat"]["kills"] > 0


def test_the_text_report_names_each_set_and_the_total(capsys):
    files = sorted(EVAL.glob("dev-*.jsonl"))
    if len(files) != 4:
        pytest.skip("../shared/eval is not present beside the project")
    assert main(["eval", str(files[0]), str(files[1])]) == 0
    text = capsys.readouterr().out
    assert "Labelled sets (enforce" in text
    for name in ("dev-1", "dev-2", "all"):
        assert f"\n  {name} " in text
    assert "detector precision" in text
