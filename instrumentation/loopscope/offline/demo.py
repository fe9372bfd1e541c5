"""Scripted demo agents: scenario episodes driven through the real SDK.

Each scenario episode is replayed as an agent whose "model" is its script: tool steps become
real ``ToolCallScope`` calls (so spans, guard decisions and exports are the real ones), and a
stuck model ignores every correction and keeps to its script until the guard stops it. The
episode's own timestamps drive the guard's clock, so deadlines behave as recorded.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._call import tool_call
from .._errors import LoopDetected
from ..episode import episode

PRICE_IN_USD = 2.5e-6
PRICE_OUT_USD = 1e-5


class ToolError(Exception):
    """What a scripted tool raises for a step whose status is ``error``."""


@dataclass
class DemoRun:
    """What happened to one scripted episode."""

    episode_id: str
    mode: str
    stop_reason: str
    blocked: int = 0
    calls: int = 0


@dataclass
class DemoTotals:
    """Totals over many scripted episodes, per mode."""

    runs: list[DemoRun] = field(default_factory=list)

    def by_mode(self) -> dict[str, dict[str, Any]]:
        """Per mode: runs, calls, blocked calls and stop reasons."""
        out: dict[str, dict[str, Any]] = {}
        for run in self.runs:
            row = out.setdefault(
                run.mode, {"runs": 0, "calls": 0, "blocked": 0, "stop_reasons": Counter()}
            )
            row["runs"] += 1
            row["calls"] += run.calls
            row["blocked"] += run.blocked
            row["stop_reasons"][run.stop_reason] += 1
        for row in out.values():
            row["stop_reasons"] = dict(row["stop_reasons"].most_common())
        return out


def drive(script: Mapping[str, Any], *, mode: str, service: str = "demo", pace: float = 0.0,
          suffix: str = "") -> DemoRun:
    """Run one Episode-format record as a scripted agent in ``mode``.

    ``pace`` sleeps that many seconds before each tool call, so a dashboard watching live
    sees the run unfold; ``suffix`` keeps episode ids unique when scripts are replayed.
    """
    now = [0.0]
    run = DemoRun(episode_id=f"{script['episode_id']}-{mode}{suffix}", mode=mode,
                  stop_reason="completed")
    meta = script.get("meta") or {}
    try:
        with episode(
            task=str(script.get("task") or ""),
            task_type=script.get("task_type"),
            agent_name=f"{service}-{meta.get('scenario', 'agent')}",
            episode_id=run.episode_id,
            mode=mode,
            clock=lambda: now[0],
            label=script.get("label"),
        ) as ep:
            for step in script.get("steps", ()):
                if isinstance(step.get("t"), int | float):
                    now[0] = float(step["t"])
                tokens_in, tokens_out = (
                    int(step.get("tokens_in") or 0),
                    int(step.get("tokens_out") or 0),
                )
                if tokens_in or tokens_out or step.get("role") == "assistant":
                    ep.record_model_call(
                        input_tokens=tokens_in,
                        output_tokens=tokens_out,
                        cost_usd=tokens_in * PRICE_IN_USD + tokens_out * PRICE_OUT_USD,
                        model=str(meta.get("model") or "scripted-fake"),
                    )
                if step.get("type") == "message":
                    ep.record_message(str(step.get("role")), str(step.get("content") or ""))
                    continue
                run.calls += 1
                if pace:
                    time.sleep(pace)
                _call(ep, step, run)
            if script.get("outcome") in ("success", "failure", "unknown"):
                ep.set_outcome(str(script["outcome"]))
    except LoopDetected as stop:
        run.stop_reason = stop.stop_reason
    return run


def _call(ep: Any, step: Mapping[str, Any], run: DemoRun) -> None:
    call = tool_call(
        str(step["tool"]),
        step.get("args") or {},
        episode=ep,
        kind=step.get("kind"),
        call_id=step.get("tool_call_id"),
        intent=step.get("intent"),
        reconciles=step.get("reconciles"),
        found=step.get("found"),
        deadline_s=step.get("deadline_s"),
    ).start()
    if call.blocked:  # the scripted model ignores the correction and carries on
        run.blocked += 1
        return
    output = step.get("output")
    status = step.get("status") or "ok"
    if status == "timeout":
        call.fail(TimeoutError(str(output)))
    elif status == "error":
        call.fail(ToolError(str(output)))
    else:
        call.finish(output)


def drive_all(scripts: Iterable[Mapping[str, Any]], modes: Iterable[str]) -> DemoTotals:
    """Drive every script once in every mode."""
    totals = DemoTotals()
    scripts = list(scripts)
    for mode in modes:
        for script in scripts:
            totals.runs.append(drive(script, mode=mode))
    return totals


def drive_forever(
    scripts: Sequence[Mapping[str, Any]],
    modes: Sequence[str],
    *,
    pace: float,
    stop: threading.Event,
    on_run: Callable[[DemoRun], None] | None = None,
) -> int:
    """Drive the scripts round after round, modes interleaved, until ``stop`` is set.

    Each round gets fresh episode ids. Returns the number of runs driven.
    """
    runs = 0
    for number in itertools.count(1):
        order = list(scripts)
        random.Random(number).shuffle(order)
        for i, script in enumerate(order):
            if stop.is_set():
                return runs
            run = drive(script, mode=modes[(i + number) % len(modes)], pace=pace,
                        suffix=f"-r{number}")
            runs += 1
            if on_run is not None:
                on_run(run)
    return runs
