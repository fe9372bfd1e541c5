"""OpenTelemetry GenAI ``execute_tool`` / ``invoke_agent`` spans, and MCP ``tools/call`` spans.

GenAI semconv: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``
and ``gen_ai.tool.call.result`` (JSON strings or structured values). Pydantic AI's older
``running tool`` spans (``tool_arguments`` / ``tool_response``) are read the same way.
A root ``invoke_agent`` span becomes the episode; a nested one (a sub-agent, a handoff) does
not, so it cannot overwrite its parent's row.

MCP: the client (SpanKind CLIENT) and the server (SERVER) each report the same
``tools/call``. Both rows are returned with the same ``extra["dedup_key"]`` and their side in
``extra["mcp_side"]``; the pipeline keeps one per key, preferring the client's (it is the
call as the agent made it, timed as the agent waited for it). The key is
``mcp:{mcp.session.id or trace id}:{jsonrpc.request.id}:{tool}``: request ids restart per
session, and the tool name keeps two stdio servers of one trace apart. Without a request id
(Logfire's MCP spans) the server span's parent is the client span (context travels in
``params._meta``), so the key is ``mcp:span:{client span id}`` on both sides.
"""

from __future__ import annotations

from typing import Any, Final

from loopscope import conventions as c
from loopscope.detect.fingerprint import output_text

from .common import (
    KIND_SERVER,
    MISSING,
    episode_id,
    first,
    loads,
    suffix,
    text,
    tool_row,
)
from .rows import EpisodeRow, Normalized
from .spans import SpanRecord
from .typed_attributes import typed_int

GENAI: Final = "genai"
_OI_PROMPT_TOKENS: Final = "llm.token_count.prompt"  # OpenInference's token counts
_OI_COMPLETION_TOKENS: Final = "llm.token_count.completion"
MCP: Final = "mcp"
MCP_METHOD: Final = "mcp.method.name"
TOOLS_CALL: Final = "tools/call"
_REQUEST_ID_KEYS: Final = ("jsonrpc.request.id", "rpc.jsonrpc.request_id", "mcp.request.id")
_SDK_CLIENT: Final = "MCP send "
"""The MCP Python SDK (2.x) names its client spans ``MCP send tools/call {tool}``."""
_LOGFIRE_CLIENT: Final = "MCP request: tools/call"
_LOGFIRE_SERVER: Final = "MCP server handle request: tools/call"


def read_genai(span: SpanRecord, operation: Any) -> Normalized:
    """An ``execute_tool`` span's tool call, or a root ``invoke_agent`` span's episode."""
    attrs = span.attributes
    if operation == c.OP_EXECUTE_TOOL or span.name == "running tool":
        tool = (
            text(attrs.get(c.GEN_AI_TOOL_NAME))
            or suffix(span.name, f"{c.OP_EXECUTE_TOOL} ")
            or span.name
        )
        row = tool_row(
            span,
            GENAI,
            tool,
            call_id=attrs.get(c.GEN_AI_TOOL_CALL_ID),
            args=first(attrs, c.GEN_AI_TOOL_CALL_ARGUMENTS, "tool_arguments"),
            output=first(attrs, c.GEN_AI_TOOL_CALL_RESULT, "tool_response"),
        )
        return Normalized(tool_call=row)
    if operation == c.OP_INVOKE_AGENT and not span.parent_span_id:
        return Normalized(episode=agent_episode(span, GENAI))
    return Normalized()


def agent_episode(span: SpanRecord, convention: str, agent: Any = None) -> EpisodeRow:
    """The episode of a third-party agent root span: names, model, tokens; no outcome."""
    attrs = span.attributes
    return EpisodeRow(
        trace_id=span.trace_id,
        span_id=span.span_id,
        episode_id=episode_id(attrs),
        service=span.service_name,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        convention=convention,
        agent=text(agent) or text(attrs.get(c.GEN_AI_AGENT_NAME)),
        model=text(attrs.get(c.GEN_AI_REQUEST_MODEL)),
        input_tokens=typed_int(attrs, c.GEN_AI_USAGE_INPUT_TOKENS, _OI_PROMPT_TOKENS) or 0,
        output_tokens=typed_int(attrs, c.GEN_AI_USAGE_OUTPUT_TOKENS, _OI_COMPLETION_TOKENS) or 0,
    )


