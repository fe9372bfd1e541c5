"""``loopscope calibrate``: per evidence source, the highest action that never killed a
healthy run; the bound zero kills in n gives; too few labels refused; and the default policy
is its result over every labelled run we have (issue 28, point 3)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopscope.detect.policy import EVIDENCE_CAPS, IGNORED_CALLS
from loopscope.detect.replay import replay
from loopscope.offline.analysis import Problem, read_episodes
from loopscope.offline.calibration import _binom_cdf, calibrate, upper_bound
from loopscope.offline.cli import main
from loopscope.offline.scoring import score_runs
from loopscope.policy_file import load_policy

ROOT = Path(__file__).resolve().parents[2]
EVAL = ROOT.parent / "shared" / "eval"
DATA = ROOT.parent / "shared" / "data"
CORPUS = ROOT / "tests" / "corpus" / "corpus.jsonl"


def _sets() -> list[Path]:
    files = sorted(EVAL.glob("dev-*.jsonl"))
    if len(files) != 4 or not DATA.is_dir():
        pytest.skip("../shared/eval and ../shared/data are not present beside the project")
    return files


def test_zero_false_kills_in_113_runs_bounds_the_rate_at_3_2_percent():
    assert round(upper_bound(0, 113), 4) == 0.0321
    assert upper_bound(0, 0) == 1.0


@given(st.integers(1, 40), st.integers(41, 400))
def test_the_bound_is_where_seeing_that_few_kills_becomes_unlikely(kills, n):
    bound = upper_bound(kills, n)
    assert kills / n < bound < 1
    assert _binom_cdf(kills, n, bound) == pytest.approx(0.025, abs=1e-6)


def test_too_few_labels_are_refused_with_what_they_would_bound(tmp_path, capsys):
    lines = (EVAL / "dev-1.jsonl").read_text(encoding="utf-8").splitlines()[:6] if (
        EVAL / "dev-1.jsonl").is_file() else pytest.skip("no ../shared/eval")
    few = tmp_path / "few.jsonl"
    few.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["calibrate", str(few), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "too few labels to calibrate" in err and "healthy runs" in err
    assert re.search(r"0 false stops in \d+ would bound the rate only at \d+%", err), err


def test_no_runs_at_all_is_a_clear_usage_error(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert main(["calibrate", str(empty)]) == 2
    assert "no runs to calibrate on" in capsys.readouterr().err


def test_a_policy_calibrated_from_files_kills_no_healthy_run_of_them(tmp_path, capsys):
    files = _sets()[1:3]  # (two sets: a few seconds)
    out = tmp_path / "policy.json"
    assert main(["calibrate", *map(str, files), "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"false stops: 0 of \d+: the false-stop rate is at most \d+\.\d% at 95%",
                     text), text
    assert "evidence sources" in text and f"policy written to {out}" in text
    settings = json.loads(out.read_text(encoding="utf-8"))
    assert set(settings) == {"evidence_caps", "ignored_calls"}
    policy = load_policy(out)
    runs = [e for e in read_episodes(list(map(str, files))) if not isinstance(e, Problem)]
    score = score_runs("both", [replay(e, policy) for e in runs])
    assert score.false_kills == []
    assert score.caught >= 35  # (warnings still catch: a capped source only warns)


def test_the_default_policy_is_what_calibrate_gives_on_every_labelled_run_we_have():
    """`loopscope calibrate tests/corpus/corpus.jsonl ../shared/eval/dev-*.jsonl
    ../shared/data/*.jsonl` must print the shipped EVIDENCE_CAPS and IGNORED_CALLS."""
    files = [CORPUS, *_sets(), *sorted(DATA.glob("*.jsonl"))]
    runs = [e for e in read_episodes(list(map(str, files))) if not isinstance(e, Problem)]
    result = calibrate(runs)
    assert result.false_kills == []
    assert (result.caps, result.ignored_calls) == (dict(EVIDENCE_CAPS), IGNORED_CALLS)
