"""One way into the core: typed steps and the one ``feed`` every door uses.

A run is a sequence of steps: tool calls (``ToolStep``: the call and what it returned) and
messages (``MessageStep``). The in-process guard, the collector's streaming detection,
``loopscope analyze`` (from Episode JSONL, from OTLP files, and through a store with
``--db``), the dashboard's Import and the Policy replay all reduce what they have to these
and hand them to ``feed`` (a recorded run: ``feed_run``, which gives the calls of one model
turn as the guard saw them), so the same run gives the same verdicts by every door. The
guard feeds a live tool call in its two halves (``EpisodeMonitor.before_call`` before the
tool runs, ``after_call`` after): ``feed`` does exactly that, with nothing in between.

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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, overload

from .events import Decision, ToolCall, ToolResult
from .ladder import same_turn
from .monitor import EpisodeMonitor


@dataclass(slots=True)
class ToolStep:
    """A tool call and what it returned."""

    call: ToolCall
    result: ToolResult
    end: float | None = None
    """When the call returned, where the record says (a span's end): calls whose times
    overlap ran in parallel."""


@dataclass(slots=True)
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
    return _feed_message(monitor, step)


def _feed_message(monitor: EpisodeMonitor, step: MessageStep) -> Decision | None:
    if step.model_turn and step.role == "assistant":
        monitor.check_model_turn(step.t)
        monitor.after_model_call(tokens=step.tokens)
    return monitor.record_message(step.role, step.content, step.t)


Fed = tuple[Decision, Decision] | Decision | None
"""What feeding a step gave: a tool step's (before, after), or a message's decision."""


def feed_run(monitor: EpisodeMonitor, steps: Iterable[Step]) -> Iterator[Fed]:
    """Feed a recorded run's steps, in order, as its guard saw them; yields what each gave.

    The tool calls of one model turn are all issued before any of their results is read,
    as a live guard sees parallel calls: a warning delivered with the first result cannot
    have been read by the others. Calls ran in parallel when the record says so by their
    times: one started before the turn's calls returned (``ToolStep.end``), or, where no
    return time is recorded, within ``limits.PARALLEL_S`` of the one before (not at the very
    same recorded time). Each is a different call under another call id: the same call
    again, however soon, came after the first one's result (a loop in code that calls a tool
    back to back is not parallel work).
    """
    turn = _Turn()
    for step in steps:
        if isinstance(step, ToolStep):
            if turn.takes(step):
                turn.add(step)
                continue
            if turn.steps:
                yield from _feed_turn(monitor, turn.steps)
            turn = _Turn(step)
            continue
        if turn.steps:
            yield from _feed_turn(monitor, turn.steps)
            turn = _Turn()
        yield _feed_message(monitor, step)
    if turn.steps:
        yield from _feed_turn(monitor, turn.steps)


class _Turn:
    """The tool calls of one model turn as ``feed_run`` gathers them, and whether the next
    call joins them. A turn of many calls (a record of thousands stamped at one instant) is
    told in constant time: from when its calls end, and an index of its calls and call ids
    (the check over every call gathered was quadratic: 55 s for 10,000 calls)."""

    __slots__ = ("calls", "ends", "ids", "steps")

    INDEXED: Final = 16
    """From this many calls on, a turn keeps its index (fewer are compared one by one)."""

    def __init__(self, first: ToolStep | None = None) -> None:
        self.steps: list[ToolStep] = []
        self.ends: float | None = None
        """The latest end of the calls gathered (a call without one: its start)."""
        self.calls: dict[tuple[str, str, str], dict[Any, list[Any]]] | None = None
        """Once indexed: the arguments of the calls gathered, by tool, signature and argument
        text, then by shape (``_shape``: equal arguments have equal shapes)."""
        self.ids: set[str] = set()
        """Once indexed: the call ids of the calls gathered."""
        if first is not None:
            self.add(first)

    def add(self, step: ToolStep) -> None:
        self.steps.append(step)
        end = step.end or step.call.t
        if end is not None and (self.ends is None or end > self.ends):
            self.ends = end
        if self.calls is not None:
            self._index(step.call)
        elif len(self.steps) >= self.INDEXED:
            self.calls = {}
            for gathered in self.steps:
                self._index(gathered.call)

    def _index(self, call: ToolCall) -> None:
        assert self.calls is not None
        shapes = self.calls.setdefault((call.tool, call.signature, call.args_text), {})
        shapes.setdefault(_shape(call.args), []).append(call.args)
        if call.call_id is not None:
            self.ids.add(call.call_id)

    def takes(self, step: ToolStep) -> bool:
        """Whether ``step`` is one more call of this turn (any call opens an empty one): it
        started while the turn's calls were running, by their recorded return times, else
        within ``PARALLEL_S`` of the last one (``same_turn``); and it is another call than
        each of them, under another call id (the results are paired with their calls by
        it)."""
        if not self.steps:
            return True
        last = self.steps[-1]
        if last.end is not None and last.end > last.call.t:
            together = self.ends is not None and step.call.t < self.ends
        else:
            together = same_turn(last.call.t, step.call.t)
        return together and self._distinct(step.call)

    def _distinct(self, call: ToolCall) -> bool:
        if self.calls is None:
            return all(_call_of(other.call) != _call_of(call) and (
                other.call.call_id is None or other.call.call_id != call.call_id)
                for other in self.steps)
        if call.call_id is not None and call.call_id in self.ids:
            return False
        shapes = self.calls.get((call.tool, call.signature, call.args_text))
        if not shapes:
            return True
        args, shape = call.args, _shape(call.args)
        candidates = ([a for found in shapes.values() for a in found] if shape is _UNKNOWN
                      else [*shapes.get(shape, ()), *shapes.get(_UNKNOWN, ())])
        return not any(other is args or other == args for other in candidates)


def _call_of(call: ToolCall) -> tuple[str, Any, str, str]:
    return call.tool, call.args, call.signature, call.args_text


_UNKNOWN: Final = object()
"""The shape of arguments with a part ``_shape`` does not know: compared with every call of
their tool, signature and argument text."""


def _shape(value: Any) -> Any:
    """A hashable stand-in for ``value`` that equal values share (so calls are compared only
    with those whose arguments may equal theirs): a dict's items, a list's or tuple's items,
    each by its shape, a plain value itself (equal numbers hash alike); ``_UNKNOWN`` when some
    part is none of these (an object compared by its own rules)."""
    try:
        return _shape_of(value)
    except RecursionError:  # (nested deeper than the interpreter goes: compared as it is)
        return _UNKNOWN


def _shape_of(value: Any) -> Any:
    if type(value) is dict:
        items = []
        for key, item in value.items():
            shape = _shape_of(item)
            if shape is _UNKNOWN:
                return _UNKNOWN
            items.append((key, shape))
        return ("dict", frozenset(items))
    if type(value) in (list, tuple):
        shapes = tuple(_shape_of(item) for item in value)
        return _UNKNOWN if _UNKNOWN in shapes else (type(value).__name__, shapes)
    if type(value) in (str, int, float, bool, type(None)):
        return value
    return _UNKNOWN


def _feed_turn(monitor: EpisodeMonitor, turn: list[ToolStep]) -> list[Fed]:
    if len(turn) == 1:
        step = turn[0]
        return [(monitor.before_call(step.call), monitor.after_call(step.result))]
    befores = [monitor.before_call(step.call) for step in turn]
    afters = [monitor.after_call(step.result) for step in turn]
    return list(zip(befores, afters, strict=True))


def call_numbers(calls: Iterable[bool], own: Sequence[int | None] = ()) -> tuple[int, ...]:
    """Per step of a run (``calls``: whether each step, in order, is a tool call), the number
    of its call: the one numbering every door names a call by. ``own`` are the agent's own
    numbers of its calls (set by its SDK, ``loopscope.call.ordinal``), one per call, used when
    every call carries a distinct one (1 or more), so a run whose calls were partly lost names them as
    the agent's log does; else the calls are numbered in order (1 for the first). A message
    is numbered as the call that would follow it, the agent's next one after the last call
    before it (a stop decided at a message takes effect there): that call's number plus one
    (1 before any call), whether or not the next call reached the record.

    Example:
        >>> call_numbers([True, False, True, False])
        (1, 2, 2, 3)
        >>> call_numbers([True, False, True, True, False], own=[1, 5, 6])
        (1, 2, 5, 6, 7)
    """
    kinds = list(calls)
    agents: list[int] = []
    if (own and len(own) == sum(kinds) and len(set(own)) == len(own)
            and all(isinstance(n, int) and n >= 1 for n in own)):
        agents = [n for n in own if n is not None]
    numbers: list[int] = []
    count = last = 0
    for call in kinds:
        if call:
            count += 1
            last = agents[count - 1] if agents else count
            numbers.append(last)
        else:
            numbers.append(last + 1)
    return tuple(numbers)


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
        args, whole = recorded_args(args_text)
        if not whole:
            return ToolCall(tool, args,
                            signature=signature, args_text=args_text if signature else "",
                            **fields)
    if args is not None:
        return ToolCall(tool, args, **fields)
    if signature:
        return ToolCall(tool, None, signature=signature, args_text="", **fields)
    return ToolCall(tool, None, signature=f"nosig:{unique or tool}", **fields)


def recorded_args(args_text: str) -> tuple[Any, bool]:
    """A call's recorded argument text as the core reads it (``recorded_call``): its decoded
    arguments and True, or, when the text is not JSON (its recorder cut it short), the text
    as ``{"input": text}`` and False (the recorded signature then identifies the call)."""
    try:
        return json.loads(args_text), True
    except ValueError:
        return {"input": args_text}, False
