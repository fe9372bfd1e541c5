"""How a guard is scored on labelled sets of runs: caught loops, false kills, false warnings,
caught loops that end, and each detector's precision.

The rules are those of the labelled sets' README (``../shared/eval/README.md``), applied to
an enforce-mode replay, step by step, as the guard would see each run:

- **caught**: a loop with a flag at or after ``label.first_loop_step`` and no kill before it;
- **false kill**: a kill (a detector's block or stop) on a look-alike, or before
  ``first_loop_step`` on a loop;
- **false warning**: a look-alike warned but never blocked or stopped;
- **ends**: a caught loop that goes on three or more steps after its first flag there is
  blocked or stopped by the third of them (steps are indexes into the run, messages
  included).

A kill here is ``false_kill.is_detector_kill``: a budget's stop is the user's cap, not a
detector's verdict. ``loopscope eval`` prints these per file and overall; ``loopscope
calibrate`` searches for the policy that keeps them best with no false kill.

Example:
    >>> from loopscope.detect.episode_records import parse_episode
    >>> from loopscope.detect.replay import replay
    >>> spin = {"episode_id": "spin", "label": {"loop": True, "first_loop_step": 0},
    ...         "steps": [{"type": "tool", "tool": "search", "kind": "read", "args": {"q": "x"},
    ...                    "output": "no results"} for _ in range(6)]}
    >>> score = score_runs("demo", [replay(parse_episode(spin))])
    >>> (score.loops, score.caught, score.false_kills, score.ended, score.goes_on)
    (1, 1, [], 1, 1)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..detect.events import Flag
from ..detect.false_kill import is_detector_kill
from ..detect.replay import EpisodeReport

ENDS_WITHIN: Final = 3
"""A caught loop that goes on must be blocked or stopped within this many steps of its
first flag."""


@dataclass(frozen=True, slots=True)
class RunScore:
    """One labelled run's verdict under the scoring rules (None fields: not applicable)."""

    episode_id: str
    loop: bool
    caught: bool = False
    false_kill: Flag | None = None
    """The kill that was false: on a look-alike, or before the loop began."""
    false_warning: bool = False
    goes_on: bool = False
    """A caught loop with ``ENDS_WITHIN`` or more steps after its first flag there."""
    ended: bool = False
    """... and blocked or stopped by the ``ENDS_WITHIN``-th of them."""


def score_run(report: EpisodeReport) -> RunScore | None:
    """Score one replayed run; None when it carries no ``label.loop``."""
    episode = report.episode
    label = episode.loop_label
    if label is None:
        return None
    kills = [f for f in report.flags if is_detector_kill(f)]
    if label is False:
        if kills:
            return RunScore(episode.episode_id, False, false_kill=kills[0])
        return RunScore(episode.episode_id, False, false_warning=bool(report.flags))
    first = episode.label.get("first_loop_step")
    start = first if isinstance(first, int) else 0
    early = next((f for f in kills if f.step < start), None)
    if early is not None:
        return RunScore(episode.episode_id, True, false_kill=early)
    hit = next((f for f in report.flags if f.step >= start), None)
    if hit is None:
        return RunScore(episode.episode_id, True)
    goes_on = len(report.steps) - 1 - hit.step >= ENDS_WITHIN
    ended = goes_on and any(hit.step <= f.step <= hit.step + ENDS_WITHIN for f in kills)
    return RunScore(episode.episode_id, True, caught=True, goes_on=goes_on, ended=ended)


