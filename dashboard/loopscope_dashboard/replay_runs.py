"""The half of the Policy page's replay that runs in worker processes: a stored run's verdict
under a policy. The stored run itself (its raw tool-call rows and labels), its steps as the
core takes them and its calls' numbers are the collector's ``runs.stored`` (built by the
adapter its live detection is fed by), which ``loopscope calibrate --db`` reads stores with
too; the run goes through the core's ``replay_steps``, never through an Episode record.

Kept apart from ``replays`` so a spawned worker imports only this, the core and the
collector's row assembly (no pandas, no Streamlit): a replay over thousands of runs starts
its workers sooner.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from loopscope.detect import Policy
from loopscope.detect.events import ACTIONS
from loopscope.detect.false_kill import first_kill, kill_was_false
from loopscope.detect.replay import cost_share, progress_after, replay_steps
from loopscope.detect.steps import MessageStep, ToolStep
from loopscope_collector.runs.stored import StoredRun, build_episodes

__all__ = ["PolicyVerdict", "StoredRun", "build_episodes", "lower_priority", "replay_chunk",
           "verdict"]

_RANK: Final[dict[str, int]] = {name: i for i, name in enumerate(ACTIONS)}
WORKER_NICE: Final = 10
"""How much lower than the dashboard a replay's worker processes run where the system has no
idle scheduling class (``lower_priority``)."""


def lower_priority() -> None:
    """A worker process's initializer: it yields the CPU to the dashboard's pages, so a
    replay behind the page does not slow the page someone is opening. Linux's idle class
    (``SCHED_IDLE``) runs the worker only on a core nothing else wants; a nice value alone
    does not do that: two workers at nice 19 still cost a page over 1,000,000 calls 0.4-0.8 s
    of its 2.1-2.3 s, the idle class about 0.1 s (BENCHMARKS.md). Elsewhere, ``nice``."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # no idle class here (macOS), or not allowed
        with contextlib.suppress(OSError):
            os.nice(WORKER_NICE)


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
    steps = run.steps
    monitor, decided = replay_steps(steps, policy, episode_id=run.episode_id,
                                    task_type=run.task_type)
    stop = monitor.stopped
    stop_step = stop.step if stop is not None and stop.step < len(steps) else None
    # the recorded run went on past a stop; under enforce it would have ended there
    flags = [f for f in monitor.flags if stop_step is None or f.step <= stop_step]
    action = max((f.action if f.severity == "kill" else "warn" for f in flags),
                 key=_RANK.__getitem__, default="allow")
    budget_stop = stop is not None and stop.stop_reason == "budget"
    if stop is not None:
        action = "stop"
    first = flags[0] if flags else None
    kill = first_kill(monitor.flags, stop_step)
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
        progress_after_kill=progress_after(decided, kill.step),
    )
    calls = run.numbers  # (the agent's numbers)
    saved = 0 if stop_step is None else sum(
        1 for step in steps[stop_step + 1:] if isinstance(step, ToolStep))
    cost = None if stop_step is None or run.cost_usd is None else cost_share(
        float(run.cost_usd), [_tokens(step) for step in steps],
        [i for i, step in enumerate(steps) if isinstance(step, ToolStep)], stop_step + 1)
    return PolicyVerdict(
        episode_id=run.episode_id, action=action,
        first_flag_call=None if first is None else calls[first.step],
        first_kill_call=None if kill is None else calls[kill.step],
        stop_call=None if stop_step is None else calls[stop_step],
        stop_reason=None if stop is None else stop.stop_reason, budget_stop=budget_stop,
        label=run.label, caught=caught, kill_judged=judged is not None,
        false_kill=bool(judged), calls_saved=saved,
        cost_saved=float(cost or 0.0))


def _tokens(step: ToolStep | MessageStep) -> int:
    """The tokens a step spent (what a run's cost is shared by)."""
    if isinstance(step, MessageStep):
        return step.tokens
    return step.result.tokens_in + step.result.tokens_out


def _at_or_after(run: StoredRun, step: int, loop_from: int) -> bool:
    return run.agent_step(step) >= loop_from


def replay_chunk(runs: Sequence[StoredRun], policy: Policy) -> list[PolicyVerdict]:
    """In a worker: each run of the chunk built from its raw rows and replayed."""
    return [verdict(run, policy) for run in runs]
