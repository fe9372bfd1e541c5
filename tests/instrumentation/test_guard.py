"""The guard in observe, warn and enforce modes, budgets, writes and the tool_call scope."""

from __future__ import annotations

import contextvars
import gc
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from opentelemetry import trace

import loopscope
from loopscope import conventions as c
from loopscope.testing import capture_spans


class Counter:
    """Tools that count their real executions."""

    def __init__(self) -> None:
        self.runs: list[Any] = []

    def read(self, result: Any = None) -> Any:
        @loopscope.tool(kind="read")
        def search(q: str) -> Any:
            self.runs.append(q)
            return result if result is not None else f"results for {q}"

        return search


def _root(spans: Any) -> dict[str, Any]:
    (root,) = [s for s in spans.as_dicts() if s["name"].startswith("invoke_agent")]
    return root


# -- enforce --------------------------------------------------------------------------------


def test_enforce_warns_third_identical_read_and_blocks_fourth_without_running_it() -> None:
    """A spinning agent would keep hitting the real tool, or be cut off before it was told
    (docs/detection.md: nudge first, then skip the call)."""
    counter = Counter()
    search = counter.read()
    with capture_spans(mode="enforce") as spans, loopscope.episode():
        assert search("x") == "results for x"
        assert search("x") == "results for x"
        third = search("x")
        assert len(counter.runs) == 3  # warned, but it ran
        fourth = search("x")
    assert len(counter.runs) == 3
    assert third.startswith("[loopscope] ")
    assert "search" in third and "3 times" in third
    assert third.endswith("results for x")
    assert fourth.startswith("[loopscope] ")
    assert "search" in fourth and "4 times" in fourth
    assert fourth.endswith("results for x")  # the cached result, not silence
    warned, blocked = (s["attributes"] for s in spans.tool_spans()[2:])
    assert (warned[c.STATUS], warned[c.GUARD_ACTION], warned[c.GUARD_DECISION]) == (
        "ok", "warn", "warn")
    assert blocked[c.STATUS] == "blocked"
    assert blocked[c.GUARD_ACTION] == "block"
    assert blocked[c.GUARD_DECISION] == "block"
    assert blocked[c.GUARD_REASON]
    assert blocked[c.OUTPUT_HASH] == spans.tool_spans()[0]["attributes"][c.OUTPUT_HASH]


def test_enforce_stops_a_persistent_repeat_after_committing_the_output() -> None:
    """LoopDetected would come without the last output, or before its span."""
    counter = Counter()
    search = counter.read()
    seen: list[Any] = []
    with capture_spans(mode="enforce", capture_content=True) as spans:
        with pytest.raises(loopscope.LoopDetected) as info, loopscope.episode() as ep:
            for _ in range(10):
                try:
                    seen.append(search("x"))
                except loopscope.LoopDetected as stop:
                    last = spans.tool_spans()[-1]["attributes"]
                    assert last[c.GUARD_ACTION] == "stop"  # exported before we got here
                    assert last[c.GEN_AI_TOOL_CALL_RESULT] == stop.output
                    raise
        stop = info.value
    assert len(counter.runs) == 3  # the 3rd was warned and ran; the 4th blocked; the 5th stopped
    assert len(seen) == 4
    assert stop.stop_reason == "repeated_tool_call"
    assert stop.diagnostic["terminated_by"] == "repeated_tool_call"
    assert stop.diagnostic["tool"] == "search"
    assert isinstance(stop.output, str) and stop.output.endswith("results for x")
    assert ep.stop is stop
    root = _root(spans)["attributes"]
    assert root[c.STOP_REASON] == "repeated_tool_call"
    assert root[c.OUTCOME] == "failure"
    assert '"terminated_by": "repeated_tool_call"' in root[c.STOP_DIAGNOSTIC]


def test_enforce_has_no_global_round_cap() -> None:
    """A hidden cap of ~5 rounds would kill real work."""
    counter = Counter()
    search = counter.read()
    with capture_spans(mode="enforce") as spans, loopscope.episode():
        results = [search(f"query {i}") for i in range(30)]
    assert len(counter.runs) == 30
    assert results == [f"results for query {i}" for i in range(30)]
    assert {s["attributes"][c.GUARD_ACTION] for s in spans.tool_spans()} == {"allow"}


