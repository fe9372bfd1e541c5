"""LangChain / LangGraph: a real graph agent, driven by a scripted model, looping on a tool.

The agent is LangGraph's ReAct shape built by hand (model node, ``ToolNode``,
``tools_condition``), so no network and no deprecated helper are involved; the model is
LangChain's ``GenericFakeChatModel`` reading a script of ``AIMessage``s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.pregel import Pregel
from pydantic import Field

import loopscope
from loopscope import conventions as c
from loopscope.integrations import langchain as lc
from loopscope.testing import capture_spans

USAGE = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}


class ScriptedModel(GenericFakeChatModel):
    """Plays its script one message per turn and keeps what it was shown each turn."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def __init__(self, script: Sequence[AIMessage]) -> None:
        super().__init__(messages=iter(list(script)))

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def call(name: str, n: int, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{name}_{n}", "type": "tool_call"}


def turn(*calls: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=list(calls), usage_metadata=USAGE)


def answer(text: str) -> AIMessage:
    return AIMessage(text, usage_metadata=USAGE)


def looping_script(loops: int) -> list[AIMessage]:
    """The model asks for the same search ``loops`` times, then gives up and answers."""
    return [turn(call("search_orders", i, query="late")) for i in range(loops)] + [
        answer("No late orders found.")
    ]


class Tools:
    """The agent's tools, counting their real executions."""

    def __init__(self) -> None:
        self.runs: list[str] = []

        @tool
        def search_orders(query: str) -> str:
            """Search orders by free text."""
            self.runs.append(query)
            return f"0 orders match {query!r}"

        @tool
        def get_order(order_id: str) -> str:
            """Fetch one order."""
            self.runs.append(order_id)
            return f"order {order_id}: shipped"

        self.search_orders = search_orders
        self.get_order = get_order
        self.all: list[BaseTool] = [search_orders, get_order]


def build_agent(
    model: ScriptedModel, tools: list[BaseTool], *, name: str = "support_agent", **tool_node: Any
) -> Any:
    bound = model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools, **tool_node))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(name=name)


def ask() -> dict[str, Any]:
    return {"messages": [HumanMessage("Which orders are late?")]}


def roots(spans: Any) -> list[dict[str, Any]]:
    return [s for s in spans.as_dicts() if s["name"].startswith("invoke_agent")]