def is_mcp(span: SpanRecord) -> bool:
    """Whether the span is an MCP request (semconv or Logfire's MCP integration)."""
    name = span.name
    return (
        MCP_METHOD in span.attributes
        or name.startswith(TOOLS_CALL)
        or name.startswith((_LOGFIRE_CLIENT, _LOGFIRE_SERVER))
    )


def read_mcp(span: SpanRecord) -> Normalized:
    """The tool call of an MCP ``tools/call`` span (client or server side); other methods:
    nothing."""
    attrs = span.attributes
    name = span.name
    method = text(attrs.get(MCP_METHOD)) or text(attrs.get("rpc.method"))
    logfire_side = (
        "client"
        if name.startswith(_LOGFIRE_CLIENT)
        else "server"
        if name.startswith(_LOGFIRE_SERVER)
        else None
    )
    if method is None and (logfire_side or name.startswith(TOOLS_CALL)):
        method = TOOLS_CALL
    if method != TOOLS_CALL:
        return Normalized()
    args = first(attrs, c.GEN_AI_TOOL_CALL_ARGUMENTS)
    result = first(attrs, c.GEN_AI_TOOL_CALL_RESULT)
    params: dict[str, Any] = {}
    request = loads(attrs.get("request"))  # Logfire: the JSON-RPC request, as JSON text
    if isinstance(request, dict) and isinstance(request.get("params"), dict):
        params = request["params"]
        if args is MISSING and "arguments" in params:
            args = params["arguments"] if params["arguments"] is not None else {}
    if result is MISSING and "response" in attrs:
        result = loads(attrs["response"])
    is_error = False
    if result is not MISSING:
        result, is_error = _call_tool_result(result)
    tool = (
        text(first(attrs, c.GEN_AI_TOOL_NAME, "mcp.tool.name"))
        or text(params.get("name"))
        or suffix(name, f"{TOOLS_CALL} ")
        or suffix(name, f"{_SDK_CLIENT}{TOOLS_CALL} ")
        or (suffix(name, _LOGFIRE_CLIENT) or suffix(name, _LOGFIRE_SERVER))
        or name
    )
    row = tool_row(
        span, MCP, tool, call_id=attrs.get(c.GEN_AI_TOOL_CALL_ID), args=args, output=result
    )
    if is_error and row.status == "ok":
        row.status = "error"
    side = logfire_side or ("server" if span.kind == KIND_SERVER else "client")
    extra: dict[str, Any] = {"mcp_side": side}
    request_id = text(first(attrs, *_REQUEST_ID_KEYS))
    if request_id is not None:
        scope = text(attrs.get("mcp.session.id")) or span.trace_id
        extra["dedup_key"] = f"mcp:{scope}:{request_id}:{tool}"
    elif side == "client":
        extra["dedup_key"] = f"mcp:span:{span.span_id}"
    elif span.parent_span_id:
        extra["dedup_key"] = f"mcp:span:{span.parent_span_id}"
    return Normalized(tool_call=row, extra=extra)


def _call_tool_result(value: Any) -> tuple[Any, bool]:
    """What the model sees of an MCP ``CallToolResult``, and its ``isError``.

    One text part is its text; anything else is the content list (or the structured
    content when there is no content list) as JSON. A value of another shape is kept.
    """
    data = loads(value)
    if not isinstance(data, dict):
        return value, False
    content = data.get("content")
    if not isinstance(content, list):
        if "structuredContent" in data:
            return data["structuredContent"], data.get("isError") is True
        return value, False
    if len(content) == 1 and isinstance(part := content[0], dict) and part.get("type") == "text":
        shown: Any = part.get("text")
        if isinstance(shown, str):
            return shown, data.get("isError") is True
    return output_text(content), data.get("isError") is True
