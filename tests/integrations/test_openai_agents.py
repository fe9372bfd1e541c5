"""The OpenAI Agents SDK integration, on real agents driven by a scripted fake model.

No network: the agent's ``model=`` is a ``Model`` that answers from a script, and the SDK's
own tracing is off. The tools are real ``@function_tool`` functions that count their runs.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

agents = pytest.importorskip("agents")

from agents import Agent, ModelResponse, Runner, Usage, function_tool  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from openai.types.responses import (  # noqa: E402
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import (  # noqa: E402
    InputTokensDetails,
    OutputTokensDetails,
)

import loopscope  # noqa: E402
from loopscope import conventions as c  # noqa: E402
from loopscope.integrations import openai_agents  # noqa: E402
from loopscope.testing import capture_spans  # noqa: E402

ORDERS = "order 1234: late, shipped 2024-05-01"
Step = list[tuple[str, dict[str, Any]]] | str  # tool calls of one turn, or the final answer


@pytest.fixture(autouse=True)
def _sdk_quiet_and_restored() -> Iterator[None]:
    """No SDK tracing (it would try the network); every test leaves the SDK unpatched."""
    agents.set_tracing_disabled(True)
    yield
    openai_agents.uninstrument()


class ScriptedModel(Model):
    """A fake model: turn ``n`` answers with ``script(n)``; remembers every input it got."""

    model = "scripted-fake"

    def __init__(self, script: Callable[[int], Step]) -> None:
        self.script = script
        self.inputs: list[Any] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        turn = len(self.inputs)
        self.inputs.append(copy.deepcopy(input))
        step = self.script(turn)
        output: list[Any]
        if isinstance(step, str):
            output = [
                ResponseOutputMessage(
                    id=f"msg_{turn}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=step, annotations=[])],
                )
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    id=f"fc_{turn}_{i}",
                    call_id=f"call_{turn}_{i}",
                    type="function_call",
                    name=name,
                    arguments=json.dumps(args),
                    status="completed",
                )
                for i, (name, args) in enumerate(step)
            ]
        usage = Usage(requests=1, input_tokens=100, output_tokens=10, total_tokens=110)
        return ModelResponse(output=output, usage=usage, response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """The same script as one ``response.completed`` event."""
        response = await self.get_response(*args, **kwargs)
        usage = ResponseUsage(
            input_tokens=100,
            output_tokens=10,
            total_tokens=110,
            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        )
        completed = Response(
            id=f"resp_{len(self.inputs)}",
            created_at=0,
            model=self.model,
            object="response",
            output=response.output,
            parallel_tool_calls=True,
            tool_choice="auto",
            tools=[],
            usage=usage,
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=completed, sequence_number=0
        )

    def tool_outputs(self, turn: int) -> list[str]:
        """The function_call_output texts the model was given at ``turn``."""
        items = self.inputs[turn]
        return [item["output"] for item in items if item.get("type") == "function_call_output"]


class Tools:
    """Real function tools that record each time they actually run."""

    def __init__(self) -> None:
        self.runs: list[str] = []

        @function_tool
        def search_orders(query: str) -> str:
            """Search the customer's orders."""
            self.runs.append("search_orders")
            return ORDERS

        @function_tool
        def get_order(order_id: str) -> str:
            """Fetch one order."""
            self.runs.append("get_order")
            return f"order {order_id}: 1 mug, status late"

        @function_tool
        def get_shipping(order_id: str) -> str:
            """Fetch an order's shipping status."""
            self.runs.append("get_shipping")
            return f"order {order_id}: in transit, carrier delayed"

        self.all = [search_orders, get_order, get_shipping]


def looping(max_loops: int | None = None) -> Callable[[int], Step]:
    """Calls ``search_orders(query="late")`` every turn (forever, or ``max_loops`` times)."""

    def script(turn: int) -> Step:
        if max_loops is not None and turn >= max_loops:
            return "Your order 1234 is late."
        return [("search_orders", {"query": "late"})]

    return script