def tool_messages(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


@pytest.fixture(autouse=True)
def _restore_instrumentation() -> Iterator[None]:
    """Tests that switch the integration off must not leave it off for the next one."""
    was = lc.instrumented()
    yield
    if was:
        lc.instrument()
    else:
        lc.uninstrument()


# -- enforce --------------------------------------------------------------------------------


def test_enforce_warns_the_third_search_blocks_the_fourth_then_stops_the_graph_run() -> None:
    tools = Tools()
    model = ScriptedModel(looping_script(10))
    agent = build_agent(model, tools.all)
    with (
        capture_spans(mode="enforce", capture_content=True) as spans,
        pytest.raises(loopscope.LoopDetected) as info,
    ):
        agent.invoke(ask())
    stop = info.value

    assert tools.runs == ["late"] * 3  # the 3rd ran with a warning; the 4th was blocked
    third = tool_messages(model.seen[3])[2]  # what the model was shown for the 3rd call
    assert third.tool_call_id == "call_search_orders_2"
    assert third.content.startswith("[loopscope] ")
    assert third.content.endswith("0 orders match 'late'")
    fourth = tool_messages(model.seen[4])[3]
    assert fourth.tool_call_id == "call_search_orders_3"
    assert fourth.content.startswith("[loopscope] ")
    assert fourth.content.endswith("0 orders match 'late'")  # the cached result, not silence
    assert stop.diagnostic["terminated_by"] == "repeated_tool_call"
    assert stop.stop_reason == "repeated_tool_call"

    (root,) = roots(spans)
    assert root["name"] == "invoke_agent support_agent"
    assert root["attributes"][c.GEN_AI_AGENT_NAME] == "support_agent"
    assert root["attributes"][c.STOP_REASON] == "repeated_tool_call"
    assert root["attributes"][c.OUTCOME] == "failure"
    assert root["attributes"][c.MODEL_TURNS] == len(model.seen)
    assert root["attributes"][c.GEN_AI_USAGE_INPUT_TOKENS] == 100 * len(model.seen)
    assert "repeated_tool_call" in root["attributes"][c.STOP_DIAGNOSTIC]

    calls = spans.tool_spans()
    assert [s["attributes"][c.GEN_AI_TOOL_CALL_ID] for s in calls] == [
        f"call_search_orders_{i}" for i in range(len(calls))
    ]
    assert {s["attributes"][c.SIGNATURE] for s in calls} == {calls[0]["attributes"][c.SIGNATURE]}
    for span in calls:
        assert span["name"] == "execute_tool search_orders"
        assert span["attributes"][c.GEN_AI_TOOL_NAME] == "search_orders"
        assert span["attributes"][c.GEN_AI_OPERATION_NAME] == "execute_tool"
        assert span["attributes"][c.EPISODE_ID] == root["attributes"][c.EPISODE_ID]
        assert span["attributes"][c.GUARD_MODE] == "enforce"
        assert span["trace_id"] == root["trace_id"]
        assert span["parent_id"] == root["span_id"]
        assert "state" not in span["attributes"][c.GEN_AI_TOOL_CALL_ARGUMENTS]
    assert [s["attributes"][c.GUARD_ACTION] for s in calls[:4]] == [
        "allow", "allow", "warn", "block"]
    assert [s["attributes"][c.STATUS] for s in calls[2:4]] == ["ok", "blocked"]
    assert calls[-1]["attributes"][c.GUARD_ACTION] == "stop"
    assert calls[-1]["attributes"][c.GEN_AI_TOOL_CALL_RESULT] == stop.output


def test_async_stream_with_an_async_tool_stops_the_same_way() -> None:
    runs: list[str] = []

    @tool
    async def search_orders(query: str) -> str:
        """Search orders by free text."""
        runs.append(query)
        return f"0 orders match {query!r}"

    agent = build_agent(ScriptedModel(looping_script(10)), [search_orders])

    async def run() -> list[Any]:
        return [chunk async for chunk in agent.astream(ask())]

    with capture_spans(mode="enforce") as spans, pytest.raises(loopscope.LoopDetected) as info:
        asyncio.run(run())
    assert runs == ["late"] * 3
    assert info.value.diagnostic["terminated_by"] == "repeated_tool_call"
    (root,) = roots(spans)
    assert root["attributes"][c.STOP_REASON] == "repeated_tool_call"
    assert all(s["trace_id"] == root["trace_id"] for s in spans.tool_spans())


def test_a_tool_node_that_swallows_errors_still_cannot_keep_the_run_going() -> None:
    """handle_tool_errors=True would turn LoopDetected into a message and loop on."""
    tools = Tools()
    agent = build_agent(ScriptedModel(looping_script(10)), tools.all, handle_tool_errors=True)
    with capture_spans(mode="enforce") as spans, pytest.raises(loopscope.LoopDetected) as info:
        agent.invoke(ask())
    assert info.value.diagnostic["terminated_by"] == "repeated_tool_call"
    assert spans.tool_spans()[-1]["attributes"][c.GUARD_ACTION] == "stop"
    assert len(spans.tool_spans()) == 5  # no tool call after the stop


# -- observe and warn -----------------------------------------------------------------------


def test_observe_lets_the_run_finish_and_records_the_would_be_kill() -> None:
    tools = Tools()
    model = ScriptedModel(looping_script(6))
    agent = build_agent(model, tools.all)
    with capture_spans(mode="observe") as spans:
        result = agent.invoke(ask())

    assert result["messages"][-1].content == "No late orders found."
    assert tools.runs == ["late"] * 6
    assert {m.content for m in tool_messages(result["messages"])} == {"0 orders match 'late'"}
    calls = spans.tool_spans()
    assert len(calls) == 6
    assert {s["attributes"][c.GUARD_ACTION] for s in calls} == {"allow"}
    decisions = [s["attributes"][c.GUARD_DECISION] for s in calls]
    assert decisions[:5] == ["allow", "allow", "warn", "block", "stop"]
    (root,) = roots(spans)
    assert root["attributes"][c.STOP_REASON] == "completed"
    assert "repeated_tool_call" in root["attributes"][c.STOP_DIAGNOSTIC]


def test_warn_runs_every_call_and_puts_the_correction_in_the_tool_message() -> None:
    tools = Tools()
    agent = build_agent(ScriptedModel(looping_script(4)), tools.all)
    with capture_spans(mode="warn"):
        result = agent.invoke(ask())
    assert tools.runs == ["late"] * 4
    contents = [m.content for m in tool_messages(result["messages"])]
    assert contents[0] == "0 orders match 'late'"
    assert contents[2].startswith("[loopscope] ")
    assert contents[2].endswith("0 orders match 'late'")


# -- healthy runs ---------------------------------------------------------------------------


def test_a_healthy_run_is_untouched() -> None:
    tools = Tools()
    script = [
        turn(call("search_orders", 0, query="late")),
        turn(call("get_order", 1, order_id="A1"), call("get_order", 2, order_id="B2")),
        turn(call("search_orders", 3, query="refund 1234")),
        answer("A1 and B2 have shipped."),
    ]
    agent = build_agent(ScriptedModel(script), tools.all)
    with capture_spans(mode="enforce") as spans:
        result = agent.invoke(ask(), {"configurable": {"thread_id": "t-42"}})

    assert result["messages"][-1].content == "A1 and B2 have shipped."
    assert [m.content for m in tool_messages(result["messages"])] == [
        "0 orders match 'late'",
        "order A1: shipped",
        "order B2: shipped",
        "0 orders match 'refund 1234'",
    ]
    calls = spans.tool_spans()
    assert sorted(s["attributes"][c.GEN_AI_TOOL_CALL_ID] for s in calls) == [
        "call_get_order_1",
        "call_get_order_2",
        "call_search_orders_0",
        "call_search_orders_3",
    ]
    for span in calls:
        assert c.FLAGS not in span["attributes"]
        assert span["attributes"][c.GUARD_DECISION] == "allow"
        assert span["attributes"][c.STATUS] == "ok"
    (root,) = roots(spans)
    assert root["attributes"][c.STOP_REASON] == "completed"
    assert root["attributes"][c.GEN_AI_CONVERSATION_ID] == "t-42"
    assert root["attributes"][c.FLAG_COUNT] == 0


def test_a_plain_tool_call_outside_any_graph_is_traced() -> None:
    tools = Tools()
    with capture_spans() as spans:
        text = tools.search_orders.invoke({"query": "late"})
        message = tools.get_order.invoke(call("get_order", 7, order_id="A1"))
    assert text == "0 orders match 'late'"
    assert isinstance(message, ToolMessage) and message.content == "order A1: shipped"
    first, second = spans.tool_spans()
    assert first["attributes"][c.GEN_AI_TOOL_NAME] == "search_orders"
    assert second["attributes"][c.GEN_AI_TOOL_CALL_ID] == "call_get_order_7"
    assert roots(spans) == []


def test_a_tool_error_is_recorded_as_a_failed_call() -> None:
    @tool
    def refund(order_id: str) -> str:
        """Refund an order."""
        raise ToolException(f"order {order_id} is not refundable")

    refund.handle_tool_error = True  # LangChain hands the error to the model as a message

    with capture_spans() as spans:
        message = refund.invoke(call("refund", 1, order_id="A1"))
        with pytest.raises(ValueError):
            Tools().search_orders.invoke({"query": 7j})  # fails validation: raised
    assert message.status == "error" and message.content == "order A1 is not refundable"
    handled, raised = spans.tool_spans()
    assert handled["attributes"][c.STATUS] == "error"
    assert handled["status"] == "ERROR"
    assert raised["attributes"][c.STATUS] == "error"


def test_a_blocked_plain_call_returns_the_correction_text() -> None:
    tools = Tools()
    with capture_spans(mode="enforce"), loopscope.episode():
        results = [tools.search_orders.invoke({"query": "late"}) for _ in range(4)]
    assert tools.runs == ["late"] * 3  # the 3rd is warned and runs, the 4th is blocked
    for nudged in results[2:]:
        assert nudged.startswith("[loopscope] ") and nudged.endswith("0 orders match 'late'")


def test_a_subgraph_joins_the_outer_run_and_a_user_episode_is_kept() -> None:
    tools = Tools()
    inner = build_agent(ScriptedModel(looping_script(1)), tools.all, name="inner")
    outer = StateGraph(MessagesState)
    outer.add_node("inner", inner)
    outer.add_edge(START, "inner")
    with capture_spans() as spans:
        outer.compile(name="outer").invoke(ask())
        assert [r["name"] for r in roots(spans)] == ["invoke_agent outer"]
        spans.clear()
        with loopscope.episode(agent_name="mine"):
            build_agent(ScriptedModel(looping_script(1)), tools.all).invoke(ask())
        assert [r["name"] for r in roots(spans)] == ["invoke_agent mine"]
        assert len(spans.tool_spans()) == 1


def test_a_loopscope_failure_leaves_the_agent_running(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("loopscope bug")

    monkeypatch.delenv("LOOPSCOPE_RAISE_INTERNAL_ERRORS")
    monkeypatch.setattr(lc, "ToolCallScope", broken)
    monkeypatch.setattr(lc, "episode", broken)
    tools = Tools()
    with capture_spans(mode="enforce") as spans:
        result = build_agent(ScriptedModel(looping_script(4)), tools.all).invoke(ask())
    assert result["messages"][-1].content == "No late orders found."
    assert tools.runs == ["late"] * 4
    assert spans.tool_spans() == []


# -- switching it on and off ----------------------------------------------------------------


def _patched() -> bool:
    return hasattr(BaseTool.run, lc._ORIGINAL) or hasattr(Pregel.invoke, lc._ORIGINAL)


def test_frameworks_empty_leaves_langchain_untouched() -> None:
    lc.uninstrument()
    tools = Tools()
    with capture_spans(frameworks=[]) as spans:
        assert not _patched()
        agent = build_agent(ScriptedModel(looping_script(1)), tools.all)
        agent.invoke(ask())
    assert spans.as_dicts() == []


def test_instrument_twice_is_harmless_and_uninstrument_restores() -> None:
    lc.uninstrument()
    original_run, original_invoke = BaseTool.run, Pregel.invoke
    loopscope.instrument_langchain()
    wrapped = BaseTool.run
    loopscope.instrument_langchain()
    assert BaseTool.run is wrapped is not original_run
    tools = Tools()
    with capture_spans(frameworks=["langchain"]) as spans:
        tools.search_orders.invoke({"query": "late"})
    assert len(spans.tool_spans()) == 1  # wrapped once, not twice
    lc.uninstrument()
    assert BaseTool.run is original_run
    assert Pregel.invoke is original_invoke
    assert not _patched()
