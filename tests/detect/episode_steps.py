"""Builders for small authored episodes: Episode JSONL steps as dicts, replayed through the core."""

from __future__ import annotations

from typing import Any

from loopscope.detect import Policy
from loopscope.detect.episode_records import parse_episode
from loopscope.detect.events import Flag
from loopscope.detect.replay import EpisodeReport, replay


def tool(
    name: str,
    args: dict[str, Any] | None = None,
    output: Any = "",
    *,
    status: str | None = "ok",
    kind: str | None = None,
    t: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One ``{"type": "tool"}`` step."""
    step: dict[str, Any] = {
        "type": "tool",
        "tool": name,
        "args": {} if args is None else args,
        "output": output,
        "status": status,
        "kind": kind,
    }
    if t is not None:
        step["t"] = t
    step.update(extra)
    return step


def msg(role: str, content: str = "") -> dict[str, Any]:
    """One ``{"type": "message"}`` step."""
    return {"type": "message", "role": role, "content": content}


def record(
    steps: list[dict[str, Any]],
    *,
    episode_id: str = "authored",
    task_type: str | None = None,
    outcome: str | None = None,
    loop: bool | None = None,
    first_loop_step: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A raw Episode record (what one JSONL line decodes to)."""
    data: dict[str, Any] = {"episode_id": episode_id, "source": "authored", "steps": steps}
    if task_type is not None:
        data["task_type"] = task_type
    if outcome is not None:
        data["outcome"] = outcome
    if loop is not None:
        data["label"] = {"loop": loop, "first_loop_step": first_loop_step}
    data.update(extra)
    return data


def run(
    steps: list[dict[str, Any]],
    policy: Policy | None = None,
    *,
    mode: str = "enforce",
    **meta: Any,
) -> EpisodeReport:
    """Parse ``steps`` as an Episode and replay it in ``mode``."""
    return replay(parse_episode(record(steps, **meta)), policy, mode=mode)


def flags_by(report: EpisodeReport, detector: str) -> list[Flag]:
    """The report's flags raised by ``detector``."""
    return [f for f in report.flags if f.detector == detector]


def describe(report: EpisodeReport) -> str:
    """The flags of a report, one line each, for assertion messages."""
    return (
        "\n".join(
            f"{f.step} {f.detector} {f.kind} {f.severity}: {f.message[:90]}" for f in report.flags
        )
        or "(no flags)"
    )