def test_tool_calls_budget_stops_before_the_call_runs() -> None:
    """A budget checked after the call would let one more (costly) call through."""
    counter = Counter()
    search = counter.read()
    budgets = {"budgets": {"tool_calls": 3}}
    with (capture_spans(mode="enforce", policy=budgets) as spans,
          pytest.raises(loopscope.LoopDetected) as info, loopscope.episode()):
        for i in range(5):
            search(f"q{i}")
    assert counter.runs == ["q0", "q1", "q2"]
    assert info.value.stop_reason == "budget"
    assert info.value.diagnostic["limit"] == 3
    assert info.value.diagnostic["budget_type"] == "total_tool_calls"
    last = spans.tool_spans()[-1]["attributes"]
    assert (last[c.STATUS], last[c.GUARD_ACTION]) == ("blocked", "stop")
    assert _root(spans)["attributes"][c.STOP_REASON] == "budget"


PLAN = "I will now open settings.py, find the timeout value, and raise it to thirty seconds."


@pytest.mark.parametrize("then", ["model_turn", "tool_call"])
def test_a_message_loop_its_warnings_do_not_end_is_stopped_at_the_next_turn(then: str) -> None:
    """The same plan restated: warned at the 3rd, and the 4th decides a stop; a message
    cannot be taken back, so the stop is raised before the next model turn or tool call, and
    that call does not run (issue 16, point 9)."""
    counter = Counter()
    search = counter.read()
    with (capture_spans(mode="enforce") as spans,
          pytest.raises(loopscope.LoopDetected) as info, loopscope.episode() as ep):
        decisions = [ep.record_message("assistant", PLAN) for _ in range(4)]
        assert [d.action for d in decisions if d is not None] == ["allow"] * 2 + [
            "warn", "stop"]
        if then == "model_turn":
            ep.before_model_call()
        else:
            search("settings.py")
    assert counter.runs == []
    assert info.value.stop_reason == "no_progress"
    assert info.value.diagnostic["detector"] == "monologue"
    assert _root(spans)["attributes"][c.STOP_REASON] == "no_progress"


def test_a_stop_decided_on_a_failed_call_ends_the_run_at_the_next_call() -> None:
    """The same error for argument after argument: the 5th failure decides a stop (warn,
    warn, stop). The tool's own exception goes up at that call, as it would; the stop is
    raised before the next call, which does not run, as every replay of the run says."""
    runs: list[str] = []

    @loopscope.tool(kind="read")
    def lookup(sku: str) -> str:
        runs.append(sku)
        raise ValueError("inventory refused the request: code E_SCHEMA")

    with (capture_spans(mode="enforce") as spans,
          pytest.raises(loopscope.LoopDetected) as info, loopscope.episode(task="stock")):
        for n in range(10):
            with pytest.raises(ValueError):
                lookup(f"SKU-{n:04d}")
    assert len(runs) == 5  # (the 6th call was not made)
    actions = [s["attributes"][c.GUARD_ACTION] for s in spans.tool_spans()]
    assert actions == ["allow", "allow", "warn", "warn", "stop"]
    assert info.value.diagnostic["detector"] == "repeat_same_error"
    assert _root(spans)["attributes"][c.STOP_REASON] == info.value.stop_reason


def test_a_stop_decided_on_a_blocked_call_ends_the_run_there() -> None:
    """With ``ignored_calls`` 1, a nudge ignored by the very next call without progress
    stops the run: when that call was itself blocked, the stop is raised from it (the
    model is handed the cached result with the correction), not left on its span."""
    counter = Counter()
    search = counter.read()
    with (capture_spans(mode="enforce", policy={"ignored_calls": 1}) as spans,
          pytest.raises(loopscope.LoopDetected) as info, loopscope.episode(task="find x")):
        for _ in range(8):
            search("x")
    actions = [s["attributes"][c.GUARD_ACTION] for s in spans.tool_spans()]
    assert actions == ["allow", "allow", "warn", "stop"]  # (the 4th: blocked, then stopped)
    assert counter.runs == ["x"] * 3
    assert info.value.stop_reason == "no_progress"
    assert "results for x" in str(info.value.output)


