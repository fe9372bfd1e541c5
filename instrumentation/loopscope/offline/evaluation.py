"""``loopscope eval``: how well the guard detects loops, against two baselines, in one run.

Labelled episodes (``label.loop`` true or false: the scenario library, human labels) give a
detection rate and a false-kill rate with n and Wilson 95% intervals, detection delay and a
per-kind breakdown. Unlabelled episodes with a known outcome (real trajectories) give kills on
successful runs, flags on failed runs, cost per successful task and the cost spent after the
first flag (docs/metrics.md). The baselines are deliberately simple strawmen, computed here and
nowhere else: *naive* kills at the first (tool, arguments) seen 3 times in the last 6 calls,
outputs ignored; *max-steps* kills before tool call N+1.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..detect.episode_records import EpisodeRecord
from ..detect.false_kill import first_kill, kill_was_false
from ..detect.fingerprint import canonical_json
from ..detect.replay import EpisodeReport

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a proportion; ``None`` when ``n`` is 0."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(successes: int, n: int) -> dict[str, Any]:
    """A rate as an object: value, successes, n and the Wilson 95% interval."""
    interval = wilson(successes, n)
    return {
        "value": successes / n if n else None,
        "count": successes,
        "n": n,
        "interval": [round(interval[0], 4), round(interval[1], 4)] if interval else None,
    }


@dataclass(frozen=True, slots=True)
class SystemVerdict:
    """One system's verdict on one episode: its first flag and its first kill, by step."""

    first_flag: int | None
    first_kill: int | None
    flag_steps: tuple[int, ...] = ()


def ours(report: EpisodeReport) -> SystemVerdict:
    """loopscope's verdict from a replay report (its first detector kill at or before its
    first stop, ``false_kill.first_kill``: a budget stop is the user's cap, not a kill)."""
    kill = first_kill(report.flags, report.stop.step if report.stop is not None else None)
    return SystemVerdict(
        first_flag=report.first_flag.step if report.first_flag else None,
        first_kill=kill.step if kill else None,
        flag_steps=tuple(f.step for f in report.flags),
    )


def naive_baseline(episode: EpisodeRecord, *, threshold: int = 3, window: int = 6) -> SystemVerdict:
    """Kill at the first call whose (tool, arguments) occurs ``threshold`` times in the last
    ``window`` calls, outputs and kinds ignored (the plain 3-of-6 rule, no exemptions)."""
    recent: deque[str] = deque(maxlen=window)
    for index, step in enumerate(episode.steps):
        if step.get("type") != "tool":
            continue
        key = f"{step.get('tool')}\x00{canonical_json(step.get('args'))}"
        recent.append(key)
        if recent.count(key) >= threshold:
            return SystemVerdict(index, index, (index,))
    return SystemVerdict(None, None)


def max_steps_baseline(episode: EpisodeRecord, *, max_steps: int = 10) -> SystemVerdict:
    """Kill before tool call ``max_steps + 1`` (a global round cap)."""
    calls = 0
    for index, step in enumerate(episode.steps):
        if step.get("type") == "tool":
            calls += 1
            if calls > max_steps:
                return SystemVerdict(index, index, (index,))
    return SystemVerdict(None, None)


