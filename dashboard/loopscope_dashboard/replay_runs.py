"""The half of the Policy page's replay that runs in worker processes: a stored run's verdict
under a policy. The stored run itself (its raw tool-call rows and labels) and its ``Episode``,
built by the collector's own rule, are the collector's ``offline.stored_runs``, which
``loopscope calibrate --db`` reads stores with too.

Kept apart from ``replays`` so a spawned worker imports only this, the core and the
collector's row assembly (no pandas, no Streamlit): a replay over thousands of runs starts
its workers sooner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from loopscope.detect import Policy
from loopscope.detect.events import ACTIONS
from loopscope.detect.false_kill import first_kill, kill_was_false
from loopscope.detect.replay import replay
from loopscope.offline.analysis import flag_calls
from loopscope_collector.offline.stored_runs import StoredRun, build_episodes

__all__ = ["PolicyVerdict", "StoredRun", "build_episodes", "replay_chunk", "verdict"]

_RANK: Final[dict[str, int]] = {name: i for i, name in enumerate(ACTIONS)}


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    """What enforce mode under one policy does to one run (calls are 1-based ordinals: the
    agent's own numbers where its SDK set them, ``StoredRun.call_number``)."""

    episode_id: str
    action: str
    """The strongest action: allow, warn, block or stop."""
    first_flag_call: int | None
    first_kill_call: int | None
    stop_call: int | None
    stop_reason: str | None
    budget_stop: bool
    label: bool | None
    caught: bool
    kill_judged: bool
    """A detector kill the false-kill rule could judge (``detect.false_kill``)."""
    false_kill: bool
    calls_saved: int
    cost_saved: float


def verdict(run: StoredRun, policy: Policy) -> PolicyVerdict:
    """Replay ``run`` in enforce mode under ``policy`` and judge it against its label."""
    report = replay(run.episode, policy, mode="enforce")
    stop = report.stop
    stop_step = stop.step if stop is not None and stop.step < len(run.episode.steps) else None
    # the recorded run went on past a stop; under enforce it would have ended there
    flags = [f for f in report.flags if stop_step is None or f.step <= stop_step]
    action = max((f.action if f.severity == "kill" else "warn" for f in flags),
                 key=_RANK.__getitem__, default="allow")
    budget_stop = stop is not None and stop.stop_reason == "budget"
    if stop is not None:
        action = "stop"
    first = flags[0] if flags else None
    kill = first_kill(report.flags, stop_step)
    loop_from = run.first_loop_step
    caught = run.label is True and any(
        loop_from is None or _at_or_after(run, f.step, loop_from)
        for f in flags if f.kind != "budget")
    judged = None if kill is None else kill_was_false(
        label=run.label,
        kill_step=run.agent_step(kill.step),
        first_loop_step=loop_from,
        human_false_kill=run.human_false_kill,
        outcome=run.outcome,
        progress_after_kill=report.progress_after(kill.step),
    )
    calls = [run.call_number(n) for n in flag_calls(run.episode)]  # (the agent's numbers)
    saved = 0 if stop_step is None else sum(
        1 for step in run.episode.steps[stop_step + 1:] if step.get("type") == "tool")
    cost = report.cost_after(stop_step + 1) if stop_step is not None else None
    return PolicyVerdict(
        episode_id=run.episode.episode_id, action=action,
        first_flag_call=None if first is None else calls[first.step],
        first_kill_call=None if kill is None else calls[kill.step],
        stop_call=None if stop_step is None else calls[stop_step],
        stop_reason=None if stop is None else stop.stop_reason, budget_stop=budget_stop,
        label=run.label, caught=caught, kill_judged=judged is not None,
        false_kill=bool(judged), calls_saved=saved,
        cost_saved=float(cost or 0.0))


def _at_or_after(run: StoredRun, step: int, loop_from: int) -> bool:
    return run.agent_step(step) >= loop_from


def replay_chunk(runs: Sequence[StoredRun], policy: Policy) -> list[PolicyVerdict]:
    """In a worker: the chunk's episodes built from its raw rows, then each run replayed."""
    build_episodes(runs)
    return [verdict(run, policy) for run in runs]