def test_in_observe_mode_a_message_stop_is_only_recorded() -> None:
    counter = Counter()
    search = counter.read()
    with capture_spans(mode="observe"), loopscope.episode() as ep:
        for _ in range(5):
            ep.record_message("assistant", PLAN)
        ep.before_model_call()
        search("settings.py")
    assert counter.runs == ["settings.py"]


# -- observe and warn -----------------------------------------------------------------------


def test_observe_runs_every_call_and_only_records_the_decision() -> None:
    """Shadow mode would change the agent's behaviour or hide what enforce would do."""
    counter = Counter()
    search = counter.read()
    with capture_spans(mode="observe") as spans, loopscope.episode():
        results = [search("x") for _ in range(5)]
    assert len(counter.runs) == 5
    assert results == ["results for x"] * 5
    tools = [s["attributes"] for s in spans.tool_spans()]
    assert {a[c.GUARD_ACTION] for a in tools} == {"allow"}
    assert {a[c.STATUS] for a in tools} == {"ok"}
    assert [a[c.GUARD_DECISION] for a in tools] == ["allow", "allow", "warn", "block", "stop"]
    root = _root(spans)["attributes"]
    assert root[c.STOP_REASON] == "completed"
    assert "repeated_tool_call" in root[c.STOP_DIAGNOSTIC]  # what enforce would have done


def test_warn_prepends_the_correction_to_a_string_result() -> None:
    """Warn mode would silently behave like observe, or block like enforce."""
    counter = Counter()
    search = counter.read()
    with capture_spans(mode="warn") as spans, loopscope.episode():
        results = [search("x") for _ in range(4)]
    assert len(counter.runs) == 4
    assert results[:2] == ["results for x"] * 2
    for warned in results[2:]:
        assert warned.startswith("[loopscope] ")
        assert warned.endswith("results for x")
    actions = [s["attributes"][c.GUARD_ACTION] for s in spans.tool_spans()]
    assert actions == ["allow", "allow", "warn", "warn"]


def test_warn_adds_a_key_to_a_dict_result() -> None:
    """A dict result would be turned into text, breaking the agent's parsing."""
    counter = Counter()
    lookup = counter.read(result={"order": 7, "state": "open"})
    with capture_spans(mode="warn"), loopscope.episode():
        results = [lookup("o-7") for _ in range(3)]
    assert len(counter.runs) == 3
    assert results[0] == {"order": 7, "state": "open"}
    assert results[2]["order"] == 7 and results[2]["state"] == "open"
    assert "search" in results[2]["loopscope_correction"]
    assert set(results[2]) == {"order", "state", "loopscope_correction"}


def test_episode_mode_overrides_the_global_mode() -> None:
    """A per-run enforce (or a typo'd mode) would be ignored."""
    counter = Counter()
    search = counter.read()
    with capture_spans(mode="observe"):
        with loopscope.episode(mode="enforce") as ep:
            assert ep.mode == "enforce"
            for _ in range(4):
                search("x")
        assert len(counter.runs) == 3  # the 4th was blocked
        with loopscope.episode():
            for _ in range(4):
                search("x")
        assert len(counter.runs) == 7
        with pytest.raises(ValueError, match="'strict'"):
            loopscope.episode(mode="strict")


# -- writes -----------------------------------------------------------------------------------


def _flaky_write(runs: list[str], fail_first: bool = True) -> Any:
    pending = [fail_first]

    @loopscope.tool(kind="write")
    def create_order(item: str, qty: int = 1) -> dict[str, str]:
        runs.append(item)
        if pending[0]:
            pending[0] = False
            raise TimeoutError("no answer from the order service")
        return {"order_id": f"o{len(runs)}"}

    return create_order


