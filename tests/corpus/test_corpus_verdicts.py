"""The detector against the authored corpus, case by case (issues 9 and 16, "Done means").

Every loop is flagged at or after its first loop step with no block or stop before it, and
blocked or stopped within three more of its calls (replies, for a message loop) if it goes
on; no look-alike is blocked or stopped; warnings on look-alikes stay at or under 5% and are
listed. Each episode is its own test, so a regression names the run it broke.

``KNOWN_GAPS`` are the loops of detection v3's classes that the detector does not catch yet,
and ``KILLED_EARLY`` those it stops before their first loop step, each with why: they are
strict expected failures, so one that starts passing fails until it is taken off the list,
and the lists can only shrink.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopscope.detect.episode_records import EpisodeRecord, parse_episode
from loopscope.detect.limits import PARALLEL_S
from loopscope.detect.replay import replay
from loopscope.offline.evaluation import evaluate

CORPUS = Path(__file__).with_name("corpus.jsonl")
EPISODES = [
    parse_episode(json.loads(line))
    for line in CORPUS.read_text(encoding="utf-8").splitlines()
    if line.strip()
]
KNOWN_GAPS: dict[str, str] = {}
"""Loops not caught yet, with why (strict expected failures: see the module docstring)."""
KILLED_EARLY: dict[str, str] = {}
"""Loops caught, but stopped before their first loop step: only the test of that fails."""
LOOPS = [e for e in EPISODES if e.loop_label is True]
LOOK_ALIKES = [e for e in EPISODES if e.loop_label is False]


def _flags(episode: EpisodeRecord) -> str:
    report = replay(episode)
    return "\n".join(
        f"  step {f.step} {f.detector} {f.action}: {f.message[:100]}" for f in report.flags
    ) or "  (no flags)"


def _gap(episode: EpisodeRecord, *also: dict[str, str]) -> object:
    why = KNOWN_GAPS.get(episode.episode_id) or next(
        (known[episode.episode_id] for known in also if episode.episode_id in known), None)
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(episode, marks=marks, id=episode.episode_id)


@pytest.mark.parametrize("episode", [_gap(e, KILLED_EARLY) for e in LOOPS])
def test_loop_is_flagged_and_never_killed_early(episode: EpisodeRecord):
    """A loop missed, or a block or stop before the loop began, fails here."""
    report = replay(episode, mode="enforce")
    first = episode.label["first_loop_step"]
    assert any(f.step >= first for f in report.flags), (
        f"{episode.label['why']}\nnot flagged from step {first}:\n{_flags(episode)}"
    )
    early = [f for f in report.flags if f.severity == "kill" and f.step < first]
    assert not early, f"killed before step {first}:\n{_flags(episode)}"


@pytest.mark.parametrize("episode", [_gap(e) for e in LOOPS])
def test_a_caught_loop_ends_within_three_more_of_its_calls(episode: EpisodeRecord):
    """Issue 16, point 11: in enforce mode a loop that goes on after its first flag is
    blocked or stopped within three more of its calls (assistant replies, for a message
    loop). Parallel calls of one model turn count once, and those of the flagged call's own
    turn not at all (they could not have read the flag). A caught loop that is only ever
    warned about fails here."""
    report = replay(episode, mode="enforce")
    first = episode.label["first_loop_step"]
    flagged = [f.step for f in report.flags if f.step >= first]
    assert flagged, f"not flagged from step {first}:\n{_flags(episode)}"
    replies = episode.label["kind"] == "monologue"
    later: list[int] = []  # the loop's calls after the flag, a model turn's parallel calls once
    last_t = episode.steps[flagged[0]]["t"]
    for i, step in enumerate(episode.steps[flagged[0] + 1 :], start=flagged[0] + 1):
        if (step.get("role") == "assistant") if replies else (step["type"] == "tool"):
            if step["t"] - last_t > PARALLEL_S:
                later.append(i)
            last_t = step["t"]
    if len(later) < 3:
        return  # the recorded run ended before three more of its calls
    kills = [f.step for f in report.flags if f.severity == "kill" and f.step >= flagged[0]]
    assert kills and kills[0] <= later[2], (
        f"first flag at step {flagged[0]}, still going at step {later[2]}:\n{_flags(episode)}"
    )


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
