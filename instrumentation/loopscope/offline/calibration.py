"""``loopscope calibrate``: the policy that catches the most labelled loops with no false kill.

A kill must be earned by evidence that has never been wrong. Calibration replays labelled
runs (``label.loop`` true or false) and successful unlabelled ones in enforce mode and, for
every evidence source (``detect.evidence``: a detector and what its finding rests on), counts
its blocks and stops that landed on a loop and those that were false kills
(``false_kill.kill_was_false``: a kill on a healthy run or before the loop began; on a
successful unlabelled run, one followed by progress). A source with a false kill on record
may only warn (``Policy.evidence_caps``); capping one may let another source kill where it
did not before (a capped warning is still a nudge whose neglect stops the run), so the runs
it touched are replayed until nothing more is capped. Then ``ignored_calls`` (how many calls
without progress after a warning stop the run) is searched: the value that, with zero false
kills, catches the most loops and ends the most of them.

Zero false kills in ``n`` healthy runs still allows a rate above zero: the report gives the
exact (Clopper-Pearson) 95% upper bound, ``1 - 0.025 ** (1 / n)``: "0 of 113: at most 3.2%".
Too few labels say nothing, and calibration refuses them (``TooFewLabels``).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..detect.episode_records import EpisodeRecord
from ..detect.events import Flag
from ..detect.false_kill import is_detector_kill
from ..detect.policy import Policy
from ..detect.readings import Readings
from ..detect.replay import EpisodeReport, RecordedRun, replay
from .scoring import SetScore, score_runs

MIN_HEALTHY: Final = 20
"""Fewer labelled healthy runs than this cannot bound the false-kill rate usefully (0 of 20
still allows 17%)."""
MIN_LOOPS: Final = 5
"""Fewer labelled loops than this cannot tell one policy from another."""
IGNORED_CALLS_SEARCHED: Final = (2, 3, 4)
"""The ``ignored_calls`` values searched."""


class TooFewLabels(ValueError):
    """Calibration was given too few labelled runs to say anything."""


@dataclass(frozen=True, slots=True)
class LabelledRuns:
    """Where else ``loopscope calibrate`` can read labelled runs: an installed package (the
    collector: ``--db`` and ``--lake``, a store's labelled runs) offers one of these through
    the ``loopscope.labelled_runs`` entry point."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    """Adds its options to ``loopscope calibrate``."""
    episodes: Callable[[argparse.Namespace], list[RecordedRun] | None]
    """The labelled runs its options name, as the core replays them (their typed steps, not
    Episode records); None when none of them was given.

    Raises ValueError naming what is wrong (a store that cannot be opened)."""


def upper_bound(false_kills: int, n: int) -> float:
    """The exact (Clopper-Pearson) two-sided 95% upper bound on a rate seen ``false_kills``
    times in ``n`` runs; for none, ``1 - 0.025 ** (1 / n)``.

    Example:
        >>> round(upper_bound(0, 113), 4)
        0.0321
    """
    if n <= 0:
        return 1.0
    if false_kills == 0:
        return float(1 - 0.025 ** (1 / n))
    lo, hi = false_kills / n, 1.0  # P(X <= k | p) = 0.025, by bisection
    for _ in range(60):
        mid = (lo + hi) / 2
        if _binom_cdf(false_kills, n, mid) > 0.025:
            lo = mid
        else:
            hi = mid
    return hi


def _binom_cdf(k: int, n: int, p: float) -> float:
    term = (1 - p) ** n
    total = term
    for i in range(1, k + 1):
        term *= (n - i + 1) / i * p / (1 - p)
        total += term
    return total


@dataclass
class SourceRecord:
    """What one evidence source's kills did over the calibration runs (before any cap)."""

    source: str
    on_loops: int = 0
    false_kills: list[str] = field(default_factory=list)
    """``episode_id@step`` of each false kill."""

    @property
    def kills(self) -> int:
        return self.on_loops + len(self.false_kills)


@dataclass
class Calibration:
    """The result: the caps, the search, and how the chosen policy scores."""

    policy: Policy
    caps: dict[str, str]
    ignored_calls: int
    sources: dict[str, SourceRecord]
    score: SetScore
    healthy: int
    """Healthy runs judged: labelled look-alikes and successful unlabelled runs."""
    loops: int
    false_kills: list[str]
    tried: list[dict[str, Any]]

    @property
    def bound(self) -> float:
        return upper_bound(len(self.false_kills), self.healthy)

    def settings(self) -> dict[str, Any]:
        """The policy settings calibration chose, as a policy file holds them."""
        return {"evidence_caps": dict(sorted(self.caps.items())),
                "ignored_calls": self.ignored_calls}


Judge = Callable[[EpisodeReport, Flag], "bool | None"]


def _false(report: EpisodeReport, flag: Flag) -> bool | None:
    """Whether ``flag`` (a detector kill) was false on its run: None when the run cannot say
    (unlabelled without success)."""
    episode = report.episode
    label = episode.loop_label
    if label is False:
        return True
    if label is True:
        first = episode.label.get("first_loop_step")
        return isinstance(first, int) and flag.step < first
    if episode.outcome == "success":
        return report.progress_after(flag.step)
    return None


def check_labels(runs: Sequence[EpisodeRecord | RecordedRun]) -> tuple[int, int, int]:
    """(labelled loops, labelled healthy runs, successful unlabelled runs).

    Raises:
        TooFewLabels: fewer than ``MIN_LOOPS`` loops or ``MIN_HEALTHY`` healthy runs, with
            the bound that many would give.
    """
    episodes = [run.episode if isinstance(run, RecordedRun) else run for run in runs]
    loops = sum(1 for e in episodes if e.loop_label is True)
    healthy = sum(1 for e in episodes if e.loop_label is False)
    successes = sum(1 for e in episodes if e.loop_label is None and e.outcome == "success")
    judged = healthy + successes
    if loops < MIN_LOOPS or judged < MIN_HEALTHY:
        raise TooFewLabels(
            f"too few labels to calibrate: {loops} labelled loops (need {MIN_LOOPS}) and "
            f"{judged} healthy runs (labelled look-alikes or successful runs; need "
            f"{MIN_HEALTHY}: 0 false stops in {judged or 0} would bound the rate only at "
            f"{upper_bound(0, judged):.0%}). Label more runs (the dashboard's Labels page, or "
            "label.loop in Episode JSONL) and calibrate again.")
    return loops, healthy, successes


def calibrate(
    episodes: Sequence[EpisodeRecord | RecordedRun],
    base: Policy | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """Search the policy that, over ``episodes`` (Episode JSONL records, or stored runs as
    the core replays them: ``RecordedRun``), makes no false kill and catches the most
    labelled loops (then ends the most): per evidence source, the highest action that never
    killed a healthy run; then ``ignored_calls`` (``IGNORED_CALLS_SEARCHED``).

    Raises:
        TooFewLabels: see ``check_labels``.
    """
    check_labels(episodes)
    base = base or Policy()
    say = progress or (lambda _: None)
    sources: dict[str, SourceRecord] = {}
    best: Calibration | None = None
    tried: list[dict[str, Any]] = []
    quiet: list[EpisodeReport] | None = None
    active: list[EpisodeRecord | RecordedRun] = list(episodes)
    for ignored in IGNORED_CALLS_SEARCHED:
        say(f"ignored_calls={ignored}: replaying {len(active)} runs…")
        caps, reports = _caps_for(active, dataclasses.replace(base, ignored_calls=ignored),
                                  sources if ignored == base.ignored_calls else None, say)
        if quiet is None:  # (a run that raises no flag raises none under any caps or
            # ignored_calls: it is replayed once)
            quiet = [r for r in reports if not r.flags]
            active = [_again(r) for r in reports if r.flags]
        else:
            reports = [*reports, *quiet]
        policy = _with(base, caps, ignored)
        score = score_runs("calibration", reports)
        false = [f"{r.episode.episode_id}@{f.step}" for r in reports for f in r.flags
                 if is_detector_kill(f) and _false(r, f)]
        row = {"ignored_calls": ignored, "caught": score.caught, "loops": score.loops,
               "ended": score.ended, "goes_on": score.goes_on, "false_kills": len(false),
               "caps": len(caps)}
        tried.append(row)
        say(f"  caught {score.caught}/{score.loops}, ended {score.ended}/{score.goes_on}, "
            f"{len(false)} false kills, {len(caps)} sources capped")
        healthy = sum(1 for r in reports if r.episode.loop_label is False
                      or (r.episode.loop_label is None and r.episode.outcome == "success"))
        result = Calibration(policy, caps, ignored, sources, score, healthy,
                             score.loops, false, tried)
        if best is None or _rank(result, base) > _rank(best, base):
            best = result
    assert best is not None
    return best


def _rank(result: Calibration, base: Policy) -> tuple[int, int, int, int, bool]:
    """No false kill first, then the most loops caught, the most ended, the fewest caps, and
    the base's ``ignored_calls`` on a tie."""
    return (-len(result.false_kills), result.score.caught, result.score.ended,
            -len(result.caps), result.ignored_calls == base.ignored_calls)


def _with(base: Policy, caps: dict[str, str], ignored: int) -> Policy:
    return base.replace(evidence_caps=caps, ignored_calls=ignored)


def _caps_for(
    episodes: Sequence[EpisodeRecord | RecordedRun],
    base: Policy,
    record: dict[str, SourceRecord] | None,
    say: Callable[[str], None],
) -> tuple[dict[str, str], list[EpisodeReport]]:
    """Cap every source with a false kill on record, replaying the runs a new cap can change,
    until no false kill is left (or none can be capped)."""
    caps: dict[str, str] = {}
    policy = _with(base, caps, base.ignored_calls)
    readings = Readings()  # (an output read in one run is not read again in another)
    reports = [replay(e, policy, readings=readings) for e in episodes]
    if record is not None:
        for report in reports:
            for flag in report.flags:
                if is_detector_kill(flag):
                    row = record.setdefault(flag.evidence, SourceRecord(flag.evidence))
                    judged = _false(report, flag)
                    if judged:
                        row.false_kills.append(f"{report.episode.episode_id}@{flag.step}")
                    elif judged is False:
                        row.on_loops += 1
    for _ in range(10):
        new = {f.evidence for r in reports for f in r.flags
               if is_detector_kill(f) and _false(r, f) and f.evidence not in caps}
        if not new:
            break
        say(f"  capping {', '.join(sorted(new))}")
        caps.update(dict.fromkeys(new, "warn"))
        policy = _with(base, caps, base.ignored_calls)
        reports = [replay(_again(r), policy, readings=readings) if _touched(r, new) else r
                   for r in reports]
    return caps, reports


def _again(report: EpisodeReport) -> RecordedRun:
    """The run ``report`` replayed, to replay again under another policy (its steps as the
    core took them: not read from the record a second time)."""
    return RecordedRun(report.episode, report.steps, report.numbers)


def _touched(report: EpisodeReport, sources: set[str]) -> bool:
    return any(f.evidence in sources for f in report.flags)


def as_text(result: Calibration) -> str:
    """What calibration found, for people."""
    score = result.score
    out = [
        f"Calibrated on {score.loops} labelled loops and {result.healthy} healthy runs "
        f"(labelled look-alikes and successful runs).",
        f"  caught {score.caught}/{score.loops} loops, {score.ended}/{score.goes_on} caught "
        f"loops that go on ended by the third step, {len(score.false_warnings)} false warnings",
        f"  false stops: {len(result.false_kills)} of {result.healthy}: the false-stop rate is "
        f"at most {result.bound:.1%} at 95%",
    ]
    for run in result.false_kills[:20]:
        out.append(f"    still a false stop (no source left to cap): {run}")
    out.append(f"  ignored_calls = {result.ignored_calls} (tried: " + ", ".join(
        f"{t['ignored_calls']}: caught {t['caught']}, ended {t['ended']}, "
        f"{t['false_kills']} false stops" for t in result.tried) + ")")
    out.append("  evidence sources (blocks and stops before any cap: on loops / false stops)"
               " and the highest action each may take alone:")
    for name, row in sorted(result.sources.items()):
        cap = result.caps.get(name, "stop")
        out.append(f"    {name:<58} {row.on_loops:>4} / {len(row.false_kills):<3} {cap}")
    for name in sorted(set(result.caps) - set(result.sources)):
        out.append(f"    {name:<58}    - / -   {result.caps[name]}")
    return "\n".join(out)