def test_write_retry_after_timeout_is_blocked_until_reconciled() -> None:
    """A blind retry of an UNKNOWN write would double the side effect."""
    runs: list[str] = []
    create_order = _flaky_write(runs)
    with capture_spans(mode="enforce") as spans, loopscope.episode():
        with pytest.raises(TimeoutError):
            create_order("mug")
        key = spans.tool_spans()[-1]["attributes"][c.IDEMPOTENCY_KEY]
        retry = create_order("mug")
        assert runs == ["mug"]
        assert "UNKNOWN" in retry and key in retry
        assert spans.tool_spans()[-1]["attributes"][c.STATUS] == "blocked"
        assert loopscope.reconcile("no-such-key", found=False) is False
        assert loopscope.reconcile(key, found=False) is True
        assert create_order("mug") == {"order_id": "o2"}
    assert runs == ["mug", "mug"]
    last = spans.tool_spans()[-1]["attributes"]
    assert (last[c.STATUS], last[c.GUARD_ACTION], last[c.WRITE_STATUS]) == ("ok", "allow", "ok")
    reconciles = [s for s in spans.as_dicts() if s["name"] == f"reconcile {key}"]
    assert reconciles and reconciles[0]["attributes"][c.RECONCILE_FOUND] is False


def test_reconciled_found_write_returns_the_found_record() -> None:
    """Episode.reconcile promises a retry of a found write returns the record instead."""
    runs: list[str] = []
    create_order = _flaky_write(runs)
    with capture_spans(mode="enforce") as spans, loopscope.episode():
        with pytest.raises(TimeoutError):
            create_order("mug")
        key = spans.tool_spans()[-1]["attributes"][c.IDEMPOTENCY_KEY]
        assert loopscope.reconcile(key, found=True, result={"order_id": "found-1"})
        retry = create_order("mug")
    assert runs == ["mug"]
    assert "found-1" in str(retry)


def test_identical_write_is_warned_unless_declared_intended() -> None:
    """'Buy another one' would be blocked or nagged, or an accidental duplicate let through
    without a word."""
    runs: list[str] = []
    create_order = _flaky_write(runs, fail_first=False)
    with capture_spans(mode="enforce") as spans, loopscope.episode():
        assert create_order("mug") == {"order_id": "o1"}
        dup = create_order("mug")
        assert runs == ["mug", "mug"]  # a second sighting is a nudge, not a block
        assert dup["order_id"] == "o2" and "loopscope_correction" in dup
        with loopscope.intended_duplicate():
            assert create_order("mug") == {"order_id": "o3"}
        assert create_order("cup") == {"order_id": "o4"}
    assert runs == ["mug", "mug", "mug", "cup"]
    tools = [s["attributes"] for s in spans.tool_spans()]
    assert [a[c.GUARD_ACTION] for a in tools] == ["allow", "warn", "allow", "allow"]
    keys = [a[c.IDEMPOTENCY_KEY] for a in tools]
    assert len(set(keys)) == 4


def test_identical_write_with_no_new_state_is_blocked_then_stopped() -> None:
    """A duplicate write the agent keeps retrying after the nudge, with nothing new coming
    back, would keep hitting the real service."""
    tags: list[str] = []

    @loopscope.tool(kind="write")
    def add_tag(name: str) -> str:
        tags.append(name)
        return f"tag {name} created" if tags.count(name) == 1 else f"tag {name} already exists"

    with (capture_spans(mode="enforce") as spans,
          pytest.raises(loopscope.LoopDetected) as info, loopscope.episode()):
        assert add_tag("x") == "tag x created"
        warned = add_tag("x")
        assert warned.startswith("[loopscope] ") and warned.endswith("tag x already exists")
        blocked = add_tag("x")
        assert tags == ["x", "x"]  # the third did not run
        assert blocked.startswith("[loopscope] ") and blocked.endswith("tag x already exists")
        add_tag("x")
    assert tags == ["x", "x"]
    assert info.value.diagnostic["detector"] == "write_duplicate"
    tools = [s["attributes"] for s in spans.tool_spans()]
    assert [(a[c.STATUS], a[c.GUARD_ACTION]) for a in tools] == [
        ("ok", "allow"), ("ok", "warn"), ("blocked", "block"), ("blocked", "stop")]


# -- the lower-level tool_call scope ----------------------------------------------------------


def test_tool_call_scope_in_a_custom_loop() -> None:
    """Custom loops would not get blocks, cached results or their call ids on spans."""
    executed: list[int] = []
    with capture_spans(mode="enforce") as spans, loopscope.episode():
        shown = []
        for i in range(4):
            with loopscope.tool_call("search", {"q": "x"}, call_id=f"call-{i}",
                                     kind="read") as call:
                if call.blocked:
                    shown.append(call.result)
                else:
                    executed.append(i)
                    shown.append(call.finish("nothing for x"))
    assert executed == [0, 1, 2]  # the 3rd is warned and runs, the 4th is blocked
    for nudged in shown[2:]:
        assert nudged.startswith("[loopscope] ") and nudged.endswith("nothing for x")
    ids = [s["attributes"][c.GEN_AI_TOOL_CALL_ID] for s in spans.tool_spans()]
    assert ids == ["call-0", "call-1", "call-2", "call-3"]


