"""The one way into the core (detect/steps.py): typed steps, feed, feed_run, recorded_call."""

from __future__ import annotations

import pytest

from loopscope.detect import EpisodeMonitor, ToolCall, ToolResult
from loopscope.detect.steps import MessageStep, ToolStep, feed, feed_run, recorded_call


def _step(tool: str, args: dict[str, object], output: str, t: float, call_id: str) -> ToolStep:
    return ToolStep(ToolCall(tool, args, call_id=call_id, t=t),
                    ToolResult(output, call_id=call_id, t=t))


def test_a_fast_loop_in_code_is_fed_one_call_after_another() -> None:
    """The same call a millisecond apart is not parallel work: the third is a repeat."""
    steps = [_step("search_orders", {"q": "late"}, "orders 1 and 2 are late", 0.001 * i,
                   f"c{i}") for i in range(4)]
    fed = list(feed_run(EpisodeMonitor(task_type="lookup"), steps))
    assert len(fed) == 4 and all(isinstance(f, tuple) for f in fed)
    before = [f[0] for f in fed if isinstance(f, tuple)]
    assert [d.action for d in before][:3] == ["allow", "allow", "warn"]


def test_the_calls_of_one_model_turn_are_issued_before_their_results_are_read() -> None:
    """Three different reads 10 ms apart: none sees another's result before it is issued,
    as a live guard sees parallel calls (the third repeats the first's arguments only in the
    next turn)."""
    turn = [_step("read_file", {"path": f"m{n}.py"}, f"body {n}", 0.01 * n, f"t1-{n}")
            for n in range(3)]
    monitor = EpisodeMonitor()
    fed = list(feed_run(monitor, turn))
    assert [f[0].step for f in fed if isinstance(f, tuple)] == [0, 1, 2]
    assert monitor.tool_calls == 3 and not monitor.flags


def test_a_call_id_used_twice_at_once_never_raises() -> None:
    """Two parallel calls under one call id (a recorder's mistake) pair their results in
    order instead of failing the whole run."""
    monitor = EpisodeMonitor()
    a, b = _step("a", {"x": 1}, "one", 0.0, "same"), _step("b", {"x": 2}, "two", 0.0, "same")
    monitor.before_call(a.call)
    monitor.before_call(b.call)
    assert [monitor.after_call(a.result).step, monitor.after_call(b.result).step] == [0, 1]
    b_late = _step("b", {"x": 2}, "two", 0.01, "same")
    assert len(list(feed_run(EpisodeMonitor(), [a, b_late]))) == 2


def test_messages_and_calls_keep_their_order() -> None:
    steps = [MessageStep("user", "find order 7", 0.0),
             _step("get_order", {"id": 7}, "order 7: shipped", 1.0, "c1"),
             MessageStep("assistant", "Order 7 has shipped.", 2.0, model_turn=True)]
    fed = list(feed_run(EpisodeMonitor(), steps))
    assert fed[0] is None and isinstance(fed[1], tuple) and fed[2] is None


def test_a_recorded_call_is_identified_by_its_arguments_first() -> None:
    """Decoded arguments win over a recorded signature; a cut-short text keeps the span's
    signature; nothing at all is a call like no other."""
    assert recorded_call("t", args_text='{"a": 1}', signature="other").signature == ""
    cut = recorded_call("t", args_text='{"a": "lo', signature="sig-1")
    assert (cut.args, cut.signature) == ({"input": '{"a": "lo'}, "sig-1")
    assert recorded_call("t", unique="span-9").signature == "nosig:span-9"
    monitor = EpisodeMonitor()
    call = recorded_call("t", args={"a": 1})
    first = feed(monitor, ToolStep(call, ToolResult("x")))
    again = feed(monitor, ToolStep(recorded_call("t", args_text='{"a":1}', signature="zz"),
                                   ToolResult("x")))
    assert first[0].signature == again[0].signature
    assert call == recorded_call("t", args={"a": 1})  # built once, complete: never changed
    with pytest.raises(AttributeError):
        call.signature = first[0].signature  # type: ignore[misc]
