"""Detection v2 against the authored corpus, case by case (issue 9's "Done means").

Every loop is flagged at or after its first loop step with no block or stop before it; no
look-alike is blocked or stopped; warnings on look-alikes stay at or under 5% and are
listed. Each episode is its own test, so a regression names the run it broke.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopscope.detect.replay import EpisodeRecord, parse_episode, replay
from loopscope.evaluation import evaluate

CORPUS = Path(__file__).with_name("corpus.jsonl")
EPISODES = [
    parse_episode(json.loads(line))
    for line in CORPUS.read_text(encoding="utf-8").splitlines()
    if line.strip()
]
LOOPS = [e for e in EPISODES if e.loop_label is True]
LOOK_ALIKES = [e for e in EPISODES if e.loop_label is False]


def _flags(episode: EpisodeRecord) -> str:
    report = replay(episode)
    return "\n".join(
        f"  step {f.step} {f.detector} {f.action}: {f.message[:100]}" for f in report.flags
    ) or "  (no flags)"


@pytest.mark.parametrize("episode", LOOPS, ids=lambda e: e.episode_id)
def test_loop_is_flagged_and_never_killed_early(episode: EpisodeRecord):
    """A loop missed, or a block or stop before the loop began, fails here."""
    report = replay(episode, mode="enforce")
    first = episode.label["first_loop_step"]
    assert any(f.step >= first for f in report.flags), (
        f"{episode.label['why']}\nnot flagged from step {first}:\n{_flags(episode)}"
    )
    early = [f for f in report.flags if f.severity == "kill" and f.step < first]
    assert not early, f"killed before step {first}:\n{_flags(episode)}"


@pytest.mark.parametrize("episode", LOOK_ALIKES, ids=lambda e: e.episode_id)
def test_look_alike_is_never_blocked_or_stopped(episode: EpisodeRecord):
    """A block or stop of a legitimate run (a false kill) fails here."""
    report = replay(episode, mode="enforce")
    assert report.first_kill is None, f"{episode.label['why']}\n{_flags(episode)}"
    assert report.stop is None


def test_warnings_on_look_alikes_are_listed_and_rare():
    """More than 5% of the look-alikes nudged, or nudges the eval report does not name."""
    result = evaluate([replay(e) for e in EPISODES])
    ours = result["systems"][0]["labelled"]
    warned = ours["warned_legit_runs"]
    expected = sorted(
        e.episode_id for e in LOOK_ALIKES if replay(e).flags and replay(e).first_kill is None
    )
    assert sorted(warned) == expected
    assert len(warned) <= 0.05 * len(LOOK_ALIKES), warned


def test_eval_reports_the_corpus_beside_both_baselines():
    """The corpus's loopscope row, with n and Wilson intervals, beside the two baselines."""
    result = evaluate([replay(e) for e in EPISODES])
    systems = {s["system"]: s["labelled"] for s in result["systems"]}
    assert set(systems) == {"loopscope", "naive_3_of_6", "max_steps_10"}
    ours = systems["loopscope"]
    assert ours["loop_detection_rate"]["n"] == len(LOOPS)
    assert ours["legit_runs_killed"]["n"] == len(LOOK_ALIKES)
    assert ours["loop_detection_rate"]["interval"] is not None
    assert ours["legit_runs_killed"]["count"] == 0
    assert systems["naive_3_of_6"]["legit_runs_killed"]["count"] > 0  # the corpus is not easy