def healthy(turn: int) -> Step:
    steps: list[Step] = [
        [("search_orders", {"query": "late"})],
        [("get_order", {"order_id": "1234"})],
        [("get_shipping", {"order_id": "1234"})],
        "Order 1234 is late: the carrier is delayed.",
    ]
    return steps[turn]


def make_agent(script: Callable[[int], Step]) -> tuple[Any, ScriptedModel, Tools]:
    tools = Tools()
    model = ScriptedModel(script)
    agent = Agent(name="support", instructions="Help.", model=model, tools=tools.all)
    return agent, model, tools


def _root(spans: Any) -> dict[str, Any]:
    (root,) = [s for s in spans.as_dicts() if s["name"].startswith("invoke_agent")]
    return root


# -- enforce ------------------------------------------------------------------------------------


def test_enforce_warns_the_third_identical_call_blocks_the_fourth_and_stops_the_loop() -> None:
    agent, model, tools = make_agent(looping())
    with (
        capture_spans(mode="enforce", frameworks=["openai_agents"]) as spans,
        pytest.raises(loopscope.LoopDetected) as stopped,
    ):
        Runner.run_sync(agent, "Find my late orders", max_turns=50)

    assert stopped.value.diagnostic["terminated_by"] == "repeated_tool_call"
    assert stopped.value.diagnostic["tool"] == "search_orders"
    assert stopped.value.output  # what the stopping call handed back
    assert tools.runs == ["search_orders"] * 3  # the warned 3rd ran; blocked calls never ran

    # The 3rd call was warned and the 4th blocked; each time the model got the correction in
    # front of the result (the cached one when blocked) as the tool's output on the next turn.
    assert model.tool_outputs(2)[-1] == ORDERS
    warned = model.tool_outputs(3)[-1]
    assert warned.startswith("[loopscope] ") and warned.endswith(ORDERS)
    blocked = model.tool_outputs(4)[-1]
    assert blocked.startswith("[loopscope] ") and blocked.endswith(ORDERS)

    tool_spans = spans.tool_spans()
    root = _root(spans)
    assert [s["attributes"][c.GUARD_ACTION] for s in tool_spans] == [
        "allow",
        "allow",
        "warn",
        "block",
        "stop",
    ]
    assert [s["attributes"][c.STATUS] for s in tool_spans[2:4]] == ["ok", "blocked"]
    for turn, span in enumerate(tool_spans):
        attrs = span["attributes"]
        assert span["name"] == "execute_tool search_orders"
        assert attrs[c.GEN_AI_TOOL_NAME] == "search_orders"
        assert attrs[c.GEN_AI_TOOL_CALL_ID] == f"call_{turn}_0"  # the SDK's call id
        assert attrs[c.SIGNATURE] == tool_spans[0]["attributes"][c.SIGNATURE]
        assert attrs[c.GUARD_MODE] == "enforce"
        assert attrs[c.EPISODE_ID] == root["attributes"][c.EPISODE_ID]
        assert span["parent_id"] == root["span_id"]
    assert root["name"] == "invoke_agent support"
    assert root["attributes"][c.STOP_REASON] == "repeated_tool_call"
    assert json.loads(root["attributes"][c.STOP_DIAGNOSTIC])["terminated_by"] == (
        "repeated_tool_call"
    )
    # The run stopped before asking the model again: one model turn per tool call.
    assert len(model.inputs) == len(tool_spans)


def test_the_stopping_calls_output_is_kept_in_the_session() -> None:
    """The function_call keeps its function_call_output before the run ends."""
    agent, _, _ = make_agent(looping())
    session = agents.SQLiteSession("loopscope-stop")
    with (
        capture_spans(mode="enforce", frameworks=["openai_agents"]),
        pytest.raises(loopscope.LoopDetected) as stopped,
    ):
        asyncio.run(Runner.run(agent, "Find my late orders", session=session))
    items = asyncio.run(session.get_items())
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert calls == [o["call_id"] for o in outputs]
    assert outputs[-1]["output"] == stopped.value.output