@dataclass
class SystemScore:
    """Counters for one system over a set of episodes."""

    name: str
    loops: int = 0
    detected: int = 0
    delays: list[int] = field(default_factory=list)
    kills: int = 0
    false_kills: int = 0
    legit: int = 0
    legit_killed: int = 0
    legit_warned_ids: list[str] = field(default_factory=list)
    """Legitimate runs flagged with a warning only (a nudge, not a kill)."""
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    success: int = 0
    success_killed: int = 0
    success_killed_ids: list[str] = field(default_factory=list)
    failure: int = 0
    failure_flagged: int = 0
    failure_killed: int = 0
    cost_after_flag: float = 0.0
    cost_after_kill: float = 0.0

    def add(self, episode: EpisodeRecord, verdict: SystemVerdict, report: EpisodeReport) -> None:
        """Score one episode."""
        label = episode.loop_label
        first_loop = episode.label.get("first_loop_step") if label else None
        kind = str(episode.label.get("kind") or "none")
        row = self.by_kind.setdefault(
            kind, {"episodes": 0, "detected": 0, "killed": 0, "false_kills": 0}
        )
        row["episodes"] += 1 if label is not None else 0
        if verdict.first_kill is not None:
            judged = kill_was_false(
                label=label,
                kill_step=verdict.first_kill,
                first_loop_step=first_loop if isinstance(first_loop, int) else None,
                outcome=episode.outcome,
                progress_after_kill=report.progress_after(verdict.first_kill),
            )
            if judged is not None:
                self.kills += 1
                self.false_kills += judged
            row["killed"] += 1
            row["false_kills"] += bool(judged)
        if label is True:
            self.loops += 1
            start = first_loop if isinstance(first_loop, int) else 0
            hit = next((s for s in verdict.flag_steps if s >= start), None)
            if hit is not None:
                self.detected += 1
                row["detected"] += 1
                self.delays.append(hit - start)
        elif label is False:
            self.legit += 1
            self.legit_killed += verdict.first_kill is not None
            if verdict.first_kill is None and verdict.first_flag is not None:
                self.legit_warned_ids.append(episode.episode_id)
        elif episode.outcome == "success":
            self.success += 1
            if verdict.first_kill is not None:
                self.success_killed += 1
                self.success_killed_ids.append(episode.episode_id)
        elif episode.outcome == "failure":
            self.failure += 1
            self.failure_flagged += verdict.first_flag is not None
            self.failure_killed += verdict.first_kill is not None
        if verdict.first_flag is not None:
            self.cost_after_flag += report.cost_after(verdict.first_flag) or 0.0
        if verdict.first_kill is not None:
            self.cost_after_kill += report.cost_after(verdict.first_kill) or 0.0

    def as_dict(self) -> dict[str, Any]:
        """The scores as plain data."""
        delays = sorted(self.delays)
        return {
            "system": self.name,
            "labelled": {
                "loop_detection_rate": rate(self.detected, self.loops),
                "false_kill_rate": rate(self.false_kills, self.kills),
                "legit_runs_killed": rate(self.legit_killed, self.legit),
                "legit_runs_warned": rate(len(self.legit_warned_ids), self.legit),
                "warned_legit_runs": self.legit_warned_ids[:50],
                "detection_delay_steps": {
                    "mean": round(statistics.fmean(delays), 2) if delays else None,
                    "median": statistics.median(delays) if delays else None,
                    "max": delays[-1] if delays else None,
                },
                "by_kind": self.by_kind,
            },
            "unlabelled": {
                "successful_runs_killed": rate(self.success_killed, self.success),
                "failed_runs_flagged": rate(self.failure_flagged, self.failure),
                "failed_runs_killed": rate(self.failure_killed, self.failure),
                "killed_successes": self.success_killed_ids[:20],
                "cost_after_first_flag_usd": round(self.cost_after_flag, 4),
                "cost_after_first_kill_usd": round(self.cost_after_kill, 4),
            },
        }


