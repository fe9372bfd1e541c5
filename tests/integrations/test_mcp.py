"""The MCP integration, through a real MCP server and a real ``ClientSession``.

The server is an in-process ``MCPServer`` (mcp 2.x's FastMCP) spoken to over the SDK's
in-memory transport, JSON-RPC framing and all. The "agent" is a scripted fake model: it asks
for the next tool call of its script and is fed each result back, so a run is deterministic
and needs no network and no LLM.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

import mcp
from mcp.client._memory import InMemoryTransport  # the SDK's test transport
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

import loopscope
from loopscope import conventions as c
from loopscope.detect import EpisodeMonitor, ToolCall
from loopscope.detect.kinds import idempotent_hint, infer_kind
from loopscope.integrations import mcp as loopscope_mcp
from loopscope.testing import capture_spans

NO_ORDERS = "No orders match 'late'."
LOOP = [("search_orders", {"query": "late"})] * 6
HEALTHY = [
    ("search_orders", {"query": "late"}),
    ("get_order", {"order_id": "1234"}),
    ("refund_order", {"order_id": "1234"}),
]


@pytest.fixture(autouse=True)
def _restore_mcp() -> Iterator[None]:
    """Without it, one test's patched ``call_tool`` would leak into the next."""
    loopscope_mcp.uninstrument()
    yield
    loopscope_mcp.uninstrument()


def order_server(runs: Counter[str]) -> MCPServer:
    """A real MCP server whose tools count their runs in ``runs``."""
    server = MCPServer("orders")

    @server.tool()
    def search_orders(query: str) -> str:
        """Search orders (the same answer every time)."""
        runs["search_orders"] += 1
        return f"No orders match {query!r}."

    @server.tool()
    def get_order(order_id: str) -> str:
        """One order."""
        runs["get_order"] += 1
        return f"Order {order_id}: shipped 2 days late."

    @server.tool()
    def refund_order(order_id: str) -> str:
        """Refund an order."""
        runs["refund_order"] += 1
        return f"Refund issued for order {order_id}."

    @server.tool()
    def lookup_customer(email: str) -> str:
        """Fails: the customer does not exist."""
        runs["lookup_customer"] += 1
        raise ToolError(f"no customer with email {email}")

    @server.tool()
    async def slow_report(day: str) -> str:
        """Never answers in time."""
        runs["slow_report"] += 1
        await anyio.sleep(5)
        return "too late"

    return server


@dataclass
class ScriptedModel:
    """A fake LLM: each turn it reads the last tool output and asks for its next scripted call."""

    script: list[tuple[str, dict[str, Any]]]
    seen: list[str] = field(default_factory=list)

    def next_call(self, last_output: str | None) -> tuple[str, dict[str, Any]] | None:
        if last_output is not None:
            self.seen.append(last_output)
        return self.script.pop(0) if self.script else None


async def run_agent(caller: Any, model: ScriptedModel) -> str:
    """The agent loop: call the tool the model asks for, feed the result text back."""
    output: str | None = None
    while (call := model.next_call(output)) is not None:
        result = await caller.call_tool(*call)
        output = "\n".join(part.text for part in result.content if part.type == "text")
    return "final answer"


@dataclass
class Run:
    """What one scripted run left behind."""

    model: ScriptedModel
    stop: loopscope.LoopDetected | None
    spans: list[dict[str, Any]]
    episode_id: str

    @property
    def tool_spans(self) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"].startswith("execute_tool ")]

    @property
    def root(self) -> dict[str, Any]:
        return next(s for s in self.spans if s["name"].startswith("invoke_agent"))


def run_over_session(
    script: list[tuple[str, dict[str, Any]]], runs: Counter[str], **settings: Any
) -> Run:
    """Run the scripted agent inside ``loopscope.episode`` over a real ``ClientSession``;
    ``settings`` go to ``capture_spans`` (so to ``loopscope.instrument``)."""
    model = ScriptedModel(list(script))
    stops: list[loopscope.LoopDetected] = []
    episode_ids: list[str] = []

    async def main() -> None:
        async with (
            InMemoryTransport(order_server(runs)) as (read, write),
            mcp.ClientSession(read, write) as session,
        ):
            await session.initialize()
            with loopscope.episode(task="refund the late order") as ep:
                episode_ids.append(ep.id)
                try:
                    await run_agent(session, model)
                except loopscope.LoopDetected as exc:
                    stops.append(exc)

    with capture_spans(**settings) as spans:
        asyncio.run(main())
        captured = spans.as_dicts()
    return Run(model, stops[0] if stops else None, captured, episode_ids[0])


