"""normalize_span: every convention's tool span becomes the same ToolCallRow.

Spans are written by hand with each instrumentation's real attribute names, except the
loopscope ones, which come from the real SDK through ``capture_spans``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

import loopscope
from loopscope import conventions as c
from loopscope.detect import EpisodeMonitor, Policy
from loopscope.detect.fingerprint import call_signature, canonical_json, output_hash
from loopscope.testing import capture_spans
from loopscope_collector.normalize import steps as adapter
from loopscope_collector.normalize.dispatch import normalize_span
from loopscope_collector.normalize.rows import ToolCallRow
from loopscope_collector.normalize.spans import SpanEvent, SpanRecord

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ARGS = {"query": "late orders", "limit": 20}
ARGS_TEXT = canonical_json(ARGS)
OUTPUT = '[{"id": 1234, "status": "late"}]'
SIGNATURE = call_signature("search_orders", ARGS_TEXT)


def signed(row: ToolCallRow) -> str:
    """The signature the detection core computes from what normalisation passes it."""
    return EpisodeMonitor(Policy()).before_call(adapter.tool_call(row, 0.0)).signature


def span(
    name: str,
    attributes: dict[str, Any],
    *,
    span_id: str = "00f067aa0ba902b7",
    parent: str = "b7ad6b7169203331",
    kind: int = 1,
    status: int = 0,
    message: str = "",
    events: list[SpanEvent] | None = None,
) -> SpanRecord:
    return SpanRecord(
        trace_id=TRACE,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_ns=1_000,
        end_ns=2_000,
        kind=kind,
        status_code=status,
        status_message=message,
        attributes=attributes,
        events=events or [],
        resource={"service.name": "support-agent"},
    )


def tool_call(record: SpanRecord) -> ToolCallRow:
    normalized = normalize_span(record)
    assert normalized.tool_call is not None, record.name
    assert normalized.episode is None and normalized.reconcile is None
    return normalized.tool_call


def assert_search_call(row: ToolCallRow, convention: str) -> None:
    assert row.convention == convention
    assert row.tool == "search_orders"
    assert row.args_text == ARGS_TEXT
    assert signed(row) == SIGNATURE
    assert row.output_text == OUTPUT
    assert row.output_hash == output_hash(OUTPUT)
    assert row.output_size == len(OUTPUT)
    assert row.content_captured
    assert row.service == "support-agent"
    assert (row.trace_id, row.start_ns, row.end_ns) == (TRACE, 1_000, 2_000)


# -- one realistic span per convention -------------------------------------------------------


def test_genai_execute_tool_with_json_string_arguments() -> None:
    row = tool_call(
        span(
            "execute_tool search_orders",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_orders",
                "gen_ai.tool.call.id": "call_mszuSIzqtI65i1wAUOE8w5H4",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": '{"limit": 20, "query": "late orders"}',
                "gen_ai.tool.call.result": OUTPUT,
                "gen_ai.conversation.id": "conv_5j66UpCpwteGg4YSxUnt7lPY",
            },
        )
    )
    assert_search_call(row, "genai")
    assert row.call_id == "call_mszuSIzqtI65i1wAUOE8w5H4"
    assert row.episode_id == "conv_5j66UpCpwteGg4YSxUnt7lPY"
    assert row.status == "ok"


def test_genai_structured_arguments_and_result() -> None:
    """Structured values (an OTLP kvlist) sign like the JSON text; results become JSON."""
    result = [{"id": 1234, "status": "late"}]
    row = tool_call(
        span(
            "execute_tool",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_orders",
                "gen_ai.tool.call.arguments": {"query": "late orders", "limit": 20.0},
                "gen_ai.tool.call.result": result,
            },
        )
    )
    assert signed(row) == SIGNATURE
    assert json.loads(row.output_text or "") == result
    assert row.output_hash == output_hash(row.output_text or "")


def test_openinference_tool_span() -> None:
    row = tool_call(
        span(
            "search_orders",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "search_orders",
                "tool.description": "Search orders by free text.",
                "input.value": '{"query": "late orders", "limit": 20}',
                "input.mime_type": "application/json",
                "output.value": OUTPUT,
                "output.mime_type": "application/json",
                "tool_call.id": "call_oi_1",
                "session.id": "session-42",
                "agent.name": "support",
            },
        )
    )
    assert_search_call(row, "openinference")
    assert (row.call_id, row.episode_id, row.agent) == ("call_oi_1", "session-42", "support")


def test_openinference_python_repr_input_and_redacted_output() -> None:
    """LangChain via OpenInference writes str(dict); a hidden output is not content."""
    row = tool_call(
        span(
            "search_orders",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "search_orders",
                "input.value": "{'query': 'late orders', 'limit': 20}",
                "input.mime_type": "text/plain",
                "output.value": "__REDACTED__",
            },
        )
    )
    assert signed(row) == SIGNATURE
    assert row.output_text is None and row.output_hash == ""


LANGCHAIN_INPUT = json.dumps(
    {
        "input_str": "{'query': 'late orders', 'limit': 20}",
        "tags": ["seq:step:1"],
        "metadata": {"thread_id": "thread-7", "langgraph_step": 3},
        "inputs": {"query": "late orders", "limit": 20},
        "kwargs": {"tool_call_id": "call_lc_1", "color": "green"},
    }
)
LANGCHAIN_OUTPUT = json.dumps(
    {
        "output": {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "schema", "messages", "ToolMessage"],
            "kwargs": {
                "content": OUTPUT,
                "type": "tool",
                "name": "search_orders",
                "tool_call_id": "call_lc_1",
                "status": "success",
            },
        },
        "kwargs": {"color": "green", "name": "search_orders"},
    }
)


def test_openllmetry_langchain_tool_is_unwrapped() -> None:
    row = tool_call(
        span(
            "search_orders.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "search_orders",
                "traceloop.entity.path": "agent.tools",
                "traceloop.workflow.name": "LangGraph",
                "traceloop.entity.input": LANGCHAIN_INPUT,
                "traceloop.entity.output": LANGCHAIN_OUTPUT,
                "traceloop.association.properties.thread_id": "thread-7",
            },
        )
    )
    assert_search_call(row, "openllmetry")
    assert row.call_id == "call_lc_1"
    assert row.episode_id == "thread-7"


@pytest.mark.parametrize(
    ("entity_input", "args_text"),
    [
        # inputs is null for a plain-string tool: the input string is the argument
        ({"input_str": "Paris", "tags": [], "metadata": {}, "inputs": None, "kwargs": {}},
         canonical_json({"input": "Paris"})),
        # older LangChain: no inputs, input_str holds the dict as JSON
        ({"input_str": '{"limit": 20, "query": "late orders"}', "tags": None, "metadata": None,
          "kwargs": {}}, ARGS_TEXT),
        # traceloop.sdk's @tool decorator
        ({"args": [], "kwargs": {"query": "late orders", "limit": 20}}, ARGS_TEXT),
    ],
)  # fmt: skip
def test_openllmetry_input_shapes(entity_input: dict[str, Any], args_text: str) -> None:
    row = tool_call(
        span(
            "lookup.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "lookup",
                "traceloop.entity.input": json.dumps(entity_input),
                "traceloop.entity.output": json.dumps({"output": "sunny", "kwargs": {}}),
            },
        )
    )
    assert row.args_text == args_text
    assert signed(row) == call_signature("lookup", args_text)
    assert row.output_text == "sunny"


def test_logfire_openai_agents_function_span() -> None:
    """Logfire names the span by its message template; the tool is in ``name``."""
    row = tool_call(
        span(
            "Function: {name}",
            {
                "logfire.msg_template": "Function: {name}",
                "logfire.span_type": "span",
                "logfire.msg": "Function: search_orders",
                "name": "search_orders",
                "input": '{"query":"late orders","limit":20}',
                "output": OUTPUT,
                "mcp_data": "null",
                "gen_ai.system": "openai",
            },
        )
    )
    assert_search_call(row, "openai_agents")


def test_logfire_pending_span_is_skipped() -> None:
    record = span(
        "Function: {name}",
        {"logfire.msg_template": "Function: {name}", "logfire.span_type": "pending_span",
         "name": "search_orders"},
    )  # fmt: skip
    assert normalize_span(record).tool_call is None


def test_agents_sdk_processor_function_span() -> None:
    row = tool_call(
        span(
            "function",
            {
                "openai_agents.span_type": "function",
                "openai_agents.name": "search_orders",
                "openai_agents.input": '{"limit": 20, "query": "late orders"}',
                "openai_agents.output": OUTPUT,
            },
        )
    )
    assert_search_call(row, "openai_agents")


def mcp_span(kind: int, span_id: str, parent: str) -> SpanRecord:
    return span(
        "tools/call search_orders",
        {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search_orders",
            "jsonrpc.request.id": "7",
            "mcp.session.id": "191c4850af6c49e08843a3f6c80e5046",
            "mcp.protocol.version": "2025-06-18",
            "network.transport": "tcp",
            "gen_ai.tool.call.arguments": {"query": "late orders", "limit": 20},
            "gen_ai.tool.call.result": {
                "content": [{"type": "text", "text": OUTPUT}],
                "isError": False,
            },
        },
        kind=kind,
        span_id=span_id,
        parent=parent,
    )


def test_mcp_client_and_server_share_one_dedup_key() -> None:
    client = normalize_span(mcp_span(3, "1111111111111111", "2222222222222222"))
    server = normalize_span(mcp_span(2, "3333333333333333", "1111111111111111"))
    assert client.tool_call is not None and server.tool_call is not None
    assert_search_call(client.tool_call, "mcp")  # the text part is what the model sees
    assert signed(client.tool_call) == signed(server.tool_call) == SIGNATURE
    assert client.extra["mcp_side"] == "client" and server.extra["mcp_side"] == "server"
    assert client.extra["dedup_key"] == server.extra["dedup_key"]
    assert client.extra["dedup_key"].startswith("mcp:191c4850af6c49e08843a3f6c80e5046:7")
    retry = mcp_span(3, "4444444444444444", "2222222222222222")
    retry.attributes["jsonrpc.request.id"] = "8"  # the next request is another call
    assert normalize_span(retry).extra["dedup_key"] != client.extra["dedup_key"]


def test_mcp_tool_error_and_other_methods() -> None:
    record = mcp_span(3, "1111111111111111", "")
    record.attributes["gen_ai.tool.call.result"] = json.dumps(
        {"content": [{"type": "text", "text": "no such order"}], "isError": True}
    )
    row = tool_call(record)
    assert (row.status, row.output_text) == ("error", "no such order")
    listing = span("tools/list", {"mcp.method.name": "tools/list", "jsonrpc.request.id": "2"})
    assert normalize_span(listing) == normalize_span(span("GET /", {}))


def test_logfire_mcp_client_and_server_dedup_by_parent() -> None:
    request = json.dumps(
        {"method": "tools/call", "params": {"name": "search_orders", "arguments": ARGS}}
    )
    response = json.dumps({"content": [{"type": "text", "text": OUTPUT}], "isError": False})
    client = normalize_span(
        span(
            "MCP request: tools/call search_orders",
            {"request": request, "response": response, "rpc.method": "tools/call",
             "rpc.system": "jsonrpc"},
            span_id="5555555555555555",
        )
    )  # fmt: skip
    server = normalize_span(
        span(
            "MCP server handle request: tools/call",
            {"request": request, "response": response},
            span_id="6666666666666666",
            parent="5555555555555555",
        )
    )
    assert client.tool_call is not None and server.tool_call is not None
    assert_search_call(client.tool_call, "mcp")
    assert server.tool_call.tool == "search_orders"
    assert client.extra["dedup_key"] == server.extra["dedup_key"]
    assert (client.extra["mcp_side"], server.extra["mcp_side"]) == ("client", "server")


# -- rules shared by all conventions -------------------------------------------------------


def test_same_call_same_signature_across_conventions_and_key_orders() -> None:
    genai = tool_call(
        span(
            "execute_tool search_orders",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_orders",
             "gen_ai.tool.call.arguments": '{"query":"late orders","limit":20}'},
        )
    )  # fmt: skip
    openinference = tool_call(
        span(
            "search_orders",
            {"openinference.span.kind": "TOOL", "tool.name": "search_orders",
             "input.value": '{"limit": 20, "query": "late orders"}'},
        )
    )  # fmt: skip
    other_tool = tool_call(
        span(
            "execute_tool cancel_order",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "cancel_order",
             "gen_ai.tool.call.arguments": '{"query":"late orders","limit":20}'},
        )
    )  # fmt: skip
    assert signed(genai) == signed(openinference) == SIGNATURE
    assert signed(other_tool) != SIGNATURE


def test_non_json_string_arguments_are_wrapped() -> None:
    row = tool_call(
        span(
            "weather",
            {"openinference.span.kind": "TOOL", "tool.name": "weather", "input.value": "Paris"},
        )
    )
    assert row.args_text == canonical_json({"input": "Paris"})
    assert signed(row) == call_signature("weather", row.args_text)
    assert row.output_text is None and row.output_hash == ""


def test_content_less_span_does_not_guess() -> None:
    row = tool_call(
        span(
            "execute_tool search_orders",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_orders",
             "gen_ai.tool.call.id": "call_1"},
        )
    )  # fmt: skip
    assert not row.content_captured
    assert (row.signature, row.output_hash) == ("", "")
    assert row.args_text is None and row.output_text is None


def test_output_without_arguments_is_a_call_without_arguments() -> None:
    row = tool_call(
        span(
            "execute_tool get_time",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_time",
             "gen_ai.tool.call.result": "12:00"},
        )
    )  # fmt: skip
    assert row.args_text == "{}"
    assert signed(row) == call_signature("get_time", "{}")
    assert row.output_hash == output_hash("12:00")


@pytest.mark.parametrize(
    ("status", "message", "attributes", "events", "expected"),
    [
        (0, "", {}, [], "ok"),
        (1, "", {}, [], "ok"),
        (2, "ValueError: order not found", {}, [], "error"),
        (0, "", {"error.type": "tool_error"}, [], "error"),
        (2, "", {"error.type": "TimeoutError"}, [], "timeout"),
        (2, "request timed out after 30s", {}, [], "timeout"),
        (2, "", {"error.type": "DEADLINE_EXCEEDED"}, [], "timeout"),
        (2, "", {}, [SpanEvent("exception", 1_500, {
            "exception.type": "httpx.ReadTimeout", "exception.message": "read"})], "timeout"),
        (2, "", {}, [SpanEvent("exception", 1_500, {
            "exception.type": "KeyError", "exception.message": "'id'"})], "error"),
    ],
)  # fmt: skip
def test_status_mapping(
    status: int, message: str, attributes: dict[str, Any], events: list[SpanEvent], expected: str
) -> None:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_order"}
    row = tool_call(span("execute_tool create_order", attrs | attributes, status=status,
                         message=message, events=events))  # fmt: skip
    assert row.status == expected
    assert (row.error_message is None) == (expected == "ok")


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ({"loopscope.episode.id": "ep-1", "gen_ai.conversation.id": "conv", "session.id": "s"},
         "ep-1"),
        ({"gen_ai.conversation.id": "conv", "session.id": "s",
          "traceloop.association.properties.session_id": "t"}, "conv"),
        ({"session.id": "s", "traceloop.association.properties.session_id": "t"}, "s"),
        ({"traceloop.association.properties.thread_id": "t"}, "t"),
        ({"traceloop.association.properties.conversation_id": "tc"}, "tc"),
        ({}, ""),
    ],
)  # fmt: skip
def test_episode_id_precedence(attributes: dict[str, Any], expected: str) -> None:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"} | attributes
    record = span("execute_tool t", attrs)
    if "loopscope.episode.id" in attributes:
        assert normalize_span(record).tool_call is not None  # read as a loopscope span
    assert tool_call(record).episode_id == expected


# -- episodes and unrelated spans ----------------------------------------------------------


def test_genai_root_invoke_agent_is_an_episode_nested_is_not() -> None:
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support",
        "gen_ai.conversation.id": "conv-9",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 80,
    }
    episode = normalize_span(span("invoke_agent support", attrs, parent="")).episode
    assert episode is not None
    assert (episode.convention, episode.episode_id, episode.agent) == ("genai", "conv-9", "support")
    assert (episode.model, episode.input_tokens, episode.output_tokens) == ("gpt-4o", 1200, 80)
    assert normalize_span(span("invoke_agent support", attrs)).episode is None


def test_openinference_root_agent_is_an_episode() -> None:
    attrs = {"openinference.span.kind": "AGENT", "agent.name": "support", "session.id": "s-1"}
    episode = normalize_span(span("agent", attrs, parent="")).episode
    assert episode is not None and (episode.episode_id, episode.agent) == ("s-1", "support")
    llm = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o"}
    assert normalize_span(span("ChatOpenAI", llm)) == normalize_span(span("GET /", {}))


@pytest.mark.parametrize(
    "record",
    [
        span("GET /orders", {"http.request.method": "GET", "url.path": "/orders",
                             "http.response.status_code": 200}, kind=2),
        span("SELECT orders", {"db.system.name": "postgresql", "db.operation.name": "SELECT"}),
        span("chat gpt-4o", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}),
    ],
)  # fmt: skip
def test_unrelated_spans_give_nothing(record: SpanRecord) -> None:
    normalized = normalize_span(record)
    assert normalized.tool_call is None and normalized.episode is None
    assert normalized.reconcile is None and normalized.extra == {}


# -- loopscope's own SDK ---------------------------------------------------------------------


def to_record(readable: ReadableSpan) -> SpanRecord:
    """A ReadableSpan as decode.py would produce it from OTLP."""

    def plain(attributes: Any) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in (attributes or {}).items()}

    context = readable.context
    assert context is not None
    return SpanRecord(
        trace_id=f"{context.trace_id:032x}",
        span_id=f"{context.span_id:016x}",
        parent_span_id=f"{readable.parent.span_id:016x}" if readable.parent else "",
        name=readable.name,
        start_ns=readable.start_time or 0,
        end_ns=readable.end_time or 0,
        kind=readable.kind.value + 1,  # OTLP counts UNSPECIFIED as 0
        status_code=readable.status.status_code.value,
        status_message=readable.status.description or "",
        attributes=plain(readable.attributes),
        events=[SpanEvent(e.name, e.timestamp, plain(e.attributes)) for e in readable.events],
        resource=plain(readable.resource.attributes),
    )


@loopscope.tool(kind="read")
def search_orders(query: str, limit: int = 20) -> str:
    return OUTPUT


def test_real_sdk_spans_keep_the_sdks_signature_hash_and_guard_fields() -> None:
    with (
        capture_spans(capture_content=True, mode="warn") as captured,
        loopscope.episode(
            task="find late orders", task_type="lookup", agent_name="support"
        ) as episode,
    ):
        for _ in range(4):
            search_orders("late orders", limit=20)
        episode.set_outcome("success")
        episode.reconcile("order-key-1", found=True)
    records = [to_record(s) for s in captured.spans()]
    normalized = [normalize_span(r) for r in records]
    raw = {r.span_id: r.attributes for r in records}

    rows = [n.tool_call for n in normalized if n.tool_call is not None]
    assert len(rows) == 4
    for row in rows:
        attrs = raw[row.span_id]
        assert row.convention == "loopscope" and row.tool == "search_orders"
        assert row.signature == attrs[c.SIGNATURE] == SIGNATURE
        assert row.output_hash == attrs[c.OUTPUT_HASH]
        assert row.args_text == ARGS_TEXT and row.content_captured
        assert row.episode_id == attrs[c.EPISODE_ID] and row.episode_id
        assert row.call_id == attrs[c.GEN_AI_TOOL_CALL_ID]
        assert (row.kind, row.guard_mode) == ("read", "warn")
        assert row.guard_action == attrs[c.GUARD_ACTION]
        assert row.guard_decision == attrs[c.GUARD_DECISION]
        assert row.progress == attrs[c.PROGRESS]
        assert row.streak == attrs[c.STREAK]
        assert row.status == attrs[c.STATUS]
    assert [row.step for row in rows] == [0, 1, 2, 3]
    assert [row.call_ordinal for row in rows] == [1, 2, 3, 4]  # the agent's own numbers
    flagged = [row for row in rows if row.guard_flags]
    assert flagged, "four identical reads must flag"
    assert flagged[-1].guard_flags == list(raw[flagged[-1].span_id][c.FLAGS])
    assert flagged[-1].guard_reason == raw[flagged[-1].span_id][c.GUARD_REASON]
    assert flagged[-1].guard_decision != "allow"

    episodes = [n.episode for n in normalized if n.episode is not None]
    assert len(episodes) == 1
    root = episodes[0]
    assert (root.convention, root.episode_id) == ("loopscope", rows[0].episode_id)
    assert (root.agent, root.task_type, root.outcome) == ("support", "lookup", "success")
    assert (root.stop_reason, root.tool_calls, root.guard_mode) == ("completed", 4, "warn")

    reconciles = [n.reconcile for n in normalized if n.reconcile is not None]
    assert len(reconciles) == 1
    assert (reconciles[0].key, reconciles[0].found) == ("order-key-1", True)
    assert reconciles[0].episode_id == root.episode_id


def test_real_sdk_spans_without_content_keep_hashes() -> None:
    with capture_spans(capture_content=False) as captured, loopscope.episode(task="private"):
        search_orders("late orders", limit=20)
    rows = [normalize_span(to_record(s)).tool_call for s in captured.spans()]
    [row] = [r for r in rows if r is not None]
    assert not row.content_captured
    assert row.args_text is None and row.output_text is None
    assert row.signature == SIGNATURE
    assert row.output_hash == output_hash(OUTPUT)


def test_real_sdk_timeout_is_a_timeout() -> None:
    @loopscope.tool(kind="write")
    def create_order(sku: str) -> str:
        raise TimeoutError("gateway timed out")

    with capture_spans() as captured, loopscope.episode(), pytest.raises(TimeoutError):
        create_order("sku-1")
    rows = [normalize_span(to_record(s)).tool_call for s in captured.spans()]
    [row] = [r for r in rows if r is not None]
    assert row.status == "timeout"
    assert row.write_status == "unknown"
    assert row.idempotency_key


def test_a_call_is_named_by_the_nearest_span_that_names_the_agent() -> None:
    """GenAI spans name the agent on the agent's span and its model turns, not on each tool
    span; a call takes the name of its nearest named ancestor in the batch, else its trace's
    only name, so a run still in flight (no root span yet) is named."""
    from loopscope_collector.normalize.assembly import read_spans

    def tool(span_id: str, parent: str) -> SpanRecord:
        return span("execute_tool search", {c.GEN_AI_OPERATION_NAME: "execute_tool",
                                            c.GEN_AI_TOOL_NAME: "search"},
                    span_id=span_id, parent=parent)

    planner = span("chat gpt-4o", {c.GEN_AI_OPERATION_NAME: "chat",
                                   c.GEN_AI_AGENT_NAME: "planner"},
                   span_id="a1a1a1a1a1a1a1a1", parent="")
    writer = span("chat gpt-4o", {c.GEN_AI_OPERATION_NAME: "chat",
                                  c.GEN_AI_AGENT_NAME: "writer"},
                  span_id="b2b2b2b2b2b2b2b2", parent="a1a1a1a1a1a1a1a1")
    step = span("step", {}, span_id="c3c3c3c3c3c3c3c3", parent="b2b2b2b2b2b2b2b2")
    reading = read_spans([planner, writer, step, tool("d4d4d4d4d4d4d4d4", "c3c3c3c3c3c3c3c3"),
                          tool("e5e5e5e5e5e5e5e5", "a1a1a1a1a1a1a1a1"),
                          tool("f6f6f6f6f6f6f6f6", "0000000000000abc")])
    agents = {row.span_id: row.agent for row in reading.calls}
    assert agents == {"d4d4d4d4d4d4d4d4": "writer", "e5e5e5e5e5e5e5e5": "planner",
                      "f6f6f6f6f6f6f6f6": None}  # two names in the trace: not guessed
    alone = read_spans([span("chat", {c.GEN_AI_AGENT_NAME: "solo"}, span_id="a1a1a1a1a1a1a1a1"),
                        tool("f6f6f6f6f6f6f6f6", "0000000000000abc")])
    assert [row.agent for row in alone.calls] == ["solo"]
