"""Decoded spans assembled into tool calls and episodes: the one path every door takes.

The live pipeline, ``loopscope analyze`` over OTLP files (with or without ``--db``) and the
dashboard's Import page all turn spans into tool-call rows through these rules, so the same
spans give the same calls whichever door they came in by:

1. **Duplicates.** A span is identified by (trace id, span id); a span sent again is the same
   span, and the first copy is the one kept (``unique_spans``).
2. **Normalising.** Each span is read by ``normalize.normalize_span``, whatever instrumentation
   produced it (``read_spans``).
3. **MCP pairs.** A call reported by both an MCP client and its server carries the same
   ``dedup_key``: the first row is kept, the other dropped (``read_spans``).
4. **Shadows.** With loopscope's framework integrations, a framework's own span (OpenLLMetry's
   tool span, the MCP SDK's spans) reports the same call inside loopscope's span. A foreign
   row of the same trace and tool whose time lies within a loopscope tool span is that span's
   shadow, and loopscope's row wins: it carries the guard's decisions (``shadowed``).
5. **Episodes.** A row's episode id is its own (``loopscope.episode.id``, else a conversation
   or session id), else the id any row or root of its trace carries, else the trace id
   (``resolve_episodes``).
6. **Order.** Calls of an episode are ordered by start time, then the agent's step, then the
   span id (``sort_key``).
7. **Agent names.** A call or root that names no agent takes the ``gen_ai.agent.name`` of its
   nearest ancestor in the batch that carries one (a model turn, an agent span), else the one
   name its trace carries in the batch when there is exactly one (``read_spans``): a run in
   flight is named before its root span arrives, and a run whose calls were stored unnamed
   takes that name when a later batch brings it (``Reading.trace_agents``).

Nothing here does I/O. What an earlier batch left in a store (MCP keys already stored,
loopscope calls of a trace, the episode of a trace) is passed in by the caller, so the live
pipeline gives the store's answers and an offline reader its own memory.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from loopscope import conventions as c

from .dispatch import normalize_span
from .rows import EpisodeRow, ExportReportRow, MessageRow, ReconcileRow, ToolCallRow
from .spans import SpanRecord

__all__ = ["LOOPSCOPE", "Reading", "Window", "by_episode", "read_spans", "resolve_episodes",
           "shadowed", "sort_key", "unique_spans", "windows"]

LOOPSCOPE: Final = "loopscope"
"""The convention of loopscope's own tool spans: the ones that win over a shadow."""

Window = tuple[str, str, int, int]
"""(trace id, tool, start ns, end ns) of a loopscope tool call: what it shadows."""


def sort_key(row: ToolCallRow | MessageRow) -> tuple[int, int, str]:
    """Order of the steps (calls and messages) of an episode: start time, then the agent's
    step, then the span id."""
    return (row.start_ns, row.step if row.step is not None else -1, row.span_id)


def unique_spans(spans: Iterable[SpanRecord]) -> tuple[dict[tuple[str, str], SpanRecord],
                                                      list[SpanRecord]]:
    """The first copy of each span by (trace id, span id), and the copies sent again."""
    unique: dict[tuple[str, str], SpanRecord] = {}
    again: list[SpanRecord] = []
    for span in spans:
        if unique.setdefault((span.trace_id, span.span_id), span) is not span:
            again.append(span)
    return unique, again


@dataclass(slots=True)
class Reading:
    """What a batch of spans says: tool calls, episode roots, reconciles, messages."""

    calls: list[ToolCallRow] = field(default_factory=list)
    messages: list[MessageRow] = field(default_factory=list)
    """Messages of the conversation; one without an episode id belongs to its trace."""
    roots: list[EpisodeRow] = field(default_factory=list)
    reconciles: list[ReconcileRow] = field(default_factory=list)
    reports: list[ExportReportRow] = field(default_factory=list)
    """Agent processes' export reports (their own counts of spans dropped)."""
    dedup_keys: dict[str, str] = field(default_factory=dict)
    """Span id -> MCP key of the calls kept that have one (the store keeps the key)."""
    tasks: dict[str, str] = field(default_factory=dict)
    """Root span id -> the task text the root carries (``loopscope.task``), when it has one."""
    trace_agents: dict[str, str] = field(default_factory=dict)
    """Trace id -> the one agent name its spans in the batch carry (rule 7): an agent span
    that ends after its calls were stored (it is exported last) still names their run."""