def test_enforce_warns_the_third_repeat_blocks_the_fourth_and_stops_with_the_diagnostic() -> None:
    runs: Counter[str] = Counter()
    run = run_over_session(LOOP, runs, mode="enforce")

    assert runs["search_orders"] == 3  # the server never saw the blocked calls
    assert run.model.seen[:2] == [NO_ORDERS, NO_ORDERS]
    third = run.model.seen[2]  # warned: the call ran, the correction goes in front
    assert third.startswith("[loopscope] You have called search_orders 3 times")
    assert third.endswith(f"\n\n{NO_ORDERS}") and "Previous result" not in third
    fourth = run.model.seen[3]  # blocked: the correction and the cached result
    assert fourth.startswith("[loopscope] You have called search_orders 4 times")
    assert fourth.endswith(f"Previous result (unchanged):\n{NO_ORDERS}")
    assert run.stop is not None
    assert run.stop.diagnostic["terminated_by"] == "repeated_tool_call"
    assert run.stop.diagnostic["tool"] == "search_orders"
    assert NO_ORDERS in run.stop.output

    tools = run.tool_spans
    assert len(tools) == len(run.model.seen) + 1  # every call the model saw, and the stopped one
    for span in tools:
        attributes = span["attributes"]
        assert span["name"] == "execute_tool search_orders"
        assert attributes[c.GEN_AI_OPERATION_NAME] == "execute_tool"
        assert attributes[c.GEN_AI_TOOL_NAME] == "search_orders"
        assert attributes[c.EPISODE_ID] == run.episode_id
        assert attributes[c.GUARD_MODE] == "enforce"
        assert attributes[loopscope_mcp.MCP_METHOD_NAME] == "tools/call"
    assert len({s["attributes"][c.SIGNATURE] for s in tools}) == 1
    assert [s["attributes"][c.STATUS] for s in tools[:4]] == ["ok", "ok", "ok", "blocked"]
    assert [s["attributes"][c.GUARD_ACTION] for s in tools[:4]] == [
        "allow", "allow", "warn", "block"]
    assert tools[-1]["attributes"][c.GUARD_ACTION] == "stop"
    assert tools[-1]["attributes"][c.GUARD_REASON] == "exact_repeat"  # its ladder reached stop

    assert {s["trace_id"] for s in tools} == {run.root["trace_id"]}
    assert {s["parent_id"] for s in tools} == {run.root["span_id"]}
    assert run.root["attributes"][c.STOP_REASON] == "repeated_tool_call"


def test_the_sdk_request_span_is_a_child_of_the_tool_span() -> None:
    run = run_over_session(HEALTHY[:1], Counter(), mode="enforce")
    (tool,) = run.tool_spans
    children = [s for s in run.spans if s["parent_id"] == tool["span_id"]]
    assert any(s["attributes"].get("mcp.method.name") == "tools/call" for s in children)


def test_observe_lets_the_loop_finish_and_records_the_would_be_kill() -> None:
    runs: Counter[str] = Counter()
    run = run_over_session(LOOP, runs, mode="observe")
    assert run.stop is None
    assert runs["search_orders"] == len(LOOP)
    assert run.model.seen == [NO_ORDERS] * len(LOOP)

    tools = run.tool_spans
    assert len(tools) == len(LOOP)
    assert {s["attributes"][c.GUARD_ACTION] for s in tools} == {"allow"}
    assert {s["attributes"][c.STATUS] for s in tools} == {"ok"}
    decisions = [s["attributes"][c.GUARD_DECISION] for s in tools]
    assert decisions[:5] == ["allow", "allow", "warn", "block", "stop"]
    assert set(decisions[5:]) <= {"stop"}
    assert run.root["attributes"][c.STOP_REASON] == "completed"


def test_warn_runs_every_call_and_puts_the_correction_in_front() -> None:
    runs: Counter[str] = Counter()
    run = run_over_session(LOOP[:4], runs, mode="warn")
    assert run.stop is None
    assert runs["search_orders"] == 4
    assert run.model.seen[:2] == [NO_ORDERS, NO_ORDERS]
    for shown in run.model.seen[2:]:
        assert shown.startswith("[loopscope] ")
        assert shown.endswith(NO_ORDERS)