@dataclass
class SetScore:
    """The scores of one labelled set (or of several together)."""

    name: str
    loops: int = 0
    caught: int = 0
    healthy: int = 0
    goes_on: int = 0
    ended: int = 0
    false_kills: list[str] = field(default_factory=list)
    """``episode_id detector@step`` of each false kill."""
    false_warnings: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    not_ended: list[str] = field(default_factory=list)
    kills: dict[str, list[int]] = field(default_factory=dict)
    """Per detector: [kills that landed on a loop (at or after it began), all its kills]."""

    def add(self, report: EpisodeReport) -> RunScore | None:
        """Score one run into the set; returns its ``RunScore`` (None: unlabelled)."""
        run = score_run(report)
        if run is None:
            return None
        loop_from = _loop_start(report) if run.loop else None
        for flag in report.flags:
            if is_detector_kill(flag):
                row = self.kills.setdefault(flag.detector, [0, 0])
                row[0] += loop_from is not None and flag.step >= loop_from
                row[1] += 1
        if run.false_kill is not None:
            self.false_kills.append(
                f"{run.episode_id} {run.false_kill.detector}@{run.false_kill.step}")
        if run.loop:
            self.loops += 1
            self.caught += run.caught
            self.goes_on += run.goes_on
            self.ended += run.ended
            if not run.caught and run.false_kill is None:
                self.missed.append(run.episode_id)
            if run.goes_on and not run.ended:
                self.not_ended.append(run.episode_id)
        else:
            self.healthy += 1
            if run.false_warning:
                self.false_warnings.append(run.episode_id)
        return run

    def merge(self, other: SetScore) -> None:
        """Add another set's counts to this one."""
        for name in ("loops", "caught", "healthy", "goes_on", "ended"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.false_kills += other.false_kills
        self.false_warnings += other.false_warnings
        self.missed += other.missed
        self.not_ended += other.not_ended
        for detector, (right, total) in other.kills.items():
            row = self.kills.setdefault(detector, [0, 0])
            row[0] += right
            row[1] += total

    def as_dict(self) -> dict[str, Any]:
        """The scores as plain data (``loopscope eval --json``'s ``sets``)."""
        return {
            "set": self.name,
            "loops": self.loops,
            "caught": self.caught,
            "healthy": self.healthy,
            "false_kills": len(self.false_kills),
            "false_kill_runs": self.false_kills,
            "false_warnings": len(self.false_warnings),
            "false_warning_runs": self.false_warnings,
            "missed_runs": self.missed,
            "caught_that_go_on": self.goes_on,
            "ended_within_3": self.ended,
            "not_ended_runs": self.not_ended,
            "detector_precision": {
                name: {"on_loops": right, "kills": total,
                       "precision": round(right / total, 4) if total else None}
                for name, (right, total) in sorted(self.kills.items())
            },
        }


def _loop_start(report: EpisodeReport) -> int:
    first = report.episode.label.get("first_loop_step")
    return first if isinstance(first, int) else 0


def score_runs(name: str, reports: Iterable[EpisodeReport]) -> SetScore:
    """Score every labelled run of one set."""
    score = SetScore(name)
    for report in reports:
        score.add(report)
    return score


def overall(sets: Sequence[SetScore], name: str = "all") -> SetScore:
    """The sets together."""
    total = SetScore(name)
    for one in sets:
        total.merge(one)
    return total


def as_text(sets: Sequence[SetScore]) -> str:
    """The per-set table and, for several sets, their total, with the runs behind each
    false kill and false warning and every detector's precision."""
    rows = [*sets, overall(sets)] if len(sets) > 1 else list(sets)
    out = ["Labelled sets (enforce, scored as ../shared/eval/README.md says)",
           f"  {'set':<14} {'caught':>9} {'false stops':>12} {'false warnings':>15} "
           f"{'ends by 3rd step':>17}"]
    for score in rows:
        out.append(
            f"  {score.name:<14} {f'{score.caught}/{score.loops}':>9} "
            f"{len(score.false_kills):>12} {f'{len(score.false_warnings)}/{score.healthy}':>15} "
            f"{f'{score.ended}/{score.goes_on}':>17}")
    total = rows[-1]
    for run in total.false_kills:
        out.append(f"    false stop: {run}")
    for run in total.false_warnings:
        out.append(f"    false warning: {run}")
    if total.kills:
        out.append("  detector precision (blocks and stops that landed on a loop)")
        for detector, (right, count) in sorted(total.kills.items()):
            out.append(f"    {detector:<20} {right}/{count} ({right / count:.0%})")
    return "\n".join(out)
