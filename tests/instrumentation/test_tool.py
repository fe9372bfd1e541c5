"""@loopscope.tool and loopscope.episode: what the execute_tool and invoke_agent spans carry."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

import loopscope
from loopscope import _config
from loopscope import conventions as c
from loopscope.testing import capture_spans

EARLY_CALLS: list[str] = []


@loopscope.tool(kind="read")
def early_lookup(key: str) -> str:
    """Decorated at import time, long before any instrument() call."""
    EARLY_CALLS.append(key)
    return f"value of {key}"


def _root(spans: Any) -> dict[str, Any]:
    roots = [s for s in spans.as_dicts() if s["name"].startswith(c.OP_INVOKE_AGENT)]
    assert len(roots) == 1, roots
    return roots[0]


def test_sync_decorator_keeps_name_doc_and_signature() -> None:
    """Frameworks that read the tool's metadata would see the wrapper instead."""

    def search_orders(query: str, limit: int = 20, *, status: str | None = None) -> list[str]:
        """Search orders by free text."""
        return []

    wrapped = loopscope.tool(kind="read")(search_orders)
    assert wrapped.__name__ == "search_orders"
    assert wrapped.__doc__ == "Search orders by free text."
    assert inspect.signature(wrapped) == inspect.signature(search_orders)
    assert loopscope.tool(search_orders).__name__ == "search_orders"  # bare form


def test_async_decorator_keeps_metadata_and_stays_a_coroutine_function() -> None:
    """An async tool would be awaited as a plain value, or frameworks would misread it."""

    async def fetch_page(url: str, timeout: float = 5.0) -> str:
        """Fetch one page."""
        return url

    wrapped = loopscope.tool(fetch_page)
    assert wrapped.__name__ == "fetch_page"
    assert wrapped.__doc__ == "Fetch one page."
    assert inspect.signature(wrapped) == inspect.signature(fetch_page)
    assert inspect.iscoroutinefunction(wrapped)


def test_bad_kind_is_rejected_at_decoration() -> None:
    """A typo in kind= would silently disable write or poll handling."""
    with pytest.raises(ValueError, match="'wirte'"):
        loopscope.tool(kind="wirte")


def test_decorated_before_instrument_still_produces_spans() -> None:
    """Tools decorated at import time (before instrument()) would go untraced."""
    EARLY_CALLS.clear()
    with capture_spans() as spans, loopscope.episode():
        assert early_lookup("a") == "value of a"
    assert EARLY_CALLS == ["a"]
    (span,) = spans.tool_spans()
    assert span["name"] == "execute_tool early_lookup"
    assert span["attributes"][c.GEN_AI_TOOL_NAME] == "early_lookup"


def test_each_call_yields_one_execute_tool_span_with_the_attributes() -> None:
    """The collector relies on these attributes; a missing one breaks detection downstream."""

    @loopscope.tool(kind="read", name="search")
    def search_impl(q: str) -> str:
        return f"results for {q}"

    with capture_spans() as spans, loopscope.episode():
        search_impl("a")
        search_impl("b")
    tools = spans.tool_spans()
    assert [s["name"] for s in tools] == ["execute_tool search"] * 2
    for step, span in enumerate(tools):
        attrs = span["attributes"]
        assert attrs[c.GEN_AI_OPERATION_NAME] == "execute_tool"
        assert attrs[c.GEN_AI_TOOL_NAME] == "search"
        assert isinstance(attrs[c.GEN_AI_TOOL_CALL_ID], str) and attrs[c.GEN_AI_TOOL_CALL_ID]
        assert attrs[c.STEP] == step
        assert attrs[c.OUTPUT_SIZE] == len(f"results for {'ab'[step]}")
        assert attrs[c.PROGRESS] == "new_info"
        assert attrs[c.STREAK] == 0
        assert attrs[c.GUARD_ACTION] == "allow"
        assert attrs[c.GUARD_DECISION] == "allow"
        assert attrs[c.STATUS] == "ok"
        assert attrs[c.TOOL_KIND] == "read"
        for key in (c.SIGNATURE, c.OUTPUT_HASH):
            assert isinstance(attrs[key], str) and attrs[key]
    ids = [s["attributes"][c.GEN_AI_TOOL_CALL_ID] for s in tools]
    assert len(set(ids)) == 2
    assert tools[0]["attributes"][c.SIGNATURE] != tools[1]["attributes"][c.SIGNATURE]
    assert tools[0]["attributes"][c.OUTPUT_HASH] != tools[1]["attributes"][c.OUTPUT_HASH]


