"""A call guarded by loopscope and also reported by another instrumentation (the MCP SDK's
client and server spans, OpenLLMetry's tool span) is one tool call in the store, whatever
order the spans arrive in."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopscope_collector.normalize.spans import SpanRecord
from loopscope_collector.pipeline.thread import Pipeline
from loopscope_collector.reads import read
from loopscope_collector.storage import Store, open_database
from loopscope_collector.storage.writes import recount_calls

TRACE = "ab" * 16
RESOURCE = {"service.name": "mcp-agent"}


def ours(span_id: str, start: int) -> SpanRecord:
    return SpanRecord(TRACE, span_id, "", "execute_tool search_orders", start, start + 100,
                      attributes={"gen_ai.operation.name": "execute_tool",
                                  "gen_ai.tool.name": "search_orders",
                                  "mcp.method.name": "tools/call",
                                  "loopscope.episode.id": "ep-mcp",
                                  "loopscope.tool.signature": "sig-1",
                                  "loopscope.output.hash": "out-1",
                                  "loopscope.status": "ok", "loopscope.step": start // 1000},
                      resource=RESOURCE)


def sdk_spans(parent: str, start: int, request_id: str) -> list[SpanRecord]:
    client = SpanRecord(TRACE, f"c{parent[1:]}", parent, "MCP send tools/call search_orders",
                        start + 10, start + 90, kind=3,
                        attributes={"mcp.method.name": "tools/call",
                                    "jsonrpc.request.id": request_id}, resource=RESOURCE)
    server = SpanRecord(TRACE, f"d{parent[1:]}", client.span_id, "tools/call search_orders",
                        start + 20, start + 80, kind=2,
                        attributes={"mcp.method.name": "tools/call",
                                    "jsonrpc.request.id": request_id,
                                    "gen_ai.operation.name": "execute_tool",
                                    "gen_ai.tool.name": "search_orders"}, resource=RESOURCE)
    return [client, server]


_FACTS = ("select episode_id, tool_calls, numbered_calls, max_call_ordinal, priced_calls, "
          "calls_cost_usd, calls_tokens_in, calls_tokens_out, calls_by_tool from episodes "
          "order by episode_id")


def assert_call_facts_are_their_calls(db: Store) -> None:
    """Each run's call facts, as the pipeline kept them batch by batch, are what its stored
    calls add up to now (counted again, in a transaction rolled back)."""
    cur = db.cursor()
    try:
        kept = cur.execute(_FACTS).fetchall()
        cur.execute("begin transaction")
        recount_calls(cur, None)
        counted = cur.execute(_FACTS).fetchall()
        cur.execute("rollback")
    finally:
        cur.close()
    assert kept == counted
    assert sum(row[1] for row in kept) == db.cursor().execute(
        "select count(*) from tool_calls").fetchall()[0][0]


@pytest.mark.parametrize("order", ["one batch", "children first", "parent first"])
def test_one_row_per_guarded_mcp_call(tmp_path: Path, order: str) -> None:
    db = open_database(tmp_path / "x.duckdb")
    pipeline = Pipeline(db).start()
    try:
        for i in range(3):
            parent = f"a{i:015d}"
            mine, theirs = [ours(parent, i * 1000)], sdk_spans(parent, i * 1000, str(i + 2))
            batches = {"one batch": [theirs + mine], "children first": [theirs, mine],
                       "parent first": [mine, theirs]}[order]
            for batch in batches:
                pipeline.submit(batch).wait(30)
        calls = read(db, "episode_tool_calls", {"episode_id": "ep-mcp"})
        assert [c["convention"] for c in calls] == ["loopscope"] * 3
        assert read(db, "summary")[0]["tool_calls"] == 3
        flags = read(db, "episode_detections", {"episode_id": "ep-mcp"})
        assert [(f["ordinal"], f["detector"]) for f in flags][:1] == [(2, "exact_repeat")]
        assert [e["episode_id"] for e in read(db, "episodes")] == ["ep-mcp"]
        assert_call_facts_are_their_calls(db)  # (shadows stored first were deleted)
    finally:
        pipeline.stop()
        db.close()


def test_another_instrumentations_span_inside_a_loopscope_call_is_the_same_call(
    tmp_path: Path,
) -> None:
    """OpenLLMetry's tool span, started inside loopscope's LangChain integration span, is the
    same call: one row, loopscope's (it carries the guard's decisions)."""
    db = open_database(tmp_path / "x.duckdb")
    pipeline = Pipeline(db).start()
    try:
        parent = "a" * 16
        theirs = SpanRecord(TRACE, "e" * 16, parent, "search_orders.tool", 10, 90,
                            attributes={"traceloop.span.kind": "tool",
                                        "traceloop.entity.name": "search_orders",
                                        "traceloop.entity.input": '{"inputs": {"q": "late"}}',
                                        "traceloop.entity.output": '"none"'},
                            resource=RESOURCE)
        pipeline.submit([theirs]).wait(30)
        assert read(db, "summary")[0]["tool_calls"] == 1
        pipeline.submit([ours(parent, 0)]).wait(30)
        calls = read(db, "episode_tool_calls", {"episode_id": "ep-mcp"})
        assert [c["convention"] for c in calls] == ["loopscope"]
        assert read(db, "summary")[0]["tool_calls"] == 1
        assert_call_facts_are_their_calls(db)
    finally:
        pipeline.stop()
        db.close()


def test_an_episode_id_reused_in_another_trace_points_at_a_root_that_exists(
        tmp_path: Path) -> None:
    """Two runs under one episode id, each with its root in its own trace: the episode keeps
    the root it read last and that root's trace, never one's trace with the other's root."""
    def root(trace: str, span: str, start: int) -> SpanRecord:
        return SpanRecord(trace, span, "", "invoke_agent", start, start + 100,
                          attributes={"gen_ai.operation.name": "invoke_agent",
                                      "loopscope.episode.id": "ep-reused"},
                          resource=RESOURCE)
    db = open_database(tmp_path / "x.duckdb")
    pipeline = Pipeline(db).start()
    try:
        pipeline.submit([root("11" * 16, "a" * 16, 1000)]).wait(30)
        pipeline.submit([root("22" * 16, "b" * 16, 5000)]).wait(30)
        found = db.cursor().execute(
            "select e.trace_id, e.root_span_id, count(s.span_id) from episodes e left join "
            "spans s on s.trace_id = e.trace_id and s.span_id = e.root_span_id "
            "where e.episode_id = 'ep-reused' group by all").fetchall()
        assert found == [("22" * 16, "b" * 16, 1)]
    finally:
        pipeline.stop()
        db.close()