@pytest.mark.parametrize("mode", ["observe", "enforce"])
def test_a_healthy_run_is_untouched(mode: str) -> None:
    runs: Counter[str] = Counter()
    run = run_over_session(HEALTHY, runs, mode=mode)
    assert run.stop is None
    assert run.model.seen == [
        NO_ORDERS,
        "Order 1234: shipped 2 days late.",
        "Refund issued for order 1234.",
    ]
    assert runs == Counter(search_orders=1, get_order=1, refund_order=1)
    tools = run.tool_spans
    assert [s["attributes"][c.GEN_AI_TOOL_NAME] for s in tools] == [n for n, _ in HEALTHY]
    for span in tools:
        assert c.FLAGS not in span["attributes"]
        assert span["attributes"][c.GUARD_ACTION] == "allow"
        assert span["attributes"][c.GUARD_DECISION] == "allow"
        assert span["attributes"][c.STATUS] == "ok"


def test_an_error_result_is_a_failed_call_and_reaches_the_model_unchanged() -> None:
    runs: Counter[str] = Counter()
    run = run_over_session(
        [("lookup_customer", {"email": "a@b.c"})], runs, mode="enforce", capture_content=True
    )
    assert run.model.seen == ["Error executing tool lookup_customer: no customer with email a@b.c"]
    (span,) = run.tool_spans
    assert span["status"] == "ERROR"
    assert span["attributes"][c.STATUS] == "error"
    assert "no customer with email a@b.c" in span["attributes"][c.GEN_AI_TOOL_CALL_RESULT]


@pytest.mark.parametrize("by", ["the request's timeout", "the caller's asyncio timeout"])
def test_a_timed_out_call_is_recorded_as_a_timeout(by: str) -> None:
    runs: Counter[str] = Counter()
    errors: list[BaseException] = []

    async def call(session: mcp.ClientSession) -> None:
        if by == "the request's timeout":
            await session.call_tool("slow_report", {"day": "monday"}, read_timeout_seconds=0.05)
        else:
            await asyncio.wait_for(session.call_tool("slow_report", {"day": "monday"}), 0.05)

    async def main() -> None:
        async with (
            InMemoryTransport(order_server(runs)) as (read, write),
            mcp.ClientSession(read, write) as session,
        ):
            await session.initialize()
            with loopscope.episode(task="report"):
                try:
                    await call(session)
                except (mcp.MCPError, TimeoutError) as exc:
                    errors.append(exc)

    with capture_spans(mode="enforce") as spans:
        asyncio.run(main())
    assert len(errors) == 1  # the caller still gets the SDK's (or asyncio's) own error
    (span,) = spans.tool_spans()
    assert span["attributes"][c.STATUS] == "timeout"
    assert span["status"] == "ERROR"


def test_the_high_level_client_is_one_guarded_call_per_call_tool() -> None:
    runs: Counter[str] = Counter()
    model = ScriptedModel(list(LOOP))
    stops: list[loopscope.LoopDetected] = []

    async def main() -> None:
        async with mcp.Client(order_server(runs)) as client:
            with loopscope.episode(task="refund the late order"):
                try:
                    await run_agent(client, model)
                except loopscope.LoopDetected as exc:
                    stops.append(exc)

    with capture_spans(mode="enforce") as spans:
        asyncio.run(main())
    assert runs["search_orders"] == 3
    assert all(shown.startswith("[loopscope] ") for shown in model.seen[2:])
    assert stops and stops[0].diagnostic["terminated_by"] == "repeated_tool_call"
    assert len(spans.tool_spans()) == len(model.seen) + 1  # not one more per session call


def test_instrument_with_no_frameworks_leaves_the_client_session_alone() -> None:
    original = mcp.ClientSession.__dict__["call_tool"]
    runs: Counter[str] = Counter()
    run = run_over_session(LOOP, runs, mode="enforce", frameworks=[])
    assert mcp.ClientSession.__dict__["call_tool"] is original
    assert run.stop is None
    assert runs["search_orders"] == len(LOOP)
    assert run.model.seen == [NO_ORDERS] * len(LOOP)
    assert run.tool_spans == []


def test_instrument_is_idempotent_and_uninstrument_restores() -> None:
    session_call = mcp.ClientSession.__dict__["call_tool"]
    client_call = mcp.Client.__dict__["call_tool"]
    loopscope.instrument_mcp()
    loopscope.instrument_mcp()
    loopscope_mcp.instrument()
    patched = mcp.ClientSession.__dict__["call_tool"]
    assert patched is not session_call
    assert patched.__loopscope_original__ is session_call  # wrapped once only

    runs: Counter[str] = Counter()
    run = run_over_session(HEALTHY[:1], runs, mode="observe", frameworks=["mcp"])
    assert len(run.tool_spans) == 1  # one span per call, not one per instrument()

    loopscope_mcp.uninstrument()
    assert mcp.ClientSession.__dict__["call_tool"] is session_call
    assert mcp.Client.__dict__["call_tool"] is client_call
    loopscope_mcp.uninstrument()  # harmless when nothing is patched
    assert mcp.ClientSession.__dict__["call_tool"] is session_call