def test_each_tool_span_carries_its_call_ordinal_which_messages_do_not_advance() -> None:
    """``loopscope.call.ordinal`` is the agent's number of the call (1 for the first), as the
    guard counts calls: a message between calls moves ``loopscope.step`` on, not the ordinal,
    and a call blocked by the guard still has its number. The dashboard shows the run's calls
    by it, so a span lost on the way leaves a gap rather than renumbering the rest."""

    @loopscope.tool(kind="read", name="search")
    def search_impl(q: str) -> str:
        return "nothing found"

    with capture_spans(mode="enforce") as spans, loopscope.episode() as ep:
        search_impl("a")
        ep.record_message("assistant", "Let me look again.")
        for _ in range(4):
            search_impl("b")
    tools = spans.tool_spans()
    assert [s["attributes"][c.CALL_ORDINAL] for s in tools] == [1, 2, 3, 4, 5]
    assert [s["attributes"][c.STEP] for s in tools] == [0, 2, 3, 4, 5]
    assert "blocked" in {s["attributes"][c.STATUS] for s in tools}
    [message] = [s for s in spans.as_dicts() if s["name"].startswith(c.OP_MESSAGE)]
    assert c.CALL_ORDINAL not in message["attributes"]


def test_tool_spans_name_the_agent_so_a_run_in_flight_is_named() -> None:
    """The root span, which names the agent too, is exported only when the run ends."""

    @loopscope.tool(kind="read", name="search")
    def search_impl(q: str) -> str:
        return f"results for {q}"

    with capture_spans() as spans:
        with loopscope.episode(agent_name="triage-bot"):
            search_impl("a")
        with loopscope.episode():
            search_impl("b")
    named, unnamed = spans.tool_spans()
    assert named["attributes"][c.GEN_AI_AGENT_NAME] == "triage-bot"
    assert c.GEN_AI_AGENT_NAME not in unnamed["attributes"]


def test_signature_ignores_key_order_and_fills_defaults() -> None:
    """Equal calls spelled differently would dodge the repeat detectors."""

    @loopscope.tool
    def query(filters: dict[str, Any], limit: int = 20) -> str:
        return "rows"

    @loopscope.tool
    def other(filters: dict[str, Any], limit: int = 20) -> str:
        return "rows"

    with capture_spans() as spans, loopscope.episode():
        query({"path": "a", "limit": 20})
        query(filters={"limit": 20, "path": "a"}, limit=20)
        query({"path": "a", "limit": 20}, 21)
        other({"path": "a", "limit": 20})
    sigs = [s["attributes"][c.SIGNATURE] for s in spans.tool_spans()]
    assert sigs[0] == sigs[1]
    assert len({sigs[0], sigs[2], sigs[3]}) == 3


def test_content_is_not_recorded_by_default_but_hashes_are() -> None:
    """Tool arguments and outputs (possibly personal data) would leave the process."""

    @loopscope.tool
    def secret(account: str) -> str:
        return f"balance of {account}: 100"

    with capture_spans(capture_content=False) as spans, loopscope.episode(task="private"):
        secret("ACC-42")
    (span,) = spans.tool_spans()
    attrs = span["attributes"]
    assert c.GEN_AI_TOOL_CALL_ARGUMENTS not in attrs
    assert c.GEN_AI_TOOL_CALL_RESULT not in attrs
    assert attrs[c.CONTENT_CAPTURED] is False
    assert attrs[c.OUTPUT_HASH] and attrs[c.SIGNATURE]
    assert "ACC-42" not in repr(spans.as_dicts())
    assert c.TASK not in _root(spans)["attributes"]


