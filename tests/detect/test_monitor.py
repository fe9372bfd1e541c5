"""The seeds' own checks (000, 001, 003), expressed through the detection core."""

from __future__ import annotations

import pytest
from episode_steps import describe, flags_by, run, tool

from loopscope.detect import (
    Budgets,
    EpisodeMonitor,
    Policy,
    RequiredTool,
    ToolCall,
    ToolResult,
)

# -- seed 000: stable signatures, budget checked before execution ------------------------------


def test_seed000_key_order_is_the_same_call_and_repeats_are_blocked():
    """A signature that depends on dict key order lets a reordered repeat through; fails here."""
    m = EpisodeMonitor()
    first = {"q": "policy", "limit": 1}
    reordered = {"limit": 1, "q": "policy"}
    assert m.signature_of("search", first) == m.signature_of("search", reordered)
    actions = []
    for i, args in enumerate([first, reordered, first, reordered]):
        d = m.before_call(ToolCall("search", args, call_id=f"c{i}"))
        actions.append(d.action)
        m.after_call(ToolResult("policy doc 12: refunds within 30 days", call_id=f"c{i}"))
    assert actions == ["allow", "allow", "warn", "block"]


def test_seed000_budget_of_three_stops_the_fourth_call_before_it_runs():
    """A max-steps check made after execution (4 calls run) fails here."""
    m = EpisodeMonitor(Policy(budgets=Budgets(tool_calls=3)))
    executed = []
    stop = None
    for i in range(10):
        d = m.before_call(ToolCall("search", {"q": str(i)}, call_id=f"c{i}"))
        if d.action == "stop":
            stop = d
            break
        executed.append(i)
        m.after_call(ToolResult(f"document {i} about topic {i}", call_id=f"c{i}"))
    assert executed == [0, 1, 2]
    assert stop is not None and stop.step == 3 and stop.stop_reason == "budget"
    assert stop.diagnostic["terminated_by"] == "budget"
    assert stop.diagnostic["budget_type"] == "total_tool_calls"
    assert (stop.diagnostic["limit"], stop.diagnostic["consumed"]) == (3, 3)


# -- seed 001: no global round cap; repeated identical calls end the run ------------------------


def _round(m: EpisodeMonitor, i: int, args: dict, output: str) -> str:
    assert m.before_model_call(t=float(i)).action == "allow"
    m.after_model_call(tokens=50)
    d = m.before_call(ToolCall("read_file", args, call_id=f"c{i}", t=float(i)))
    ran = d.action in ("allow", "warn")
    m.after_call(
        ToolResult(
            output if ran else None, status="ok" if ran else "blocked", call_id=f"c{i}", t=float(i)
        )
    )
    return d.action


def test_seed001_eight_distinct_rounds_complete_without_a_kill():
    """A global round cap (seed 001's 'maximum tool rounds: 5') kills this healthy run."""
    m = EpisodeMonitor(task_type="coding")
    actions = [
        _round(m, i, {"path": f"src/mod{i}.py"}, f"def f{i}(): return {i}") for i in range(8)
    ]
    assert actions == ["allow"] * 8
    assert m.flags == [] and m.stopped is None
    assert m.summary()["stop_reason"] is None and m.summary()["last_progress_step"] == 7


def test_seed001_identical_reads_stop_with_repeated_tool_call():
    """A repeat guard that only nags (never stops) or names the wrong stop reason fails here."""
    m = EpisodeMonitor(task_type="coding")
    actions = [_round(m, i, {"path": "README.md"}, "# project readme") for i in range(6)]
    assert actions[:5] == ["allow", "allow", "warn", "block", "stop"]
    assert m.summary()["stop_reason"] == "repeated_tool_call"
    assert m.stopped.diagnostic["tool"] == "read_file"
    # the stopped call's result is still paired and recorded (resumable, replayable)
    assert m.history.steps[4].call_id == "c4" and m.history.steps[4].status == "blocked"


# -- seed 003: window, fuzzy, exemption, required tools -----------------------------------------


def test_seed003_window_catches_the_third_a_in_a_b_a_c_a_when_nothing_is_learned():
    """A consecutive-only repeat counter misses A,B,A,C,A (B and C telling nothing new) and
    fails here; so does one that counts A's repeats across calls that did bring news."""
    stuck = [tool(n, {"q": n}, "A text result" if n == "A" else "nothing new here")
             for n in "ABACAA"]
    report = run(stuck)
    assert [(f.step, f.detector, f.action) for f in report.flags][:2] == [
        (4, "exact_repeat", "warn"), (5, "exact_repeat", "block")], describe(report)
    learning = [tool(n, {"q": n}, f"{n} text result") for n in "ABACA"]
    assert run(learning).flags == ()


LONG = "SELECT name, email FROM users WHERE created_at < '2020-01-01' AND active = 1 ORDER BY name"