def test_tool_call_scope_records_an_exception_leaving_the_block() -> None:
    """An exception inside the with-block would leave the span open or unmarked."""
    with (capture_spans() as spans, loopscope.episode(), pytest.raises(ConnectionError),
          loopscope.tool_call("ping", {}, call_id="p1")):
        raise ConnectionError("down")
    (span,) = spans.tool_spans()
    assert span["attributes"][c.STATUS] == "error"


def test_parallel_tool_calls_pair_by_call_id() -> None:
    """Interleaved results would be attributed to the wrong call (pairing by position)."""
    with capture_spans(capture_content=True) as spans, loopscope.episode():
        a = loopscope.tool_call("search", {"q": "a"}, call_id="c-a", kind="read").start()
        b = loopscope.tool_call("fetch", {"u": "b"}, call_id="c-b", kind="read").start()
        assert b.finish("result B") == "result B"
        assert a.finish("result A") == "result A"
    by_id = {s["attributes"][c.GEN_AI_TOOL_CALL_ID]: s["attributes"] for s in spans.tool_spans()}
    assert by_id["c-a"][c.GEN_AI_TOOL_CALL_RESULT] == "result A"
    assert by_id["c-a"][c.GEN_AI_TOOL_NAME] == "search"
    assert by_id["c-b"][c.GEN_AI_TOOL_CALL_RESULT] == "result B"
    assert by_id["c-b"][c.GEN_AI_TOOL_NAME] == "fetch"
    assert (by_id["c-a"][c.STEP], by_id["c-b"][c.STEP]) == (0, 1)


def test_parallel_tool_calls_are_siblings_under_the_root() -> None:
    """Parallel calls would nest under each other and later calls under an ended span."""
    with capture_spans() as spans, loopscope.episode():
        root = trace.get_current_span()
        a = loopscope.tool_call("search", {"q": "a"}, call_id="c-a").start()
        b = loopscope.tool_call("search", {"q": "b"}, call_id="c-b").start()
        a.finish("A")
        b.finish("B")
        assert trace.get_current_span() is root
    root_id = _root(spans)["span_id"]
    assert [s["parent_id"] for s in spans.tool_spans()] == [root_id, root_id]


def test_a_stopped_episode_does_not_become_the_parent_of_the_next() -> None:
    """After a LoopDetected stop, the next run would join the previous run's trace."""
    search = Counter().read()
    with capture_spans(mode="enforce", policy={"budgets": {"tool_calls": 1}}) as spans:
        with pytest.raises(loopscope.LoopDetected), loopscope.episode():
            search("a")
            search("b")
        gc.collect()
        with loopscope.episode():
            pass
    first, second = [s for s in spans.as_dicts() if s["name"] == "invoke_agent"]
    assert second["parent_id"] is None
    assert second["trace_id"] != first["trace_id"]


def test_thread_pool_tools_share_one_episode() -> None:
    """Parallel tools in threads would lose the episode or corrupt the guard's state."""
    search = Counter().read()

    def work(worker: int) -> list[str]:
        return [search(f"w{worker}-{i}") for i in range(25)]

    with (capture_spans(mode="enforce") as spans, loopscope.episode() as ep,
          ThreadPoolExecutor(max_workers=8) as pool):
        futures = [pool.submit(contextvars.copy_context().run, work, w) for w in range(8)]
        results = [f.result() for f in futures]
    assert results[3][4] == "results for w3-4"
    tools = spans.tool_spans()
    assert len(tools) == 200
    assert sorted(s["attributes"][c.STEP] for s in tools) == list(range(200))
    assert {s["attributes"][c.EPISODE_ID] for s in tools} == {ep.id}
    root = _root(spans)
    assert {s["parent_id"] for s in tools} == {root["span_id"]}
    assert root["attributes"][c.TOOL_CALLS] == 200
