"""Real agent trajectories (../shared/data): the guard-rail against false kills on real work."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from loopscope.detect.episode_records import parse_episode_line
from loopscope.detect.replay import EpisodeReport, replay


@cache
def _reports(folder: str) -> tuple[tuple[str, EpisodeReport], ...]:
    """Every episode of every file, replayed once in enforce mode (shared by the tests)."""
    out = []
    for path in sorted(Path(folder).glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    out.append((path.name, replay(parse_episode_line(line), mode="enforce")))
    return tuple(out)


def test_every_file_parses_and_replays(shared_data):
    """A format drift between the converter and parse_episode would raise or skip files here."""
    files = {name for name, _ in _reports(str(shared_data))}
    assert files == {p.name for p in shared_data.glob("*.jsonl")}
    assert len(_reports(str(shared_data))) > 1000


def test_no_kill_on_a_successful_episode(shared_data):
    """A detector change that blocks or stops a run that actually succeeded (a false kill)."""
    offenders = [
        f"{name}:{r.episode.episode_id} {r.first_kill.detector}@{r.first_kill.step}"
        for name, r in _reports(str(shared_data))
        if r.episode.outcome == "success" and r.first_kill is not None
    ]
    assert offenders == []


def test_failed_react_runs_are_flagged(shared_data):
    """A detector change that goes blind to the ReAct agents' search loops fails here."""
    flagged = [
        r
        for name, r in _reports(str(shared_data))
        if name.startswith("react_") and r.episode.outcome == "failure" and r.flags
    ]
    assert len(flagged) >= 20
    assert any(f.severity == "kill" for r in flagged for f in r.flags)


def _exact_repeats(report: EpisodeReport) -> int:
    """The most times one (tool, canonical arguments) occurs in the episode (the data
    README's repeat statistic)."""
    from collections import Counter

    from loopscope.detect.fingerprint import canonical_json

    keys = Counter(
        f"{s['tool']}\x00{canonical_json(s.get('args'))}"
        for s in report.episode.steps
        if s.get("type") == "tool"
    )
    return max(keys.values(), default=0)


def test_halted_react_runs_with_exact_repeats_are_flagged(shared_data):
    """Issue 9: at least 24 of the 25 ReAct runs that hit the step limit with a call repeated
    3+ times are flagged. A detector that counts repeats only back to back, or that lets any
    progress elsewhere hide a question asked again and again, fails here."""
    halted = [
        r
        for name, r in _reports(str(shared_data))
        if name.startswith("react_") and r.episode.meta.get("halted") and _exact_repeats(r) >= 3
    ]
    assert len(halted) == 25
    missed = [r.episode.episode_id for r in halted if not r.flags]
    assert len(missed) <= 1, missed
