"""One way into the core: typed steps and the one ``feed`` every door uses.

A run is a sequence of steps: tool calls (``ToolStep``: the call and what it returned) and
messages (``MessageStep``). The in-process guard, the collector's streaming detection,
``loopscope analyze`` (from Episode JSONL, from OTLP files, and through a store with
``--db``), the dashboard's Import and the Policy replay all reduce what they have to these
and hand them to ``feed``, so the same run gives the same verdicts by every door. The guard
feeds a live tool call in its two halves (``EpisodeMonitor.before_call`` before the tool
runs, ``after_call`` after): ``feed`` does exactly that, with nothing in between.

``recorded_call`` is the one place that decides how a recorded call (a span, a stored row,
an Episode JSONL step) is identified: by its arguments when they were captured whole, else
by the signature its recorder computed, else as a call like no other.

Example:
    >>> from loopscope.detect import EpisodeMonitor, ToolResult
    >>> from loopscope.detect.steps import MessageStep, ToolStep, feed, recorded_call
    >>> m = EpisodeMonitor()
    >>> step = ToolStep(recorded_call("search", args={"q": "x"}), ToolResult("nothing"))
    >>> before, after = feed(m, step)
    >>> before.action, after.progress
    ('allow', 'new_info')
    >>> feed(m, MessageStep("assistant", "Let me look again.")) is None
    True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, overload

from .events import Decision, ToolCall, ToolResult
from .monitor import EpisodeMonitor

Role = Literal["user", "assistant", "system"]
ROLES: tuple[Role, ...] = ("user", "assistant", "system")


@dataclass(frozen=True, slots=True)
class ToolStep:
    """A tool call and what it returned."""

    call: ToolCall
    result: ToolResult


@dataclass(frozen=True, slots=True)
class MessageStep:
    """A message of the conversation.

    ``model_turn``: the message stands for a model call of its own (a recorded run, which
    has no separate record of model calls): the model-turn budget is checked before it and
    its ``tokens`` counted. A live guard counts model calls itself (``before_model_call``,
    ``record_model_call``) and feeds messages without one.
    """

    role: str
    content: str = ""
    t: float = 0.0
    tokens: int = 0
    model_turn: bool = False


Step = ToolStep | MessageStep


@overload
def feed(monitor: EpisodeMonitor, step: ToolStep) -> tuple[Decision, Decision]: ...
@overload
def feed(monitor: EpisodeMonitor, step: MessageStep) -> Decision | None: ...
def feed(
    monitor: EpisodeMonitor, step: Step
) -> tuple[Decision, Decision] | Decision | None:
    """Feed one step to ``monitor``: a tool step's (before, after) decisions, or a message's
    decision when it raised a flag (``None`` when it raised nothing)."""
    if isinstance(step, ToolStep):
        return monitor.before_call(step.call), monitor.after_call(step.result)
    if step.model_turn and step.role == "assistant":
        monitor.check_model_turn(step.t)
        monitor.after_model_call(tokens=step.tokens)
    return monitor.record_message(step.role, step.content)


def recorded_call(
    tool: str,
    *,
    args: Any = None,
    args_text: str | None = None,
    signature: str = "",
    unique: str = "",
    **fields: Any,
) -> ToolCall:
    """A recorded call as the core compares it.

    ``args`` are the decoded arguments, or ``args_text`` their recorded text (a span's,
    which the recorder may have truncated). Arguments that can be decoded identify the
    call: the core computes its signature under the policy (volatile keys left out), so a
    ``signature`` the recorder computed under another policy does not count. Only when no
    arguments were captured, or their text is not JSON (cut short), is the recorded
    ``signature`` trusted; without either the call is like no other (``unique`` names it).
    ``fields`` are the other ``ToolCall`` fields (``call_id``, ``kind``, ``t``...).
    """
    if args is None and args_text is not None:
        try:
            args = json.loads(args_text)
        except ValueError:
            return ToolCall(tool, {"input": args_text},
                            signature=signature, args_text=args_text if signature else "",
                            **fields)
    if args is not None:
        return ToolCall(tool, args, **fields)
    if signature:
        return ToolCall(tool, None, signature=signature, args_text="", **fields)
    return ToolCall(tool, None, signature=f"nosig:{unique or tool}", **fields)
