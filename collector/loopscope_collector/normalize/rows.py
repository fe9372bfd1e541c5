"""What a span means to loopscope: a tool call, an episode, a reconcile, a message, an agent
process's export report, or nothing.

``normalize.normalize_span`` turns one ``SpanRecord`` into at most one of these rows,
whatever instrumentation produced it (loopscope, OTel GenAI, OpenInference, OpenLLMetry,
Logfire / OpenAI Agents, MCP). The store keeps them in the ``tool_calls``, ``episodes``,
``reconciles`` and ``messages`` tables; the detection core is fed from ``ToolCallRow`` and
``MessageRow``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ToolCallRow:
    """One tool call.

    ``args_text`` / ``output_text`` are ``None`` when the span carried no content (only
    hashes); ``signature`` and ``output_hash`` are then the span's own, or empty when it had
    none, and ``content_captured`` says which. ``guard_*`` are the decisions an in-process
    guard already made (loopscope spans only). ``convention`` names the instrumentation
    the row was read from.
    """

    trace_id: str
    span_id: str
    episode_id: str
    service: str
    tool: str
    start_ns: int
    end_ns: int
    convention: str
    call_id: str | None = None
    parent_span_id: str = ""
    agent: str | None = None
    model: str | None = None
    kind: str | None = None
    step: int | None = None
    call_ordinal: int | None = None
    """The agent's 1-based number of the call (``loopscope.call.ordinal``): kept when calls
    before it were lost, unlike a count of the calls stored."""
    signature: str = ""
    args_text: str | None = None
    output_hash: str = ""
    output_text: str | None = None
    output_size: int | None = None
    content_captured: bool = False
    status: str = "ok"
    error_message: str | None = None
    guard_mode: str | None = None
    guard_action: str | None = None
    guard_decision: str | None = None
    guard_reason: str | None = None
    guard_flags: list[str] = field(default_factory=list)
    progress: str | None = None
    streak: int | None = None
    idempotency_key: str | None = None
    write_status: str | None = None
    intent: str | None = None
    deadline_s: float | None = None
    deadline_stated: bool | None = None
    """Whether ``deadline_s`` is an explicit limit (``loopscope.tool.deadline_stated``)."""
    turn: int | None = None
    """The user turn of the call (``loopscope.turn``): a higher one starts a new intent."""
    reconciles: str | None = None
    """The UNKNOWN write this call looked up (``loopscope.reconcile.key`` on a tool span)."""
    found: bool | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None


@dataclass(slots=True)
class EpisodeRow:
    """One agent run, from its root span (``invoke_agent``, OpenInference AGENT, ...)."""

    trace_id: str
    span_id: str
    episode_id: str
    service: str
    start_ns: int
    end_ns: int
    convention: str
    agent: str | None = None
    model: str | None = None
    task_type: str | None = None
    outcome: str | None = None
    stop_reason: str | None = None
    stop_diagnostic: str | None = None
    guard_mode: str | None = None
    tool_calls: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    scenario_loop: bool | None = None
    """The run's ground truth when the agent knew it (``loopscope.label.loop``)."""
    scenario_kind: str | None = None
    scenario_first_loop_step: int | None = None


@dataclass(slots=True)
class ReconcileRow:
    """An UNKNOWN write settled: which key, whether the record was found, and when."""

    trace_id: str
    span_id: str
    episode_id: str
    service: str
    key: str
    found: bool | None
    """``None``: the guard saw a successful read look the record up (the implicit rule)."""
    time_ns: int


@dataclass(slots=True)
class MessageRow:
    """One message of the conversation (a loopscope ``message`` span): the detection core
    reads the assistant's repeated replies and the user's turns from these."""

    trace_id: str
    span_id: str
    episode_id: str
    service: str
    role: str
    start_ns: int
    content: str | None = None
    """``None`` when the agent did not capture content (only ``content_hash``)."""
    content_hash: str = ""
    step: int | None = None
    tokens: int = 0


@dataclass(slots=True)
class ExportReportRow:
    """An agent process's own counts (a ``loopscope.export_report`` span): spans started,
    exported and dropped by reason since it started, and the runs that lost spans since its
    last report got through (run id -> spans lost)."""

    trace_id: str
    span_id: str
    service: str
    instance: str
    time_ns: int
    started: int
    exported: int
    dropped: dict[str, int]
    """Reason (``loopscope.conventions.DROP_REASONS``) -> spans, cumulative."""
    runs: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Normalized:
    """What one span became; ``None`` fields mean "not that kind of span"."""

    tool_call: ToolCallRow | None = None
    episode: EpisodeRow | None = None
    reconcile: ReconcileRow | None = None
    message: MessageRow | None = None
    export_report: ExportReportRow | None = None
    extra: dict[str, Any] = field(default_factory=dict)
