"""One span in, at most one row out: a tool call, an episode, a reconcile, a message, an agent
process's export report (``export_reports``), or nothing.

``normalize_span`` recognises the tool spans of every instrumentation loopscope reads and
turns them into the same ``ToolCallRow``, so detection works on traces a team
already has:

- ``loopscope`` (``loopscope_spans``): ``loopscope.episode.id``,
  ``loopscope.tool.signature`` or ``loopscope.reconcile.key``.
- ``mcp`` (``genai``): ``mcp.method.name``, a ``tools/call ...`` span name, or
  Logfire's ``MCP request: tools/call ...`` / ``MCP server handle request: tools/call``.
- ``openinference`` (``frameworks``): ``openinference.span.kind``.
- ``openllmetry`` (``frameworks``): ``traceloop.span.kind``.
- ``genai`` (``genai``): ``gen_ai.operation.name`` (``execute_tool``,
  ``invoke_agent``).
- ``openai_agents`` (``frameworks``): a ``Function: ...`` span name (Logfire) or
  ``openai_agents.span_type == "function"``.

The order matters: loopscope spans also carry ``gen_ai.*`` keys, and MCP, OpenInference and
OpenLLMetry spans may too, so the more specific marker wins. Anything else (HTTP, database,
LLM calls) returns an empty ``Normalized`` after a handful of dictionary lookups and name
prefix checks: this runs for every span the collector receives.

Rules shared by all conventions (``common``):

- ``args_text`` is the canonical JSON of the parsed arguments: the same call gives the same
  text in every convention, whatever the key order. ``signature`` is only the one the span
  carried (loopscope's SDK), kept for the record: the detection core computes the signature
  from the arguments, under the policy, and the verdict carries it to the store.
- ``output_hash`` is the span's own, else the hash of the model-visible output text.
- A span without content keeps ``content_captured=False`` and empty signature and hash.
- ``status`` is ``loopscope.status`` when present, else ``timeout`` when an error says so
  (``TimeoutError``, "timed out", "deadline exceeded"), ``error`` for an ERROR status or an
  ``error.type``, else ``ok``.
- ``episode_id`` is ``loopscope.episode.id``, else ``gen_ai.conversation.id``, else
  ``session.id``, else Traceloop's association ``session_id`` / ``thread_id`` /
  ``conversation_id``, else ``""`` (the pipeline uses the trace id).
- MCP rows carry ``extra["dedup_key"]`` and ``extra["mcp_side"]``: a call reported by both
  client and server shares the key, and the pipeline keeps the first row it receives.

Example::

    normalized = normalize_span(span)
    row = normalized.tool_call  # or .episode, .reconcile; all None for other spans
    key = normalized.extra.get("dedup_key")  # MCP rows only: keep one row per key
"""

from __future__ import annotations

from loopscope import conventions as c

from . import loopscope_spans
from .export_reports import is_export_report, read_export_report
from .frameworks import (
    OI_KIND,
    TRACELOOP_KIND,
    is_agents_function,
    read_openai_agents,
    read_openinference,
    read_openllmetry,
)
from .genai import is_mcp, read_genai, read_mcp
from .rows import Normalized
from .spans import SpanRecord

__all__ = ["normalize_span"]


def normalize_span(span: SpanRecord) -> Normalized:
    """What ``span`` means to loopscope, whichever instrumentation produced it.

    Args:
        span: One decoded span.

    Returns:
        A ``Normalized`` with at most one of ``tool_call``, ``episode`` and ``reconcile``
        set; all three are ``None`` for spans that are none of these. Never raises on
        unexpected attribute values: they are read leniently or ignored.
    """
    attrs = span.attributes
    if is_export_report(span):
        return Normalized(export_report=read_export_report(span))
    if loopscope_spans.is_loopscope(attrs):
        return loopscope_spans.read(span)
    if is_mcp(span):
        return read_mcp(span)
    kind = attrs.get(OI_KIND)
    if kind is not None:
        return read_openinference(span, kind)
    kind = attrs.get(TRACELOOP_KIND)
    if kind is not None:
        return read_openllmetry(span, kind)
    operation = attrs.get(c.GEN_AI_OPERATION_NAME)
    if operation is not None or span.name == "running tool":
        return read_genai(span, operation)
    if is_agents_function(span):
        return read_openai_agents(span)
    return Normalized()