def test_calls_stored_under_their_trace_move_to_the_conversation_their_root_names(
        tmp_path: Path) -> None:
    """Calls without an episode id are stored under their trace; the root that names the
    conversation moves them there, with their run's call facts (what the metrics count)."""
    trace = "33" * 16
    def call(span: str, start: int, tool: str, cost: float | None) -> SpanRecord:
        return SpanRecord(trace, span, "f" * 16, f"execute_tool {tool}", start, start + 10,
                          attributes={"gen_ai.operation.name": "execute_tool",
                                      "gen_ai.tool.name": tool,
                                      **({"loopscope.cost_usd": cost} if cost else {})},
                          resource=RESOURCE)
    root = SpanRecord(trace, "f" * 16, "", "invoke_agent", 0, 1000,
                      attributes={"gen_ai.operation.name": "invoke_agent",
                                  "gen_ai.conversation.id": "conv-1"}, resource=RESOURCE)
    db = open_database(tmp_path / "x.duckdb")
    pipeline = Pipeline(db).start()
    try:
        pipeline.submit([call("a000000000000001", 10, "search", 0.5),
                         call("a000000000000002", 20, "fetch", None)]).wait(30)
        assert [e["episode_id"] for e in read(db, "episodes")] == [trace]
        pipeline.submit([call("a000000000000004", 40, "search", 0.25), root]).wait(30)
        [run] = read(db, "episodes")
        assert run["episode_id"] == "conv-1"
        assert_call_facts_are_their_calls(db)
        facts = db.cursor().execute(_FACTS).fetchall()
        assert facts == [("conv-1", 3, 0, None, 2, 0.75, 0, 0, {"search": 2, "fetch": 1})]
    finally:
        pipeline.stop()
        db.close()