def evaluate(reports: Sequence[EpisodeReport], *, max_steps: int = 10) -> dict[str, Any]:
    """Score loopscope and both baselines over the same replayed episodes."""
    systems: list[tuple[SystemScore, Callable[[EpisodeReport], SystemVerdict]]] = [
        (SystemScore("loopscope"), ours),
        (SystemScore("naive_3_of_6"), lambda r: naive_baseline(r.episode)),
        (
            SystemScore(f"max_steps_{max_steps}"),
            lambda r: max_steps_baseline(r.episode, max_steps=max_steps),
        ),
    ]
    costs = [r.episode.cost_usd for r in reports if r.episode.cost_usd is not None]
    successes_with_cost = sum(
        1 for r in reports if r.episode.outcome == "success" and r.episode.cost_usd is not None
    )
    for report in reports:
        for score, judge in systems:
            score.add(report.episode, judge(report), report)
    labelled = sum(1 for r in reports if r.episode.loop_label is not None)
    return {
        "episodes": len(reports),
        "labelled": labelled,
        "unlabelled_with_outcome": sum(
            1
            for r in reports
            if r.episode.loop_label is None and r.episode.outcome in ("success", "failure")
        ),
        "cost": {
            "episodes_with_cost": len(costs),
            "total_usd": round(sum(costs), 4),
            "successes_with_cost": successes_with_cost,
            "cost_per_successful_task_usd": (
                round(sum(costs) / successes_with_cost, 4) if successes_with_cost else None
            ),
        },
        "systems": [score.as_dict() for score, _ in systems],
    }


def _pct(r: dict[str, Any]) -> str:
    if r["value"] is None:
        return "n/a (n=0)"
    lo, hi = r["interval"]
    return f"{r['value']:.1%} ({r['count']}/{r['n']}, 95% CI {lo:.1%}–{hi:.1%})"


def as_text(result: dict[str, Any]) -> str:
    """The evaluation as a readable report."""
    out = [
        f"{result['episodes']} runs: {result['labelled']} labelled, "
        f"{result['unlabelled_with_outcome']} unlabelled with a known outcome",
        "",
    ]
    if result["labelled"]:
        out.append("Labelled runs")
        for s in result["systems"]:
            lab = s["labelled"]
            delay = lab["detection_delay_steps"]
            out.append(f"  {s['system']}")
            out.append(f"    loop detection rate  {_pct(lab['loop_detection_rate'])}")
            out.append(f"    false-stop rate      {_pct(lab['false_kill_rate'])}")
            out.append(f"    legit runs stopped   {_pct(lab['legit_runs_killed'])}")
            out.append(f"    legit runs warned    {_pct(lab['legit_runs_warned'])}")
            for episode_id in lab["warned_legit_runs"][:10]:
                out.append(f"      warned: {episode_id}")
            out.append(
                f"    detection delay      mean {delay['mean']}, median {delay['median']},"
                f" max {delay['max']} steps"
            )
        out.append("")
        out.append("  per kind (runs: loopscope detected / naive / max-steps; stops on legit)")
        kinds = sorted({k for s in result["systems"] for k in s["labelled"]["by_kind"]})
        for kind in kinds:
            rows = [s["labelled"]["by_kind"].get(kind, {}) for s in result["systems"]]
            n = rows[0].get("episodes", 0)
            if not n:
                continue
            cells = " / ".join(str(r.get("detected", 0)) for r in rows)
            fk = " / ".join(str(r.get("false_kills", 0)) for r in rows)
            out.append(f"    {kind:<20} n={n:<4} detected {cells:<12} false stops {fk}")
        out.append("")
    if result["unlabelled_with_outcome"]:
        out.append("Unlabelled runs (real runs)")
        for s in result["systems"]:
            u = s["unlabelled"]
            out.append(f"  {s['system']}")
            out.append(f"    successful runs stopped {_pct(u['successful_runs_killed'])}")
            out.append(f"    failed runs flagged     {_pct(u['failed_runs_flagged'])}")
            out.append(f"    failed runs stopped     {_pct(u['failed_runs_killed'])}")
            out.append(
                f"    cost after first flag   ${u['cost_after_first_flag_usd']:.2f}"
                f" (after first stop ${u['cost_after_first_kill_usd']:.2f})"
            )
        cost = result["cost"]
        if cost["cost_per_successful_task_usd"] is not None:
            out.append(
                f"  cost per successful task ${cost['cost_per_successful_task_usd']:.3f}"
                f" ({cost['episodes_with_cost']} runs with cost, ${cost['total_usd']:.2f}"
                f" total, {cost['successes_with_cost']} successes)"
            )
    return "\n".join(out).rstrip()
