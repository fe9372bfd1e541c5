"""The one way into the core (detect/steps.py): typed steps, feed, feed_run, recorded_call."""

from __future__ import annotations

import random
from collections import OrderedDict

import pytest

from loopscope.detect import EpisodeMonitor, ToolCall, ToolResult
from loopscope.detect import steps as steps_module
from loopscope.detect.ladder import same_turn
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


def _turns_by_the_rule(steps: list[ToolStep]) -> list[int]:
    """The sizes of the turns ``feed_run`` must form, by its documented rule checked call by
    call against every call gathered (the reference its index must agree with)."""
    sizes: list[int] = []
    turn: list[ToolStep] = []
    for step in steps:
        last = turn[-1] if turn else None
        together = last is not None and (
            step.call.t < max(s.end or s.call.t for s in turn)
            if last.end is not None and last.end > last.call.t
            else same_turn(last.call.t, step.call.t))
        distinct = all(
            (o.call.tool, o.call.args, o.call.signature, o.call.args_text)
            != (step.call.tool, step.call.args, step.call.signature, step.call.args_text)
            and (o.call.call_id is None or o.call.call_id != step.call.call_id)
            for o in turn)
        if turn and not (together and distinct):
            sizes.append(len(turn))
            turn = []
        turn.append(step)
    return [*sizes, len(turn)] if turn else sizes


class _Same:
    """Arguments no shape knows: every one equals every other."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same)

    __hash__ = None  # type: ignore[assignment]


_NAN = float("nan")
_PAIRS: dict[str, tuple[object, object, bool]] = {
    # (the first call's arguments, a later call's, whether the later one is the same call)
    "an int and its float": ({"q": 1}, {"q": 1.0}, True),
    "an int and True": ({"q": 1}, {"q": True}, True),
    "a dict and an equal OrderedDict": ({"q": 7}, OrderedDict(q=7), True),
    "an OrderedDict and an equal dict": (OrderedDict(q=7), {"q": 7}, True),
    "equal nested arguments": ({"q": [1, {"r": "s"}]}, {"q": [1, {"r": "s"}]}, True),
    "one NaN in both": ({"q": _NAN}, {"q": _NAN}, True),
    "two NaNs": ({"q": float("nan")}, {"q": float("nan")}, False),
    "a tuple and a list": ({"q": (1,)}, {"q": [1]}, False),
    "a text and a number": ({"q": "1"}, {"q": 1}, False),
    "no arguments twice": (None, None, True),
    "an object compared by its own rules": ({"q": _Same()}, {"q": _Same()}, True),
    "another call under the same call id": ({"q": "a"}, {"q": "b"}, True),
}


@pytest.mark.parametrize("pair", list(_PAIRS))
def test_a_turn_of_many_calls_at_one_instant_is_gathered_by_the_rule(
        pair: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of calls stamped at one instant (a record's artefact) were gathered into a
    turn by comparing each with every call before it: 55 s for 10,000 calls, the collector's
    pipeline held meanwhile. A long turn is now told by an index; a call the same as one
    gathered (or under its call id) must still end the turn, past the index's threshold, for
    arguments equal across types, and only then."""
    first, later, same = _PAIRS[pair]
    shared_id = pair.endswith("call id")
    calls: list[object] = [{"q": f"filler {n}"} for n in range(40)]
    calls[3], calls[30] = first, later
    steps = [ToolStep(ToolCall("search", args, t=1.0,
                               call_id="c" if shared_id and n in (3, 30) else f"u{n}"),
                      ToolResult("ok", t=2.0), end=2.0) for n, args in enumerate(calls)]
    fed: list[int] = []
    real = steps_module._feed_turn
    monkeypatch.setattr(steps_module, "_feed_turn",
                        lambda monitor, turn: fed.append(len(turn)) or real(monitor, turn))
    assert len(list(feed_run(EpisodeMonitor(), steps))) == len(steps)
    assert fed == ([30, 10] if same else [40]) == _turns_by_the_rule(steps)
    assert steps_module._Turn.INDEXED < 30  # (the index tells)


@pytest.mark.parametrize("seed", range(3))
def test_random_turns_are_gathered_by_the_rule(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random runs of calls at one instant, a few apart, with repeated arguments of several
    types, repeated call ids and return times or none: the same turns as the rule."""
    rng = random.Random(seed)
    pool: list[object] = [
        {"q": 1}, {"q": 1.0}, {"q": True}, OrderedDict(q=1), {"q": [1, {"r": "s"}]},
        {"q": (1, {"r": "s"})}, {"q": "1"}, None, [1, 2], {"q": float("nan")}]
    pool += [{"q": n} for n in range(5000)]
    steps = []
    t = 0.0
    for n in range(1500):
        t += rng.choice([0.0] * 40 + [1e-9] * 8 + [0.05, 5.0])
        args = rng.choice(pool[:10]) if rng.random() < 0.01 else rng.choice(pool)
        call_id = rng.choice([None, f"u{n}", f"u{n}", f"c{rng.randrange(5000)}"])
        end = rng.choice([None, t, t + 0.001] + [t + 1.0] * 12)
        steps.append(ToolStep(ToolCall(rng.choice(["search", "read"]), args,
                                       call_id=call_id, t=t),
                              ToolResult("ok", call_id=call_id, t=end), end=end))
    fed: list[int] = []
    real = steps_module._feed_turn
    monkeypatch.setattr(steps_module, "_feed_turn",
                        lambda monitor, turn: fed.append(len(turn)) or real(monitor, turn))
    assert len(list(feed_run(EpisodeMonitor(), steps))) == len(steps)
    expected = _turns_by_the_rule(steps)
    assert fed == expected
    assert max(expected) > steps_module._Turn.INDEXED  # (the index was used)