def test_content_is_recorded_and_truncated_when_enabled() -> None:
    """With capture on, arguments/results would be missing or unbounded in size."""
    limit = _config.MAX_CONTENT_CHARS

    @loopscope.tool
    def echo(text: str) -> str:
        return text + "!"

    long = "x" * (limit + 500)
    with capture_spans(capture_content=True) as spans, loopscope.episode(task="t" * (limit + 9)):
        echo("hi")
        echo(long)
        echo(long[:-1] + "y")
    short, big, big2 = (s["attributes"] for s in spans.tool_spans())
    assert short[c.CONTENT_CAPTURED] is True
    assert short[c.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"text":"hi"}'
    assert short[c.GEN_AI_TOOL_CALL_RESULT] == "hi!"
    assert len(big[c.GEN_AI_TOOL_CALL_ARGUMENTS]) == limit
    assert big[c.GEN_AI_TOOL_CALL_RESULT] == "x" * limit
    assert big[c.OUTPUT_SIZE] == limit + 501  # size and hash are of the whole output
    assert big[c.GEN_AI_TOOL_CALL_RESULT] == big2[c.GEN_AI_TOOL_CALL_RESULT]
    assert big[c.OUTPUT_HASH] != big2[c.OUTPUT_HASH]
    assert len(_root(spans)["attributes"][c.TASK]) == limit


