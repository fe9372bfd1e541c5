"""Runs read after the fact (their tool-call, message and root rows) grouped by the live
pipeline's rules, and written out as Episode JSONL records.

``runs_of`` groups rows into ``Run`` objects (``assembly``: episode ids, call order): what
``loopscope analyze`` reads from OTLP JSON and what a store's runs are. A run goes to the core
as typed steps (``Run.core_steps``: ``normalize.steps.core_steps``) with its calls' numbers
(``Run.numbers``); a report names it by its record without steps (``Run.record``). Its
Episode JSONL record (``Run.episode``, ``episodes_from_rows``) is the export format only
(the Policy page's download, docs/episode-format.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopscope.detect.episode_records import EpisodeRecord
from loopscope.detect.events import STATUSES, TOOL_KINDS
from loopscope.detect.steps import Step, recorded_args

from ..normalize import assembly
from ..normalize.rows import EpisodeRow, MessageRow, ToolCallRow
from ..normalize.steps import call_numbers, core_steps, output_digest, tool_call

__all__ = ["Run", "episodes_from_rows", "runs_of"]


@dataclass(slots=True)
class Run:
    """One episode read after the fact: its calls in order, its messages, and its root, if
    one was read."""

    episode_id: str
    calls: list[ToolCallRow]
    root: EpisodeRow | None = None
    task: str = ""
    messages: list[MessageRow] = field(default_factory=list)

    @property
    def steps(self) -> list[ToolCallRow | MessageRow]:
        """Calls and messages in the order detection takes them (``assembly.sort_key``)."""
        return sorted([*self.calls, *self.messages], key=assembly.sort_key)

    @property
    def record(self) -> EpisodeRecord:
        """The run's record without its steps (its id, task type, outcome and meta): what a
        report names it by."""
        return _record(self)

    def core_steps(self) -> list[Step]:
        """The run's calls and messages as the core takes them (``normalize.steps``)."""
        steps = self.steps
        return core_steps(steps, steps[0].start_ns if steps else 0)

    @property
    def numbers(self) -> tuple[int, ...]:
        """Per step, the number of its call (``normalize.steps.call_numbers``)."""
        return call_numbers(self.steps)

    @property
    def episode(self) -> EpisodeRecord:
        """The run as an Episode JSONL record, its tool calls and messages as steps: for an
        export (a replay takes ``core_steps``)."""
        return _episode(self)


def episodes_from_rows(rows: Sequence[ToolCallRow], roots: Sequence[EpisodeRow] = (),
                       messages: Sequence[MessageRow] = ()) -> list[EpisodeRecord]:
    """Stored tool calls (and roots, and messages) as Episode JSONL records, grouped by the
    pipeline's rules: for an export."""
    return [run.episode for run in runs_of(list(rows), list(roots), {}, messages)]


def runs_of(calls: list[ToolCallRow], roots: list[EpisodeRow],
            tasks: Mapping[str, str], messages: Sequence[MessageRow] = ()) -> list[Run]:
    """Calls, messages and roots grouped into runs (``assembly``: episode ids, call order)."""
    assembly.resolve_episodes(calls, roots)
    groups = assembly.by_episode(calls)
    said: dict[str, list[MessageRow]] = {}
    for message in messages:
        said.setdefault(message.episode_id, []).append(message)
    heads: dict[str, EpisodeRow] = {}
    for root in roots:
        heads.setdefault(root.episode_id, root)
    runs = []
    for episode_id in groups.keys() | heads.keys() | said.keys():
        head = heads.get(episode_id)
        runs.append(Run(episode_id, groups.get(episode_id, []), head,
                        tasks.get(head.span_id, "") if head is not None else "",
                        said.get(episode_id, [])))

    def first_ns(run: Run) -> int:
        if run.calls or run.messages:
            return run.steps[0].start_ns
        return run.root.start_ns if run.root is not None else 0

    runs.sort(key=lambda run: (first_ns(run), run.episode_id))
    return runs


def _record(run: Run) -> EpisodeRecord:
    rows, root = run.calls, run.root
    meta: dict[str, Any] = {"source": "otlp"}
    traces = sorted({r.trace_id for r in rows} | ({root.trace_id} if root else set()))
    meta["trace_ids"] = traces
    first = root if root is not None else (rows[0] if rows else None)
    if first is not None:
        meta["service"] = first.service
    if root is not None:
        for name in ("agent", "model", "stop_reason", "guard_mode", "cost_usd"):
            value = getattr(root, name)
            if value is not None:
                meta[name] = value
    return EpisodeRecord(
        episode_id=run.episode_id,
        steps=(),
        task_type=root.task_type if root is not None else None,
        outcome=root.outcome if root is not None else None,
        meta=meta,
        task=run.task,
    )


def _episode(run: Run) -> EpisodeRecord:
    root, steps = run.root, run.steps
    first_ns = steps[0].start_ns if steps else (root.start_ns if root is not None else 0)
    return dataclasses.replace(
        _record(run), steps=tuple(_step(row, first_ns) if isinstance(row, ToolCallRow)
                                  else _message_step(row, first_ns) for row in steps))


def _message_step(row: MessageRow, first_ns: int) -> dict[str, Any]:
    """One message row as an Episode message step."""
    step: dict[str, Any] = {"type": "message", "role": row.role, "content": row.content or "",
                            "t": max(row.start_ns - first_ns, 0) / 1e9, "span_id": row.span_id}
    if row.tokens:
        step["tokens_out"] = row.tokens
    return step


def _step(row: ToolCallRow, first_ns: int) -> dict[str, Any]:
    """One tool-call row as an Episode tool step, for an export: what the span recorded of
    the call, written so the core reads it back as the collector identified it
    (``steps.recorded_call``, whose rule decides: ``recorded_args`` and the adapter's call):
    decoded arguments, else the argument text the span cut short and its signature, else the
    signature alone (or a call like no other).
    """
    step: dict[str, Any] = {
        "type": "tool",
        "tool": row.tool,
        "tool_call_id": row.call_id,
        "kind": row.kind if row.kind in TOOL_KINDS else None,
        "output": row.output_text,
        "status": row.status if row.status in STATUSES else "ok",
        "t": max(row.start_ns - first_ns, 0) / 1e9,
        "output_hash": output_digest(row),
        **({"duration_s": (row.end_ns - row.start_ns) / 1e9} if row.end_ns > row.start_ns
           else {}),
        "span_id": row.span_id,
    }
    if row.args_text is None:
        step["signature"] = tool_call(row, step["t"]).signature  # (recorded, else unique)
    else:
        args, whole = recorded_args(row.args_text)
        step["args" if whole else "args_text"] = args if whole else row.args_text
        if row.signature:
            step["signature"] = row.signature
    for name in ("idempotency_key", "intent", "deadline_s", "deadline_stated", "turn",
                 "reconciles", "found"):
        if getattr(row, name) is not None and getattr(row, name) != "":
            step[name] = getattr(row, name)
    if row.tokens_in or row.tokens_out:
        step["tokens_in"], step["tokens_out"] = row.tokens_in, row.tokens_out
    return step