def test_a_streamed_run_is_an_episode_and_its_stop_reaches_stream_events() -> None:
    agent, _, tools = make_agent(looping())

    async def consume() -> None:
        result = Runner.run_streamed(agent, "Find my late orders")
        async for _ in result.stream_events():
            pass

    with (
        capture_spans(mode="enforce", frameworks=["openai_agents"]) as spans,
        pytest.raises(loopscope.LoopDetected) as stopped,
    ):
        asyncio.run(consume())
    assert stopped.value.diagnostic["terminated_by"] == "repeated_tool_call"
    assert tools.runs == ["search_orders"] * 3
    root = _root(spans)
    assert root["attributes"][c.STOP_REASON] == "repeated_tool_call"
    assert {s["parent_id"] for s in spans.tool_spans()} == {root["span_id"]}


# -- observe ------------------------------------------------------------------------------------


def test_observe_lets_the_run_finish_and_records_the_would_be_kill() -> None:
    agent, model, tools = make_agent(looping(max_loops=8))
    with capture_spans(mode="observe", frameworks=["openai_agents"]) as spans:
        result = Runner.run_sync(agent, "Find my late orders")

    assert result.final_output == "Your order 1234 is late."
    assert tools.runs == ["search_orders"] * 8
    assert all(out == ORDERS for turn in range(1, 9) for out in model.tool_outputs(turn))
    tool_spans = spans.tool_spans()
    assert len(tool_spans) == 8
    assert all(s["attributes"][c.GUARD_ACTION] == "allow" for s in tool_spans)
    decisions = [s["attributes"][c.GUARD_DECISION] for s in tool_spans]
    assert decisions[:5] == ["allow", "allow", "warn", "block", "stop"]
    root = _root(spans)
    assert root["attributes"][c.STOP_REASON] == "completed"
    assert c.STOP_DIAGNOSTIC in root["attributes"]  # the would-be stop, for the dashboard


# -- healthy ------------------------------------------------------------------------------------


def test_a_healthy_run_is_untouched_and_its_usage_recorded() -> None:
    agent, model, tools = make_agent(healthy)
    with capture_spans(mode="enforce", frameworks=["openai_agents"]) as spans:
        result = Runner.run_sync(agent, "Why is my order late?")

    assert result.final_output == "Order 1234 is late: the carrier is delayed."
    assert tools.runs == ["search_orders", "get_order", "get_shipping"]
    assert model.tool_outputs(3) == [
        ORDERS,
        "order 1234: 1 mug, status late",
        "order 1234: in transit, carrier delayed",
    ]
    tool_spans = spans.tool_spans()
    assert [s["attributes"][c.GEN_AI_TOOL_NAME] for s in tool_spans] == [
        "search_orders",
        "get_order",
        "get_shipping",
    ]
    for span in tool_spans:
        attrs = span["attributes"]
        assert attrs[c.GUARD_ACTION] == attrs[c.GUARD_DECISION] == "allow"
        assert c.FLAGS not in attrs
        assert attrs[c.STATUS] == "ok"
    root = _root(spans)["attributes"]
    assert root[c.STOP_REASON] == "completed"
    assert root[c.MODEL_TURNS] == 4
    assert root[c.GEN_AI_USAGE_INPUT_TOKENS] == 400
    assert root[c.GEN_AI_USAGE_OUTPUT_TOKENS] == 40
    assert root[c.GEN_AI_REQUEST_MODEL] == "scripted-fake"
    assert root[c.GEN_AI_AGENT_NAME] == "support"