@pytest.mark.parametrize(
    ("queries", "same_output", "fires"),
    [
        ([LONG, LONG + " ", LONG + "  "], True, True),  # tiny edits, same answer
        ([LONG, LONG + " ", LONG.replace("name", "nom")], True, True),
        ([LONG, LONG + " ", LONG + "  "], False, False),  # edits that find new rows are work
        ([LONG[:30], LONG[:30] + " ", LONG[:30] + "  "], True, False),  # args under 50 chars
        (
            [
                LONG,
                "SELECT count(*) FROM orders GROUP BY region, month HAVING count(*) > 10",
                LONG + " ",
            ],
            True,
            False,
        ),  # only two similar calls
    ],
)
def test_seed003_fuzzy_repeat(queries, same_output, fires):
    """A fuzzy rule off its 3-gram Jaccard / 50-char / 3-times thresholds fails here."""
    steps = [
        tool("sql", {"query": q}, "0 rows returned by the query" if same_output else f"{i} rows")
        for i, q in enumerate(queries)
    ]
    hits = flags_by(run(steps), "fuzzy_repeat")
    assert bool(hits) is fires
    if fires:
        assert (hits[0].step, hits[0].kind, hits[0].severity) == (2, "param_jitter", "warn")


def test_seed003_fuzzy_as_written_ignores_the_output():
    """``fuzzy_requires_same_output=False`` must apply seed 003's rule on arguments alone."""
    steps = [tool("sql", {"query": LONG + " " * i}, f"{i} rows") for i in range(3)]
    hits = flags_by(run(steps, Policy(fuzzy_requires_same_output=False)), "fuzzy_repeat")
    assert [f.step for f in hits] == [2]


def test_seed003_check_background_tasks_is_exempt():
    """A repeat guard that blocks the background-task status tool fails here."""
    steps = [tool("check_background_tasks", {}, "1 task running", t=float(i)) for i in range(30)]
    report = run(steps)
    assert report.flags == (), describe(report)
    same_but_other_tool = [tool("check_tasks", {}, "1 task listed", t=float(i)) for i in range(3)]
    assert flags_by(run(same_but_other_tool), "exact_repeat")


PORTFOLIO = RequiredTool(tool="portfolio", keywords=("持仓情况",), args={"mode": "view"})
DIAGNOSE = RequiredTool(
    tool="portfolio",
    args={"mode": "diagnose"},
    followups=("体检", "健康吗", "分析这些"),
    context_markers=("持仓", "成本价"),
)


def _monitor(*rules: RequiredTool) -> EpisodeMonitor:
    return EpisodeMonitor(Policy(required_tools=rules))


def test_seed003_required_tool_corrects_twice_then_warns():
    """More or fewer than 2 corrections, or an unprefixed answer after them, fails here."""
    m = _monitor(PORTFOLIO)
    m.on_message("user", "看看我的持仓情况")
    checks = [m.check_answer("你的持仓很健康") for _ in range(3)]
    assert [c.action for c in checks] == ["retry", "retry", "warn"]
    assert "portfolio" in checks[0].correction and "view" in checks[0].correction
    assert checks[2].text.startswith("[warning:") and checks[2].text.endswith("你的持仓很健康")
    assert m.check_answer("later answer").action == "allow"  # the turn is over


@pytest.mark.parametrize(
    ("args", "satisfied"),
    [({"mode": "view"}, True), ({"mode": "view", "account": 2}, True), ({"mode": "edit"}, False)],
)
def test_seed003_required_tool_needs_the_required_args(args, satisfied):
    """A rule satisfied by any call of the tool (wrong mode) fails here."""
    m = _monitor(PORTFOLIO)
    m.on_message("user", "我的持仓情况如何？")
    m.before_call(ToolCall("portfolio", args))
    m.after_call(ToolResult("AAPL 10 shares"))
    assert (m.check_answer("answer").action == "allow") is satisfied


@pytest.mark.parametrize(
    "message",
    [
        "<relevant-memories>用户上周问过持仓情况</relevant-memories>今天天气怎么样",
        "<relevant-memories>持仓情况</relevant-memories><current-user-message>你好</current-user-message>",
    ],
)
def test_seed003_recalled_memories_do_not_trigger(message):
    """Keyword matching inside <relevant-memories> (a forced tool call on 'hello') fails here."""
    m = _monitor(PORTFOLIO)
    m.on_message("user", message)
    assert m.check_answer("晴天").action == "allow"


def test_seed003_current_user_message_still_triggers():
    """Stripping the user's own words along with the memories fails here."""
    m = _monitor(PORTFOLIO)
    m.on_message(
        "user",
        "<relevant-memories>无</relevant-memories>"
        "<current-user-message>持仓情况</current-user-message>",
    )
    assert m.check_answer("x").action == "retry"


@pytest.mark.parametrize(
    ("history", "followup", "action"),
    [
        (["我的持仓怎么样", "你持有 AAPL，成本价 150"], "体检", "retry"),
        (["今天天气怎么样", "晴天"], "体检", "allow"),  # no portfolio in the context
        (["我的持仓怎么样", "你持有 AAPL"], "讲个笑话", "allow"),  # not a follow-up
        (["持仓", "a", "b", "c", "d"], "健康吗", "allow"),  # marker older than 4 messages
    ],
)
def test_seed003_context_follow_up_rule(history, followup, action):
    """A follow-up rule that ignores (or over-reaches) the last 4 messages of context fails."""
    m = _monitor(DIAGNOSE)
    for i, content in enumerate(history):
        m.on_message("user" if i % 2 == 0 else "assistant", content)
    m.on_message("user", followup)
    check = m.check_answer("looks fine")
    assert check.action == action
    if action == "retry":
        assert "diagnose" in check.correction
