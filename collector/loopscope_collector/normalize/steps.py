"""Stored rows as the detection core's steps: the one adapter from rows to the core.

A run's tool-call and message rows (``rows.ToolCallRow``, ``rows.MessageRow``: what a span
becomes, and what the store returns) become the core's typed steps (``ToolStep``,
``MessageStep``, ``loopscope.detect.steps``) here and nowhere else. The collector's streaming
detection, ``loopscope analyze`` over OTLP JSON and through a store, the dashboard's Import
and the Policy page's replay all feed the core through ``core_steps``, so one run gives the
same verdicts by every door. No Episode JSONL record is built on the way (Episode JSONL is an
export format: ``runs.episodes`` writes one for reports and downloads).

A recorded call is identified by the core's own rule (``steps.recorded_call``): its decoded
arguments, else the argument text the span cut short and its signature, else the signature
alone, else a call like no other (named by its span id).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from loopscope.detect import ToolCall, ToolResult
from loopscope.detect.events import STATUSES, TOOL_KINDS
from loopscope.detect.steps import MessageStep, Step, ToolStep, recorded_call
from loopscope.detect.steps import call_numbers as numbered

from .rows import MessageRow, ToolCallRow

__all__ = ["Row", "call_numbers", "core_steps", "output_digest", "tool_call", "tool_result"]

Row = ToolCallRow | MessageRow
"""A step of an episode as stored: a tool call or a message."""


def core_steps(rows: Iterable[Row], first_ns: int) -> list[Step]:
    """``rows`` (in the order they ran: ``assembly.sort_key``) as the core's steps, timed in
    seconds after ``first_ns`` (the episode's first step). An assistant message stands for
    its model call, as in a recorded run; a call's end time says which calls ran in
    parallel (``steps.feed_run``)."""
    steps: list[Step] = []
    for row in rows:
        t = max(row.start_ns - first_ns, 0) / 1e9
        steps.append(MessageStep(row.role, row.content or "", t, tokens=row.tokens,
                                 model_turn=True) if isinstance(row, MessageRow)
                     else ToolStep(tool_call(row, t), tool_result(row, t),
                                   (row.end_ns - first_ns) / 1e9
                                   if row.end_ns > row.start_ns else None))
    return steps


def output_digest(row: ToolCallRow) -> str:
    """The row's output hash; a unique one when it has neither output nor hash."""
    return row.output_hash or ("" if row.output_text is not None else f"nohash:{row.span_id}")


def tool_call(row: ToolCallRow, t: float) -> ToolCall:
    """A row as the core's ``ToolCall``, ``t`` seconds after its episode started: identified
    as every door identifies a recorded call (``steps.recorded_call``)."""
    return recorded_call(
        row.tool,
        args_text=row.args_text,
        signature=row.signature,
        unique=row.span_id,
        call_id=row.call_id or row.span_id,
        kind=row.kind if row.kind in TOOL_KINDS else None,
        t=t,
        intent=row.intent,
        idempotency_key=row.idempotency_key,
        deadline_s=row.deadline_s,
        deadline_stated=row.deadline_stated,
        turn=row.turn,
        reconciles=row.reconciles,
        found=row.found,
    )


def tool_result(row: ToolCallRow, t: float) -> ToolResult:
    """What a row's call returned, as the core's ``ToolResult``."""
    return ToolResult(
        output=row.output_text,
        output_hash=output_digest(row),
        status=row.status if row.status in STATUSES else "ok",
        call_id=row.call_id or row.span_id,
        t=t,
        tokens_in=row.tokens_in,
        tokens_out=row.tokens_out,
        cost=row.cost_usd or 0.0,
    )


def call_numbers(rows: Sequence[Row]) -> tuple[int, ...]:
    """Per row of a run (in the order they ran), the number of its call, by the core's one
    numbering (``steps.call_numbers``): the agent's own (``call_ordinal``, set by its SDK from
    ``loopscope.call.ordinal``) when every call of the run carries a distinct one, else the
    collector's order; a message takes the number of the call that would follow it."""
    return numbered([isinstance(row, ToolCallRow) for row in rows],
                    [row.call_ordinal for row in rows if isinstance(row, ToolCallRow)])