def test_root_span_is_parent_and_carries_totals_usage_and_cost() -> None:
    """The collector could not group calls into runs or report cost per task."""

    @loopscope.tool
    def step_tool(n: int) -> str:
        return f"page {n}"

    with (capture_spans() as spans,
          loopscope.episode(task="refund", task_type="transaction", agent_name="bot") as ep):
        ep.record_model_call(input_tokens=100, output_tokens=20, cost_usd=0.01, model="m-1")
        step_tool(1)
        ep.record_model_call(input_tokens=50, output_tokens=5, cost_usd=0.002)
        step_tool(2)
        step_tool(3)
        ep.set_outcome("success")
    root = _root(spans)
    assert root["name"] == "invoke_agent bot"
    assert root["parent_id"] is None
    for span in spans.tool_spans():
        assert span["parent_id"] == root["span_id"]
        assert span["trace_id"] == root["trace_id"]
        assert span["attributes"][c.EPISODE_ID] == ep.id
    attrs = root["attributes"]
    assert attrs[c.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert attrs[c.EPISODE_ID] == ep.id
    assert attrs[c.TASK_TYPE] == "transaction"
    assert attrs[c.OUTCOME] == "success"
    assert attrs[c.STOP_REASON] == "completed"
    assert attrs[c.TOOL_CALLS] == 3
    assert attrs[c.MODEL_TURNS] == 2
    assert attrs[c.GEN_AI_USAGE_INPUT_TOKENS] == 150
    assert attrs[c.GEN_AI_USAGE_OUTPUT_TOKENS] == 25
    assert attrs[c.COST_USD] == pytest.approx(0.012)
    assert attrs[c.GEN_AI_REQUEST_MODEL] == "m-1"


def test_a_known_label_goes_on_the_root_span() -> None:
    """A scripted or evaluation run's ground truth would not reach the collector's metrics
    (the scenario label source) unless the root span carries it."""
    label = {"loop": True, "kind": "exact_repeat", "first_loop_step": 3, "why": "spins"}
    with capture_spans() as spans, loopscope.episode(label=label):
        pass
    attrs = _root(spans)["attributes"]
    assert attrs[c.LABEL_LOOP] is True
    assert attrs[c.LABEL_KIND] == "exact_repeat"
    assert attrs[c.LABEL_FIRST_LOOP_STEP] == 3
    with capture_spans() as spans, loopscope.episode(label={"loop": None, "why": "unknown"}):
        pass
    assert not any(k.startswith("loopscope.label.") for k in _root(spans)["attributes"])


@pytest.mark.parametrize(("label", "field"), [
    ({"loop": "yes"}, "label.loop"), ({"loop": True, "first_loop_step": -1}, "first_loop_step"),
    ({"loop": False, "kind": 3}, "label.kind"), ("loop", "label"),
])
def test_a_label_of_the_wrong_type_is_refused_naming_the_field(label: Any, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        loopscope.episode(label=label)


def test_declared_deadline_and_intent_are_on_the_tool_span() -> None:
    """The collector runs the same detectors: without them on the span it would judge a
    poll by the default deadline and flag an intended duplicate write."""
    with capture_spans() as spans, loopscope.episode() as ep:
        with loopscope.tool_call("job_status", {"id": 1}, kind="poll", deadline_s=30,
                                 episode=ep) as call:
            call.finish("running")
        with loopscope.tool_call("send_reminder", {"to": "a"}, kind="write",
                                 intent="duplicate", episode=ep) as call:
            call.finish("sent")
    poll, write = spans.tool_spans()
    assert poll["attributes"][c.TOOL_DEADLINE_S] == 30.0
    assert c.TOOL_INTENT not in poll["attributes"]
    assert write["attributes"][c.TOOL_INTENT] == "duplicate"
    assert c.TOOL_DEADLINE_S not in write["attributes"]


def test_completed_run_without_outcome_is_unknown_not_success() -> None:
    """A run that merely ended would be reported as a success."""
    with capture_spans() as spans, loopscope.episode():
        pass
    attrs = _root(spans)["attributes"]
    assert attrs[c.OUTCOME] == "unknown"
    assert attrs[c.STOP_REASON] == "completed"


def test_user_exception_propagates_unchanged_and_marks_the_spans() -> None:
    """loopscope would swallow or rewrap the agent's own exceptions."""
    boom = KeyError("missing order")

    @loopscope.tool
    def explode() -> None:
        raise boom

    with capture_spans() as spans, pytest.raises(KeyError) as info, loopscope.episode():
        explode()
    assert info.value is boom
    (span,) = spans.tool_spans()
    assert span["attributes"][c.STATUS] == "error"
    assert span["status"] == "ERROR"
    assert "exception" in span["events"]
    root = _root(spans)
    assert root["attributes"][c.STOP_REASON] == "fatal"
    assert root["attributes"][c.OUTCOME] == "failure"


def test_async_tool_spans_and_exceptions() -> None:
    """Async tools would lose their span, their parent or their exception."""
    err = RuntimeError("upstream 500")

    @loopscope.tool(kind="read")
    async def fetch(url: str) -> str:
        await asyncio.sleep(0)
        if url == "bad":
            raise err
        return f"body of {url}"

    async def agent() -> list[str]:
        async with loopscope.episode():
            pages = await asyncio.gather(fetch("a"), fetch("b"))
            with pytest.raises(RuntimeError) as info:
                await fetch("bad")
            assert info.value is err
            return pages

    with capture_spans() as spans:
        assert asyncio.run(agent()) == ["body of a", "body of b"]
    root = _root(spans)
    tools = spans.tool_spans()
    assert len(tools) == 3
    assert all(s["parent_id"] == root["span_id"] for s in tools)
    assert sorted(s["attributes"][c.STATUS] for s in tools) == ["error", "ok", "ok"]


def test_write_timeout_is_unknown_with_an_idempotency_key() -> None:
    """A timed-out write would look failed, inviting a blind retry (a double charge)."""
    timeout = TimeoutError("gateway timed out")

    @loopscope.tool(kind="write")
    def charge_card(amount: int) -> str:
        raise timeout

    with capture_spans() as spans, loopscope.episode() as ep, pytest.raises(TimeoutError) as info:
        charge_card(10)
    assert info.value is timeout
    (span,) = spans.tool_spans()
    attrs = span["attributes"]
    assert attrs[c.STATUS] == "timeout"
    assert attrs[c.WRITE_STATUS] == "unknown"
    assert attrs[c.TOOL_KIND] == "write"
    assert attrs[c.IDEMPOTENCY_KEY].startswith(ep.id)


def test_timeout_like_exception_names_count_as_timeouts() -> None:
    """httpx/requests-style ReadTimeout would be recorded as a plain error."""

    class ReadTimeout(Exception):
        pass

    @loopscope.tool(kind="write")
    def send(msg: str) -> None:
        raise ReadTimeout(msg)

    @loopscope.tool(kind="write")
    def send_bad(msg: str) -> None:
        raise ValueError(msg)

    with capture_spans() as spans, loopscope.episode():
        with pytest.raises(ReadTimeout):
            send("hi")
        with pytest.raises(ValueError):
            send_bad("hi")
    first, second = (s["attributes"] for s in spans.tool_spans())
    assert (first[c.STATUS], first[c.WRITE_STATUS]) == ("timeout", "unknown")
    assert (second[c.STATUS], second[c.WRITE_STATUS]) == ("error", "error")


def test_explicit_business_idempotency_key_is_recorded() -> None:
    """A custom idempotency_key= function would be ignored in favour of run_id:step."""

    @loopscope.tool(kind="write", idempotency_key=lambda order_id, **_: f"refund-{order_id}")
    def refund(order_id: str, amount: int = 1) -> str:
        return "refunded"

    with capture_spans() as spans, loopscope.episode():
        refund("o-7", amount=3)
    assert spans.tool_spans()[0]["attributes"][c.IDEMPOTENCY_KEY] == "refund-o-7"


def test_set_outcome_validates() -> None:
    """A typo'd outcome would be stored and break the success metrics."""
    with capture_spans() as spans, loopscope.episode() as ep:
        with pytest.raises(ValueError, match="'great'"):
            ep.set_outcome("great")
        ep.set_outcome("failure")
    assert _root(spans)["attributes"][c.OUTCOME] == "failure"


def test_calls_outside_an_episode_are_traced_without_a_root() -> None:
    """Tools used without an episode would crash or be dropped."""

    @loopscope.tool
    def loose(n: int) -> int:
        return n * 2

    with capture_spans() as spans:
        assert loose(2) == 4
    (span,) = spans.tool_spans()
    assert span["parent_id"] is None
    assert not [s for s in spans.as_dicts() if s["name"].startswith("invoke_agent")]


def test_an_undeclared_tool_gets_its_kind_from_its_name_and_the_span_says_so() -> None:
    """Issue 16, point 3: a tool nobody declared is judged by its name (``send_`` writes,
    ``get_`` reads), and the span says where the kind came from, beside a declared one."""

    @loopscope.tool
    def send_invoice(customer: str) -> str:
        return f"sent to {customer}"

    @loopscope.tool
    def get_invoice(customer: str) -> str:
        return f"invoice of {customer}"

    @loopscope.tool(kind="read")
    def lookup(key: str) -> str:
        return key

    with capture_spans(mode="observe") as spans, loopscope.episode():
        send_invoice("ana@example.com")
        get_invoice("ana@example.com")
        lookup("k")
    kinds = [(s["attributes"][c.GEN_AI_TOOL_NAME], s["attributes"].get(c.TOOL_KIND),
              s["attributes"].get(c.TOOL_KIND_SOURCE)) for s in spans.tool_spans()]
    assert kinds == [("send_invoice", "write", "name"), ("get_invoice", "read", "name"),
                     ("lookup", "read", "declared")]


def test_a_runs_spans_are_stamped_with_its_clock_so_a_replay_judges_what_the_guard_judged(
) -> None:
    """With ``clock=`` the guard judges by the clock; the spans carry the same times (steps at
    one clock time a nanosecond apart, in order), so a replay of the exported spans sees the
    model turns and waits the guard saw, not the milliseconds the script took to run."""
    now = [0.0]
    with capture_spans(mode="observe") as spans, loopscope.episode(
            task="t", clock=lambda: now[0]) as ep:
        for t in (0.0, 5.0, 5.0, 12.5):
            now[0] = t
            early_lookup(str(t))
        ep.record_message("assistant", "done")
    tools = sorted(spans.spans(), key=lambda s: s.start_time or 0)
    root = next(s for s in tools if s.name.startswith(c.OP_INVOKE_AGENT))
    starts = [((s.start_time or 0) - (root.start_time or 0)) / 1e9
              for s in tools if s.name.startswith(c.OP_EXECUTE_TOOL)]
    assert [round(t, 6) for t in starts] == [0.0, 5.0, 5.0, 12.5]
    assert starts == sorted(starts) and len(set(starts)) == 4  # (in the order they ran)