def test_parallel_calls_pair_by_the_sdks_call_ids() -> None:
    def script(turn: int) -> Step:
        if turn == 0:
            return [("get_order", {"order_id": "1"}), ("get_shipping", {"order_id": "1"})]
        return "done"

    agent, _, tools = make_agent(script)
    with capture_spans(mode="enforce", frameworks=["openai_agents"]) as spans:
        Runner.run_sync(agent, "check order 1")
    assert sorted(tools.runs) == ["get_order", "get_shipping"]
    pairs = {
        s["attributes"][c.GEN_AI_TOOL_CALL_ID]: s["attributes"][c.GEN_AI_TOOL_NAME]
        for s in spans.tool_spans()
    }
    assert pairs == {"call_0_0": "get_order", "call_0_1": "get_shipping"}


def test_a_failing_tool_is_recorded_as_an_error_and_the_model_sees_the_sdks_message() -> None:
    @function_tool
    def flaky(query: str) -> str:
        """Always fails."""
        raise ValueError("backend down")

    model = ScriptedModel(lambda turn: [("flaky", {"query": "x"})] if turn == 0 else "sorry")
    agent = Agent(name="support", model=model, tools=[flaky])
    with capture_spans(mode="enforce", frameworks=["openai_agents"]) as spans:
        Runner.run_sync(agent, "try")
    (span,) = spans.tool_spans()
    assert span["attributes"][c.STATUS] == "error"
    assert span["status"] == "ERROR"
    assert model.tool_outputs(1)[0].startswith("An error occurred while running the tool")


def test_a_run_inside_an_episode_joins_it() -> None:
    agent, _, _ = make_agent(healthy)
    with (
        capture_spans(mode="enforce", frameworks=["openai_agents"]) as spans,
        loopscope.episode(task="outer", agent_name="outer") as ep,
    ):
        Runner.run_sync(agent, "Why is my order late?")
    roots = [s for s in spans.as_dicts() if s["name"].startswith("invoke_agent")]
    assert [r["name"] for r in roots] == ["invoke_agent outer"]
    assert {s["attributes"][c.EPISODE_ID] for s in spans.tool_spans()} == {ep.id}
    assert ep.model_turns == 4


# -- switching it on and off --------------------------------------------------------------------


def _sdk_functions() -> tuple[Any, Any, Any]:
    from agents.run import AgentRunner
    from agents.run_internal import tool_execution

    return (
        tool_execution._invoke_function_tool_with_metadata,
        AgentRunner.run,
        AgentRunner.run_streamed,
    )


def test_instrument_twice_is_harmless_and_uninstrument_restores() -> None:
    openai_agents.uninstrument()
    originals = _sdk_functions()
    loopscope.instrument_openai_agents()
    patched = _sdk_functions()
    loopscope.instrument_openai_agents()
    assert _sdk_functions() == patched
    assert all(p is not o for p, o in zip(patched, originals, strict=True))

    agent, _, _ = make_agent(healthy)
    with capture_spans(mode="enforce", frameworks=["openai_agents"]) as spans:
        Runner.run_sync(agent, "Why is my order late?")
    assert len(spans.tool_spans()) == 3  # not wrapped twice

    openai_agents.uninstrument()
    openai_agents.uninstrument()
    assert _sdk_functions() == originals


def test_frameworks_empty_leaves_the_sdk_untouched() -> None:
    openai_agents.uninstrument()
    originals = _sdk_functions()
    agent, _, tools = make_agent(looping(max_loops=5))
    with capture_spans(mode="enforce", frameworks=[]) as spans:
        assert _sdk_functions() == originals
        result = Runner.run_sync(agent, "Find my late orders")
    assert result.final_output == "Your order 1234 is late."
    assert tools.runs == ["search_orders"] * 5
    assert spans.tool_spans() == []


def test_a_missing_sdk_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "loopscope.integrations.openai_agents")
    monkeypatch.setitem(sys.modules, "agents", None)  # makes `import agents` fail
    with pytest.raises(RuntimeError, match=r"pip install 'loopscope\[openai-agents\]'"):
        importlib.import_module("loopscope.integrations.openai_agents")