def read_spans(
    spans: Iterable[SpanRecord],
    seen_keys: Callable[[Sequence[str]], Container[str]] = lambda keys: (),
) -> Reading:
    """Normalise ``spans`` (rule 2) and keep one row per MCP call (rule 3).

    ``seen_keys(keys)`` answers which of the batch's MCP keys an earlier batch already kept
    (the live pipeline asks its memory and the store); those rows are dropped too.
    """
    normalized = [(span, normalize_span(span)) for span in spans]
    keys = [n.extra["dedup_key"] for _, n in normalized
            if n.tool_call is not None and "dedup_key" in n.extra]
    seen = seen_keys(keys) if keys else ()
    reading = Reading()
    kept: set[str] = set()
    for span, result in normalized:
        if result.tool_call is not None:
            key = result.extra.get("dedup_key")
            if key is not None:
                if key in seen or key in kept:
                    continue
                kept.add(key)
                reading.dedup_keys[span.span_id] = key
            reading.calls.append(result.tool_call)
        if result.episode is not None:
            reading.roots.append(result.episode)
            task = span.attributes.get(c.TASK)
            if isinstance(task, str) and task:
                reading.tasks[span.span_id] = task
        if result.reconcile is not None:
            reading.reconciles.append(result.reconcile)
        if result.export_report is not None:
            reading.reports.append(result.export_report)
        if result.message is not None:
            result.message.episode_id = result.message.episode_id or span.trace_id
            reading.messages.append(result.message)
    _name_agents(reading, [span for span, _ in normalized])
    return reading


def _name_agents(reading: Reading, spans: Sequence[SpanRecord]) -> None:
    """Rule 7: rows without an agent name take their nearest named ancestor's, else their
    trace's one name."""
    rows: list[ToolCallRow | EpisodeRow] = [*reading.calls, *reading.roots]
    unnamed = [r for r in rows if not r.agent]
    parents: dict[tuple[str, str], str] = {}
    names: dict[tuple[str, str], str] = {}
    by_trace: dict[str, set[str]] = {}
    for span in spans:
        parents[(span.trace_id, span.span_id)] = span.parent_span_id
        name = span.attributes.get(c.GEN_AI_AGENT_NAME)
        if isinstance(name, str) and name:
            names[(span.trace_id, span.span_id)] = name
            by_trace.setdefault(span.trace_id, set()).add(name)
    reading.trace_agents = {t: next(iter(n)) for t, n in by_trace.items() if len(n) == 1}
    for row in unnamed:
        key: tuple[str, str] | None = (row.trace_id, row.span_id)
        hops = 0
        while key is not None and key not in names and hops < 64:
            parent = parents.get(key)
            key = (row.trace_id, parent) if parent else None
            hops += 1
        trace_names = by_trace.get(row.trace_id, set())
        if key is not None and key in names:
            row.agent = names[key]
        elif len(trace_names) == 1:
            row.agent = next(iter(trace_names))


def windows(rows: Iterable[ToolCallRow]) -> list[Window]:
    """The windows of the loopscope calls among ``rows``."""
    return [(r.trace_id, r.tool, r.start_ns, r.end_ns) for r in rows if r.convention == LOOPSCOPE]


def shadowed(rows: Iterable[ToolCallRow], covers: Iterable[Window]) -> list[ToolCallRow]:
    """The rows of other instrumentations that lie within a loopscope call (rule 4)."""
    by_tool: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for trace_id, tool, start, end in covers:
        by_tool.setdefault((trace_id, tool), []).append((start, end))
    if not by_tool:
        return []
    return [r for r in rows if r.convention != LOOPSCOPE and any(
        start <= r.start_ns and r.end_ns <= end
        for start, end in by_tool.get((r.trace_id, r.tool), ()))]


def resolve_episodes(
    calls: Sequence[ToolCallRow],
    roots: Sequence[EpisodeRow],
    known: Mapping[str, str] | Callable[[Sequence[str]], Mapping[str, str]] = {},  # noqa: B006
) -> dict[str, str]:
    """Fill empty episode ids (rule 5); returns the trace -> episode ids the batch revealed.

    ``known`` is what earlier batches revealed: a mapping, or a function that answers for
    the traces asked (the live pipeline asks its memory and the store).
    """
    revealed: dict[str, str] = {}
    roots_first: tuple[EpisodeRow | ToolCallRow, ...] = (*roots, *calls)
    for item in roots_first:
        if item.episode_id:
            revealed[item.trace_id] = item.episode_id
    calls_first: tuple[ToolCallRow | EpisodeRow, ...] = (*calls, *roots)
    missing = list({i.trace_id for i in calls_first
                    if not i.episode_id and i.trace_id not in revealed})
    earlier = known(missing) if callable(known) else known
    for item in calls_first:
        if not item.episode_id:
            item.episode_id = revealed.get(item.trace_id) or earlier.get(
                item.trace_id, item.trace_id)
    return revealed


def by_episode(rows: Iterable[ToolCallRow]) -> dict[str, list[ToolCallRow]]:
    """Rows grouped by episode, each group in call order (rule 6)."""
    groups: dict[str, list[ToolCallRow]] = {}
    for row in rows:
        groups.setdefault(row.episode_id, []).append(row)
    for group in groups.values():
        group.sort(key=sort_key)
    return groups
