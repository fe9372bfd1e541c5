"""Spans from loopscope's own SDK: tool calls, episodes (root spans), messages and reconciles.

The SDK already computed the output hash and size and the guard's decision: those are taken as
they are, so the collector's view matches what the in-process guard saw. The span's signature
is kept for the record; detection computes its own from the arguments under the collector's
policy (the SDK's when the argument text was truncated); content (``gen_ai.tool.call.arguments`` /
``.result``) is kept when the agent captured it. The argument text on the span is already
canonical JSON (and may be truncated), so it is stored as it is.
"""

from __future__ import annotations

from typing import Any

from loopscope import conventions as c
from loopscope.detect.fingerprint import output_hash

from .common import as_float, as_int, suffix, text, tool_row
from .rows import EpisodeRow, MessageRow, Normalized, ReconcileRow, ToolCallRow
from .spans import SpanRecord
from .typed_attributes import typed_int

CONVENTION = "loopscope"


def is_loopscope(attrs: dict[str, Any]) -> bool:
    """Whether the span came from loopscope's SDK (it carries ``loopscope.*`` keys)."""
    return c.EPISODE_ID in attrs or c.SIGNATURE in attrs or c.RECONCILE_KEY in attrs


def read(span: SpanRecord) -> Normalized:
    """The row of a loopscope span: tool call, episode, message, reconcile, or nothing."""
    attrs = span.attributes
    operation = attrs.get(c.GEN_AI_OPERATION_NAME)
    if operation == c.OP_EXECUTE_TOOL:
        return Normalized(tool_call=_tool_call(span))
    if operation == c.OP_INVOKE_AGENT:
        return Normalized(episode=_episode(span))
    role = text(attrs.get(c.MESSAGE_ROLE))
    if role is not None:
        return Normalized(message=_message(span, role))
    key = text(attrs.get(c.RECONCILE_KEY))
    if key is not None and span.name.startswith("reconcile"):
        return Normalized(
            reconcile=ReconcileRow(
                trace_id=span.trace_id,
                span_id=span.span_id,
                episode_id=text(attrs.get(c.EPISODE_ID)) or "",
                service=span.service_name,
                key=key,
                found=attrs.get(c.RECONCILE_FOUND) is True,
                time_ns=span.end_ns or span.start_ns,
            )
        )
    return Normalized()


def _tool_call(span: SpanRecord) -> ToolCallRow:
    attrs = span.attributes
    tool = (
        text(attrs.get(c.GEN_AI_TOOL_NAME))
        or suffix(span.name, f"{c.OP_EXECUTE_TOOL} ")
        or span.name
    )
    row = tool_row(span, CONVENTION, tool, call_id=attrs.get(c.GEN_AI_TOOL_CALL_ID))
    args = attrs.get(c.GEN_AI_TOOL_CALL_ARGUMENTS)
    result = attrs.get(c.GEN_AI_TOOL_CALL_RESULT)
    row.args_text = args if isinstance(args, str) else None
    row.output_text = result if isinstance(result, str) else None
    row.content_captured = row.args_text is not None or row.output_text is not None
    row.signature = text(attrs.get(c.SIGNATURE)) or ""  # the core's own computes it again
    row.output_hash = text(attrs.get(c.OUTPUT_HASH)) or (
        output_hash(row.output_text) if row.output_text is not None else ""
    )
    row.output_size = typed_int(attrs, c.OUTPUT_SIZE)
    if row.output_size is None and row.output_text is not None:
        row.output_size = len(row.output_text)
    status = text(attrs.get(c.STATUS))
    if status:
        row.status = status
    row.kind = text(attrs.get(c.TOOL_KIND))
    row.step = typed_int(attrs, c.STEP)
    row.call_ordinal = typed_int(attrs, c.CALL_ORDINAL)
    row.deadline_s = as_float(attrs.get(c.TOOL_DEADLINE_S))
    stated = attrs.get(c.TOOL_DEADLINE_STATED)
    row.deadline_stated = stated if isinstance(stated, bool) else None
    row.intent = text(attrs.get(c.TOOL_INTENT))
    row.turn = typed_int(attrs, c.TURN)
    row.reconciles = text(attrs.get(c.RECONCILE_KEY))
    found = attrs.get(c.RECONCILE_FOUND)
    row.found = found if isinstance(found, bool) else None
    row.guard_mode = text(attrs.get(c.GUARD_MODE))
    row.guard_action = text(attrs.get(c.GUARD_ACTION))
    row.guard_decision = text(attrs.get(c.GUARD_DECISION))
    row.guard_reason = text(attrs.get(c.GUARD_REASON))
    flags = attrs.get(c.FLAGS)
    if isinstance(flags, list | tuple):
        row.guard_flags = [str(flag) for flag in flags]
    elif isinstance(flags, str) and flags:
        row.guard_flags = [flags]
    row.progress = text(attrs.get(c.PROGRESS))
    row.streak = typed_int(attrs, c.STREAK)
    row.idempotency_key = text(attrs.get(c.IDEMPOTENCY_KEY))
    row.write_status = text(attrs.get(c.WRITE_STATUS))
    return row


def _message(span: SpanRecord, role: str) -> MessageRow:
    attrs = span.attributes
    content = attrs.get(c.MESSAGE_CONTENT)
    return MessageRow(
        trace_id=span.trace_id,
        span_id=span.span_id,
        episode_id=text(attrs.get(c.EPISODE_ID)) or "",
        service=span.service_name,
        role=role,
        start_ns=span.start_ns,
        content=content if isinstance(content, str) else None,
        content_hash=text(attrs.get(c.MESSAGE_HASH)) or "",
        step=typed_int(attrs, c.STEP),
        tokens=(typed_int(attrs, c.GEN_AI_USAGE_INPUT_TOKENS) or 0)
        + (typed_int(attrs, c.GEN_AI_USAGE_OUTPUT_TOKENS) or 0),
    )


def _episode(span: SpanRecord) -> EpisodeRow:
    attrs = span.attributes
    diagnostic = attrs.get(c.STOP_DIAGNOSTIC)
    outcome = text(attrs.get(c.OUTCOME))
    return EpisodeRow(
        trace_id=span.trace_id,
        span_id=span.span_id,
        episode_id=text(attrs.get(c.EPISODE_ID)) or "",
        service=span.service_name,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        convention=CONVENTION,
        agent=text(attrs.get(c.GEN_AI_AGENT_NAME)),
        model=text(attrs.get(c.GEN_AI_REQUEST_MODEL)),
        task_type=text(attrs.get(c.TASK_TYPE)),
        outcome=outcome,
        stop_reason=text(attrs.get(c.STOP_REASON)),
        stop_diagnostic=diagnostic if isinstance(diagnostic, str) else None,
        guard_mode=text(attrs.get(c.GUARD_MODE)),
        tool_calls=as_int(attrs.get(c.TOOL_CALLS), bits=32),
        input_tokens=typed_int(attrs, c.GEN_AI_USAGE_INPUT_TOKENS) or 0,
        output_tokens=typed_int(attrs, c.GEN_AI_USAGE_OUTPUT_TOKENS) or 0,
        cost_usd=as_float(attrs.get(c.COST_USD)),
        scenario_loop=loop if isinstance(loop := attrs.get(c.LABEL_LOOP), bool) else None,
        scenario_kind=text(attrs.get(c.LABEL_KIND)),
        scenario_first_loop_step=typed_int(attrs, c.LABEL_FIRST_LOOP_STEP),
    )