# -- tool annotations from the server's tool list ----------------------------------------------


def annotated_server(runs: Counter[str]) -> MCPServer:
    """A real MCP server whose tools declare what they do (or, for one, nothing)."""
    server = MCPServer("annotated")

    @server.tool(annotations=mcp.types.ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    def find_orders(query: str) -> str:
        """Despite the verb-less name, it only reads."""
        runs["find_orders"] += 1
        return f"No orders match {query!r}."

    @server.tool(annotations=mcp.types.ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def tidy(order_id: str) -> str:
        """Deletes an order."""
        runs["tidy"] += 1
        return f"Order {order_id} deleted."

    @server.tool()
    def ping() -> str:
        """Declares nothing."""
        return "pong"

    return server


@pytest.fixture
def seen_calls(monkeypatch: pytest.MonkeyPatch) -> list[ToolCall]:
    """Every ``ToolCall`` the guard hands the core, in order (the core itself is untouched)."""
    calls: list[ToolCall] = []
    before_call = EpisodeMonitor.before_call

    def spy(self: EpisodeMonitor, call: ToolCall) -> Any:
        calls.append(call)
        return before_call(self, call)

    monkeypatch.setattr(EpisodeMonitor, "before_call", spy)
    return calls


def test_listed_annotations_reach_the_guard_with_every_call(seen_calls: list[ToolCall]) -> None:
    runs: Counter[str] = Counter()
    listed: list[str] = []

    async def main() -> None:
        async with (
            InMemoryTransport(annotated_server(runs)) as (read, write),
            mcp.ClientSession(read, write) as session,
        ):
            await session.initialize()
            with loopscope.episode(task="tidy the late orders"):
                await session.call_tool("find_orders", {"query": "late"})  # before any listing
                listed.extend(tool.name for tool in (await session.list_tools()).tools)
                await session.call_tool("find_orders", {"query": "late"})
                await session.call_tool("tidy", {"order_id": "7"})
                await session.call_tool("ping", {})

    with capture_spans(mode="enforce"):
        asyncio.run(main())
    assert set(listed) == {"find_orders", "tidy", "ping"}  # the agent's own listing, unchanged
    assert runs == Counter(find_orders=2, tidy=1)
    assert [call.tool for call in seen_calls] == ["find_orders", "find_orders", "tidy", "ping"]
    # A call before the agent listed the tools has none: nothing is asked of the server for us.
    assert seen_calls[0].annotations is None
    assert seen_calls[1].annotations == {"readOnlyHint": True, "idempotentHint": True}
    assert seen_calls[2].annotations == {"readOnlyHint": False, "destructiveHint": True}
    assert seen_calls[3].annotations is None
    # What the core will make of them, nothing having been declared:
    assert infer_kind("find_orders", {"query": "late"}, seen_calls[1].annotations) == (
        "read", "annotation")
    assert infer_kind("tidy", {"order_id": "7"}, seen_calls[2].annotations) == (
        "write", "annotation")
    assert idempotent_hint(seen_calls[1].annotations) is True


def test_the_high_level_client_passes_listed_annotations_too(seen_calls: list[ToolCall]) -> None:
    runs: Counter[str] = Counter()

    async def main() -> None:
        async with mcp.Client(annotated_server(runs)) as client:
            await client.list_tools()
            await client.list_tools()  # a cached listing still counts
            with loopscope.episode(task="find late orders"):
                await client.call_tool("find_orders", {"query": "late"})
                await client.call_tool("tidy", {"order_id": "7"})

    with capture_spans(mode="observe"):
        asyncio.run(main())
    assert [call.annotations for call in seen_calls] == [
        {"readOnlyHint": True, "idempotentHint": True},
        {"readOnlyHint": False, "destructiveHint": True},
    ]


def test_list_tools_is_restored_by_uninstrument() -> None:
    original = mcp.ClientSession.__dict__["list_tools"]
    loopscope_mcp.instrument()
    loopscope_mcp.instrument()
    patched = mcp.ClientSession.__dict__["list_tools"]
    assert patched is not original and patched.__loopscope_original__ is original
    loopscope_mcp.uninstrument()
    assert mcp.ClientSession.__dict__["list_tools"] is original


def test_a_tool_object_without_annotations_gives_none() -> None:
    assert loopscope_mcp.tool_annotations(object()) is None
    assert loopscope_mcp.tool_annotations(mcp.types.Tool(name="x", input_schema={})) is None
    assert loopscope_mcp.listed_annotations(object(), "x") is None
    assert loopscope_mcp.listed_annotations(1, "x") is None  # not weakly referenceable
