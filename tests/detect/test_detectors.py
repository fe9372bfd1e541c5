"""Every detector and breaker: a stuck episode it must catch, and a look-alike it must leave alone."""

from __future__ import annotations

import pytest
from episode_steps import describe, flags_by, msg, run, tool
from hypothesis import given, settings
from hypothesis import strategies as st

from loopscope.detect import (
    DEFAULT_DETECTORS,
    Budgets,
    EpisodeMonitor,
    Policy,
    ToolCall,
    ToolResult,
)
from loopscope.detect.fingerprint import output_hash
from loopscope.detect.monologue import chanted, pieces
from loopscope.detect.policy import DEFAULT_NO_PROGRESS_K

LONG_Q = "find every user in the accounts database created before 2020 who is still active"
ORDERS = "orders 1 and 2 are late"
ERROR = "Error: permission denied for prod"
W = {"kind": "write"}


def _cycle(tools: str, rounds: int, *, learn: bool = False) -> list[dict]:
    steps = []
    for r in range(rounds):
        for i, name in enumerate(tools):
            suffix = f" round {r} fact {r * 7 + i}" if learn else ""
            steps.append(tool(f"tool_{name}", {"q": i}, f"{name} result words here{suffix}"))
    return steps


def _edits(n: int) -> list[dict]:
    forward = {"path": "calc.py", "old_str": "return a + b", "new_str": "return a - b"}
    back = {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"}
    return [
        tool("str_replace_editor", forward if i % 2 == 0 else back, "The file calc.py was edited.")
        for i in range(n)
    ]


def _fail(name: str, i: int) -> dict:
    return tool(name, {"attempt": i}, f"Error: {name} refused request {i}", status="error")


# (steps, first_loop_step, detector, kind, first flag step (a warning), first kill step, options)
# fmt: off
LOOPS = [
    pytest.param(
        [tool("search_orders", {"q": "late"}, ORDERS)] * 6,
        2, "exact_repeat", "exact_repeat", 2, 3, {}, id="exact_repeat",
    ),
    pytest.param(
        [
            tool("read", {"p": "a"}, "alpha text one"),
            tool("ls", {}, "a.txt b.txt c.txt"),
            tool("read", {"p": "a"}, "alpha text one"),
            tool("ls", {}, "a.txt b.txt c.txt"),
            tool("read", {"p": "a"}, "alpha text one"),
        ],
        4, "exact_repeat", "exact_repeat", 4, None, {}, id="window-repeat-no-progress",
    ),
    pytest.param(
        [tool("sql", {"query": LONG_Q + tail}, "no rows matched the query") for tail in "  !?.,"],
        2, "fuzzy_repeat", "param_jitter", 2, 4, {}, id="fuzzy_repeat",
    ),
    # (tool_a's third identical read is warned at 4 and changes nothing: the cycle, seen at 5,
    # starts a rung up and is blocked there)
    pytest.param(_cycle("ab", 5), 4, "oscillation", "oscillation", 5, 5, {}, id="osc-2"),
    # (warned at 6, tool_a; tool_b blocked at 7; the cycle, complete at 8, starts at block)
    pytest.param(_cycle("abc", 3), 5, "oscillation", "oscillation", 8, 8, {}, id="osc-3"),
    pytest.param(_edits(6), 2, "edit_revert", "oscillation", 3, 4, {}, id="edit-revert"),
    pytest.param(  # cat then tail of one unchanged file, never with the same arguments twice
        [tool(name, {"path": "config.yaml", "why": f"check {r} {name}"}, text)
         for r in range(5)
         for name, text in (("cat", "port: 8080\nhost: 0.0.0.0\nworkers: 4"),
                            ("tail", "workers: 4"))],
        # (cat's stagnation is warned at 4 and changes nothing: the cycle starts at its second
        # warning, 5, and is stopped at 6)
        3, "state_cycle", "oscillation", 5, 6, {}, id="state-cycle",
    ),
    pytest.param(
        [tool("read_file", {"path": "a.py", "offset": o}, "def main(): return 42")
         for o in (0, 1, 0, 1, 0, 1)],
        2, "output_stagnation", "param_jitter", 2, 4, {}, id="param_jitter",
    ),
    pytest.param(
        [tool(n, {"q": "x"}, "the same three words back") for n in ("grep", "find", "search")],
        2, "output_stagnation", "output_stagnation", 2, None, {}, id="output_stagnation",
    ),
    pytest.param(
        [
            tool("deploy", {"env": "prod"}, ERROR, status="error"),
            tool("ls", {}, "a.txt b.txt c.txt"),
            tool("deploy", {"env": "prod"}, ERROR, status="error"),
            tool("cat", {"p": "a.txt"}, "hello from the file"),
            tool("deploy", {"env": "prod"}, ERROR, status="error"),
        ],
        4, "repeat_same_error", "repeat_same_error", 4, None, {}, id="same_error-with-work-between",
    ),
    pytest.param(
        [tool("deploy", {"env": "prod"}, f"Error: deploy failed at line {n} after {n}.2s",
              status="error") for n in range(20, 26)],
        2, "repeat_same_error", "repeat_same_error", 2, 3, {}, id="same_error-varying-text",
    ),
    pytest.param(
        [tool("deploy", {"env": e}, "Error: something went wrong", status="error") for e in "abcd"],
        2, "repeat_same_error", "repeat_same_error", 2, None, {}, id="same_error-args-warn",
    ),
    pytest.param(
        [
            tool("list_items", {"q": "x", "cursor": "p1"}, '{"items":[1,2],"next_cursor":"p2"}'),
            tool("list_items", {"q": "x", "cursor": "p2"}, '{"items":[3,4],"next_cursor":"p2"}'),
            tool("list_items", {"q": "x", "cursor": "p2"}, '{"items":[3,4],"next_cursor":"p2"}'),
        ],
        2, "cursor_stuck", "cursor_stuck", 2, None, {}, id="cursor_stuck",
    ),
    pytest.param(
        [tool("get_operation_status", {"id": "op1"}, "RUNNING", kind="poll", t=i * 100.0)
         for i in range(8)],
        4, "poll_timeout", "poll_timeout", 4, 5, {}, id="poll-deadline",
    ),
    pytest.param(
        [tool("get_operation_status", {"id": "op1"}, "RUNNING", kind="poll", t=i * 10.0,
              deadline_s=25) for i in range(6)],
        3, "poll_timeout", "poll_timeout", 3, 4, {}, id="poll-own-deadline",
    ),
    pytest.param(
        [tool("get_job", {"id": "j1"}, "status: RUNNING", kind="poll", t=i * 30.0) for i in range(8)],
        3, "poll_timeout", "poll_timeout", 4, 5,
        {"task": "Start the export; it completes in under 60 seconds."}, id="poll-task-deadline",
    ),
    pytest.param(
        [tool("get_operation_status", {"id": "op1"}, "RUNNING", kind="poll", t=float(i * 6))
         for i in range(32)],
        30, "poll_timeout", "poll_timeout", 30, 31,
        {"task_type": "polling", "task": "It may take a few hours."}, id="poll-unchanged",
    ),
    pytest.param(
        [msg("user", "book it"), *[msg("assistant", f"I will book it now ({i})") for i in range(4)]],
        3, "monologue", "monologue", 3, 4, {}, id="monologue",  # (warn, then stop: a message's
        # stop acts at the next model turn, where a repeated call would be blocked)
    ),
    pytest.param(
        [msg("user", "book it"),
         msg("assistant", "I am checking the order status for you right now. " * 4)],
        1, "monologue", "monologue", 1, None, {}, id="monologue-chant",
    ),
    pytest.param(
        [msg("user", "book it"), msg("assistant", "I will now check the order status for you."),
         msg("user", "ok"), msg("assistant", "I will now check the order status for you."),
         msg("user", "please do"), msg("assistant", "I will now check the order status for you!")],
        5, "monologue", "monologue", 5, None, {}, id="monologue-echo-across-turns",
    ),
    pytest.param(
        [
            tool("create_order", {"sku": "A1"}, "", status="timeout", **W),
            tool("create_order", {"sku": "A1"}, "order 77 created", **W),
        ],
        1, "write_duplicate", "write_duplicate", 1, 1, {}, id="write-retry-after-timeout",
    ),
    pytest.param(
        [tool("create_order", {"sku": "A1"}, "Error: 409 order already exists", **W)] * 4,
        1, "write_duplicate", "write_duplicate", 1, 2, {}, id="write-again-no-new-state",
    ),
    pytest.param(
        [
            tool("create_order", {"sku": "A1"}, "", status="timeout", tool_call_id="w1", **W),
            tool("get_order", {"sku": "A1"}, "order 77 exists", reconciles="w1", found=True),
            tool("create_order", {"sku": "A1"}, "order 78 created", **W),
        ],
        2, "write_duplicate", "write_duplicate", 2, 2, {}, id="write-after-found",
    ),
    pytest.param(
        [tool("search", {"q": "start"}, "three result words"),
         *[_fail(f"svc_{i}", i) for i in range(8)]],
        6, "no_progress", "no_progress", 6, 8, {"task_type": "lookup"}, id="no_progress",
    ),
]
# fmt: on

CASE = {p.id: p.values[0] for p in LOOPS}


@pytest.mark.parametrize(("steps", "first", "detector", "kind", "at", "kill_at", "meta"), LOOPS)
def test_stuck_episode_is_flagged(steps, first, detector, kind, at, kill_at, meta):
    """A detector that misses its loop shape, fires too early, mislabels it, kills at the
    first sign or never climbs fails here."""
    report = run(steps, loop=True, first_loop_step=first, **meta)
    hits = flags_by(report, detector)
    assert hits, f"{detector} did not fire:\n{describe(report)}"
    flag = hits[0]
    # only an UNKNOWN write is acted on at once, and a condition that a warning changed nothing
    # for starts a rung up
    first_sign = "kill" if kill_at == at else "warn"
    assert (flag.step, flag.kind, flag.severity) == (at, kind, first_sign), describe(report)
    kills = [f.step for f in hits if f.severity == "kill"]
    assert kills[:1] == ([kill_at] if kill_at is not None else []), describe(report)
    assert all(f.step >= first for f in report.flags), "an alarm before the loop began"
    opening = report.flags[0]  # (the run's first sign is a warning but for an UNKNOWN write)
    assert opening.severity == "warn" or opening.detector == "write_duplicate", describe(report)


def _poll(outputs: list[str], **extra) -> list[dict]:
    return [
        tool("get_operation_status", {"id": "op1"}, o, t=10.0 * i, **extra)
        for i, o in enumerate(outputs)
    ]


# fmt: off
LEGIT = [
    pytest.param(_poll(["RUNNING", "RUNNING", "RUNNING", "DONE"], kind="poll"), {}, id="poll-declared"),
    pytest.param(_poll(["RUNNING", "RUNNING", "RUNNING", "DONE"]), {}, id="poll-undeclared-status"),
    pytest.param(_poll([f"progress {p}% of the job" for p in range(10, 80, 10)]), {}, id="poll-by-shape"),
    pytest.param(
        [tool("get_price", {"symbol": "ACME"}, f"ACME last trade {100 + i * 0.25:.2f} USD",
              t=60.0 * i) for i in range(20)],
        {}, id="price-watch-changes-every-time",
    ),
    pytest.param(
        [tool("get_export", {"id": "e1"}, "state: PENDING", kind="poll", t=120.0 * i)
         for i in range(7)] + [tool("get_export", {"id": "e1"}, "state: DONE", kind="poll", t=840.0)],
        {"task": "Export the ledger. It usually takes 10-15 minutes."}, id="poll-inside-task-window",
    ),
    pytest.param(
        [tool("check_background_tasks", {}, "task 1 still running", t=10.0 * i) for i in range(10)],
        {}, id="check_background_tasks",
    ),
    pytest.param(
        [tool("list_items", {"q": "x", "page": p}, f'{{"items":[{2 * p},{2 * p + 1}],"next":{p + 1}}}')
         for p in range(1, 7)],
        {}, id="pagination-advances",
    ),
    pytest.param(
        [
            tool("create_order", {"sku": "A1"}, "", status="timeout", tool_call_id="w1", **W),
            tool("get_order", {"sku": "A1"}, "no such order", reconciles="w1", found=False),
            tool("create_order", {"sku": "A1"}, "order 77 created", **W),
        ],
        {}, id="write-retry-after-reconcile",
    ),
    pytest.param(
        [
            tool("create_order", {"sku": "SKU-A1"}, "", status="timeout", **W),
            tool("list_orders", {"sku": "SKU-A1"}, "no orders for SKU-A1 yet"),
            tool("create_order", {"sku": "SKU-A1"}, "order 77 created", **W),
        ],
        {}, id="write-retry-after-implicit-lookup",
    ),
    pytest.param(
        [
            tool("charge", {"amount": 30, "idempotency_key": "k-1"}, "", status="timeout", **W),
            tool("charge", {"amount": 30, "idempotency_key": "k-1"}, "charge ch_1 ok", **W),
        ],
        {}, id="write-retry-under-callers-key",
    ),
    pytest.param(
        [
            tool("create_order", {"sku": "A1"}, "order 77 created", **W),
            tool("create_order", {"sku": "A1"}, "order 78 created", intent="duplicate", **W),
        ],
        {}, id="write-intended-duplicate",
    ),
    pytest.param(
        [tool("create_ticket", {"title": "placeholder"}, f"ticket T-{n} created", **W)
         for n in (101, 102, 103)],
        {"task": "Create three identical placeholder tickets titled placeholder."},
        id="writes-the-task-asks-for",
    ),
    pytest.param(
        [msg("user", "Email the invoice to ana@example.com"),
         tool("send_email", {"to": "ana@example.com", "doc": "inv-7"}, "sent", **W),
         msg("assistant", "Sent."), msg("user", "She did not get it, send it again please"),
         tool("send_email", {"to": "ana@example.com", "doc": "inv-7"}, "sent", **W),
         msg("assistant", "Sent again.")],
        {}, id="write-a-new-user-turn-asks-for",
    ),
    pytest.param(
        [tool("create_order", {"sku": s}, f"order {n} created", **W) for n, s in enumerate("ABC")],
        {}, id="distinct-writes",
    ),
    pytest.param(
        [*_edits(2),
         tool("str_replace_editor", {"path": "calc.py", "old_str": "return a + b",
                                     "new_str": "return int(a) + int(b)"}, "edited"),
         tool("run_tests", {}, "12 passed")],
        {}, id="one-revert-then-a-new-fix",
    ),
    pytest.param(
        [tool("search", {"q": f"query {i}"}, "[]") for i in range(14)],
        {"task_type": "lookup"}, id="sweep-of-empty-searches",
    ),
    pytest.param(
        [tool("search_flights", {"route": r}, "No flights found for this route.")
         for r in ("JFK-SFO", "JFK-OAK", "EWR-SFO", "LGA-SJC", "EWR-OAK", "JFK-SJC", "LGA-SFO")],
        {"task_type": "lookup"}, id="sweep-nothing-found",
    ),
    pytest.param(
        [x for i in range(6) for x in (
            tool("condense_context", {}, "context condensed to the key facts so far"),
            tool("read_file", {"path": f"src/mod{i}.py"}, f"module {i} defines handler_{i} and util_{i}"),
        )],
        {"task_type": "coding"}, id="housekeeping-between-progress",
    ),
    pytest.param(
        [tool("fetch", {"url": "u"}, "503 Service Unavailable, try again later", status="error"),
         tool("fetch", {"url": "u"}, "503 Service Unavailable, try again later", status="error"),
         tool("fetch", {"url": "u"}, "page body with the answer in it")],
        {}, id="flaky-call-recovers",
    ),
    pytest.param(
        [tool("sql", {"query": q}, f"{n} rows") for n, q in enumerate([
            LONG_Q,
            "list all invoices issued in march that were paid late by more than thirty days",
            "count the products in the warehouse table grouped by supplier and by category",
            "select distinct shipping regions from the orders table where the total exceeds 500",
        ])],
        {}, id="long-args-differ",
    ),
    pytest.param(
        [tool("sql", {"query": LONG_Q + f" in region {r}"}, f"region {r}: {n} active users found")
         for n, r in enumerate("NESW")],
        {}, id="fuzzy-sweep-that-learns",
    ),
    pytest.param(_cycle("ab", 4, learn=True), {}, id="alternation-that-learns"),
    pytest.param(
        [tool("deploy", {"env": e}, f"Error: environment {e} not found", status="error")
         for e in ("a", "b", "c")],
        {}, id="different-errors",
    ),
    pytest.param([tool("search_orders", {"q": "late"}, ORDERS)] * 2, {}, id="one-repeat-only"),
    pytest.param([tool(n, {"x": 1}, "OK") for n in ("save", "flush", "sync", "close")], {},
                 id="short-statuses"),
    pytest.param(
        [msg("user", "go"), msg("assistant", "plan"), msg("assistant", "more plan"),
         tool("ls", {}, "a b c"), msg("assistant", "done"), msg("user", "thanks"),
         msg("assistant", "you are welcome")],
        {}, id="talk-between-tools",
    ),
    pytest.param(
        [msg("user", "plan the migration"),
         msg("assistant", "\n".join(
             f"Step {i}: move the {t} table to the new cluster and verify row counts."
             for i, t in enumerate(["users", "orders", "items", "invoices"])))],
        {}, id="long-message-with-a-repeated-shape",
    ),
]
# fmt: on


@pytest.mark.parametrize(("steps", "meta"), LEGIT)
def test_legitimate_look_alike_stays_quiet(steps, meta):
    """A detector that cannot tell real work from its loop shape (a false kill) fails here."""
    report = run(steps, loop=False, **meta)
    assert report.flags == (), describe(report)
    assert report.stop is None


def test_every_default_detector_is_exercised():
    """A detector added to DEFAULT_DETECTORS without a stuck case above fails here."""
    covered = {p.values[2] for p in LOOPS}
    assert {d.name for d in DEFAULT_DETECTORS} <= covered


@pytest.mark.parametrize(
    ("steps", "detector", "needles"),
    [
        (
            [tool("search_orders", {"q": "late"}, ORDERS)] * 3,
            "exact_repeat",
            ("search_orders", "3 times", '{"q":"late"}'),
        ),
        (CASE["window-repeat-no-progress"], "exact_repeat", ("read", "3 times", '{"p":"a"}')),
        (
            CASE["same_error-with-work-between"],
            "repeat_same_error",
            ("deploy", "3 times", '{"env":"prod"}', "error"),
        ),
        (CASE["same_error-args-warn"], "repeat_same_error", ("deploy", "3 times", '{"env":"c"}')),
        (CASE["fuzzy_repeat"], "fuzzy_repeat", ("sql", "3 times", "find every user")),
        (CASE["osc-2"], "oscillation", ("tool_a", "tool_b", "3 full cycles", '{"q":1}')),
        (CASE["edit-revert"], "edit_revert", ("str_replace_editor", "calc.py", "2 full")),
        (CASE["poll-deadline"], "poll_timeout", ("get_operation_status", '{"id":"op1"}', "300")),
        (
            CASE["write-again-no-new-state"],
            "write_duplicate",
            ("create_order", '{"sku":"A1"}', "step 0"),
        ),
    ],
)
def test_correction_names_tool_count_and_arguments(steps, detector, needles):
    """A vague correction ("stop looping") that the model cannot act on fails here."""
    message = flags_by(run(steps), detector)[0].message
    for needle in needles:
        assert needle in message


def _spin(m: EpisodeMonitor, n: int) -> list:
    """Drive ``n`` identical reads as a live enforce guard would (blocked calls do not run)."""
    decisions = []
    for i in range(n):
        d = m.before_call(ToolCall("search_orders", {"q": "late"}, call_id=f"c{i}"))
        decisions.append(d)
        ran = d.action in ("allow", "warn")
        m.after_call(
            ToolResult(ORDERS if ran else None, status="ok" if ran else "blocked", call_id=f"c{i}")
        )
    return decisions


def test_block_hands_back_the_cached_result_with_the_correction():
    """A block that returns silence instead of the last result plus a correction fails here."""
    d = _spin(EpisodeMonitor(), 4)[-1]
    assert d.action == "block" and d.is_kill
    assert d.cached_output_hash == output_hash(ORDERS)
    assert d.correction is not None and "search_orders" in d.correction
    assert d.diagnostic is not None and d.diagnostic["decided_by"] == "exact_repeat"


def test_ladder_warns_then_blocks_then_stops():
    """A guard that kills at the first sign, or stays silent while the loop goes on, fails."""
    m = EpisodeMonitor()
    decisions = _spin(m, 6)
    assert [d.action for d in decisions] == ["allow", "allow", "warn", "block", "stop", "stop"]
    assert [f.rung for d in decisions for f in d.new_flags] == [0, 1, 2]
    assert m.summary()["stop_reason"] == "repeated_tool_call"
    diag = m.stopped.diagnostic
    assert diag["terminated_by"] == "repeated_tool_call"
    assert diag["last_progress_step"] == 0 and "No progress" in diag["hint"]


def test_progress_after_a_warning_puts_the_condition_back_at_the_bottom():
    """A ladder that climbs across progress (a kill of a run that learned something) fails."""
    m = EpisodeMonitor()
    _spin(m, 3)  # warned at the third
    m.before_call(ToolCall("get_order", {"id": 1}, call_id="n"))
    m.after_call(ToolResult("order 1: shipped yesterday by courier", call_id="n"))
    again = _spin(m, 1)[0]
    assert again.action == "allow"


def test_a_new_user_turn_starts_a_new_intent():
    """Repeats counted across a new request from the user fail here."""
    m = EpisodeMonitor()
    _spin(m, 4)  # warned, then blocked
    m.on_message("user", "now look again please, I just changed something")
    assert [d.action for d in _spin(m, 3)] == ["allow", "allow", "warn"]


@pytest.mark.parametrize(
    ("rungs", "actions"),
    [
        (["warn", "warn", "block", "stop"], ["warn", "warn", "block", "stop"]),
        (["block", "stop"], ["block", "stop", "stop", "stop"]),
        (["warn"], ["warn", "warn", "warn", "warn"]),
    ],
)
def test_ladders_are_configurable_per_detector(rungs, actions):
    """A policy's rungs that do not reach the monitor fail here."""
    m = EpisodeMonitor(Policy(ladders={"exact_repeat": rungs}))
    assert [d.action for d in _spin(m, 6)][2:] == actions


def test_ladders_are_configurable_per_task_type():
    """Task-type rungs that do not win over the detector's own fail here."""
    policy = Policy(task_ladders={"coding": {"exact_repeat": ["warn"]}})
    assert _spin(EpisodeMonitor(policy, task_type="coding"), 5)[-1].action == "warn"
    assert _spin(EpisodeMonitor(policy, task_type="lookup"), 5)[-1].action == "stop"


def test_actions_cap_the_ladder():
    """``actions: {detector: "warn"}`` that still lets the detector kill fails here."""
    m = EpisodeMonitor(Policy(actions={"exact_repeat": "warn"}))
    assert {d.action for d in _spin(m, 8)} == {"allow", "warn"}


@pytest.mark.parametrize("task_type", [*DEFAULT_NO_PROGRESS_K, None, "unheard-of"])
def test_no_progress_breaker_trips_at_k_for_the_task_type(task_type):
    """A breaker that ignores the task type's K (or counts a repeat, not no-progress) fails.
    (With more ignored calls allowed than the breaker's ladder has rungs, the stop is the
    breaker's own; with the default, the ignored warnings stop the run at the same call.)"""
    k = Policy().k_for(task_type)
    report = run(
        [tool("search", {"q": "start"}, "three result words"),
         *[_fail(f"svc_{i}", i) for i in range(k + 3)]],
        Policy(ignored_calls=3),
        task_type=task_type,
    )
    default = run(
        [tool("search", {"q": "start"}, "three result words"),
         *[_fail(f"svc_{i}", i) for i in range(k + 3)]],
        task_type=task_type,
    )
    assert default.stop is not None and default.stop.step == k + 2, describe(default)
    breaker = flags_by(report, "no_progress")
    assert [(f.step, f.action) for f in breaker][:3] == [
        (k, "warn"), (k + 1, "warn"), (k + 2, "stop")], describe(report)
    diag = report.stop.diagnostic
    assert diag["terminated_by"] == "no_progress"
    assert (diag["limit"], diag["consumed"], diag["last_progress_step"]) == (k, k + 2, 0)
    assert diag["hint"] == f"No progress in the last {k + 2} tool calls."


def _drive_calls(m: EpisodeMonitor, n: int, *, status: str = "ok") -> list:
    decisions = []
    for i in range(n):
        d = m.before_call(ToolCall("deploy", {"v": i}, call_id=f"c{i}", t=20.0 * i))
        decisions.append(d)
        if d.action == "stop":
            break
        m.after_call(
            ToolResult(
                f"result number {i} of the deploy",
                status=status,  # type: ignore[arg-type]
                call_id=f"c{i}",
                tokens_in=30,
                tokens_out=10,
                cost=0.2,
            )
        )
    return decisions


@pytest.mark.parametrize(
    ("budgets", "status", "budget_type", "limit", "consumed"),
    [
        (Budgets(tool_calls=3), "ok", "total_tool_calls", 3, 3),
        (Budgets(retries_per_tool=2), "error", "retries_per_tool", 2, 2),
        (Budgets(wall_clock_s=60), "ok", "wall_clock_s", 60, 60),
        (Budgets(tokens=100), "ok", "tokens", 100, 120),
        (Budgets(cost_usd=0.5), "ok", "cost_usd", 0.5, 0.6),
    ],
)
def test_budget_stops_before_the_call(budgets, status, budget_type, limit, consumed):
    """A budget checked after the call runs (or not at all) lets a 4th call start and fails."""
    m = EpisodeMonitor(Policy(budgets=budgets))
    decisions = _drive_calls(m, 10, status=status)
    assert [d.action for d in decisions] == ["allow", "allow", "allow", "stop"]
    diag = decisions[-1].diagnostic
    assert diag["terminated_by"] == "budget" and diag["budget_type"] == budget_type
    assert diag["limit"] == limit and diag["consumed"] == pytest.approx(consumed)
    assert {"last_progress_step", "hint"} <= diag.keys()
    assert decisions[-1].stop_reason == "budget"


def test_model_turn_budget_is_checked_before_the_model_call():
    """A model-turn budget that lets one turn too many start fails here."""
    m = EpisodeMonitor(Policy(budgets=Budgets(model_turns=2)))
    actions = []
    for _ in range(3):
        d = m.before_model_call(t=0.0)
        actions.append(d.action)
        if d.action == "allow":
            m.after_model_call(tokens=5)
    assert actions == ["allow", "allow", "stop"]
    assert d.diagnostic["budget_type"] == "model_turns" and d.diagnostic["consumed"] == 2
    assert d.stop_reason == "budget"


def test_no_budget_no_round_cap_by_default():
    """A hidden default round cap (5 rounds kills real work) fails here."""
    m = EpisodeMonitor()
    decisions = _drive_calls(m, 40)
    assert all(d.action == "allow" for d in decisions) and len(decisions) == 40


def test_write_retry_after_reconcile_reuses_the_idempotency_key():
    """A retry keyed by a fresh key (so the server cannot dedupe it) fails here."""
    m = EpisodeMonitor(episode_id="run7")
    first = m.before_call(ToolCall("create_order", {"sku": "A1"}, call_id="w1", kind="write"))
    assert m.after_call(ToolResult("", status="timeout", call_id="w1")).write_status == "unknown"
    assert m.summary()["unknown_writes"] == 1
    assert m.before_call(ToolCall("create_order", {"sku": "A1"}, kind="write")).action == "block"
    m.after_call(ToolResult(status="blocked"))
    assert m.reconcile("w1", found=False)
    retry = m.before_call(ToolCall("create_order", {"sku": "A1"}, call_id="w3", kind="write"))
    assert retry.action == "allow"
    assert retry.idempotency_key == first.idempotency_key == "run7:create_order#1"
    assert m.after_call(ToolResult("order 77", call_id="w3")).write_status == "ok"
    assert m.summary()["unknown_writes"] == 0


def test_reconcile_found_blocks_the_retry_and_hands_back_the_recorded_result():
    """A retry allowed after the lookup proved the write happened (a double order) fails here."""
    m = EpisodeMonitor(episode_id="run7")
    m.before_call(ToolCall("create_order", {"sku": "A1"}, call_id="w1", kind="write"))
    m.after_call(ToolResult("", status="timeout", call_id="w1"))
    m.before_call(ToolCall("get_order", {"sku": "A1"}, call_id="r1", reconciles="w1", found=True))
    m.after_call(ToolResult("order 77 exists", call_id="r1"))
    retry = m.before_call(ToolCall("create_order", {"sku": "A1"}, call_id="w2", kind="write"))
    assert retry.action == "block" and retry.reason == "write_duplicate"
    assert retry.cached_output_hash is not None and "it happened" in retry.correction
    m.after_call(ToolResult(status="blocked", call_id="w2"))
    again = ToolCall("create_order", {"sku": "A1"}, call_id="w3", kind="write", intent="duplicate")
    assert m.before_call(again).action == "allow"


def _chanted_by_the_plain_rule(text: str, min_words: int, min_count: int) -> tuple[str, int]:
    """Monologue's chant rule spelled plainly: three kinds of break counted, the message
    split on them one by one, every sentence counted."""
    import re
    from collections import Counter

    text = text[:20_000]
    if text.count(". ") + text.count("\n") + text.count("! ") < min_count - 1:
        return "", 0
    parts = [
        p for p in text.replace("\n", ". ").replace("! ", ". ").split(". ")
        if len(p) > min_words * 2
    ]
    if len(parts) - len(set(parts)) < 2:
        return "", 0
    counts = Counter(
        " ".join(words)
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", text)
        if len(words := sentence.lower().split()) >= min_words
    )
    total = sum(counts.values())
    if not total or (total - len(counts)) / total < 0.5:
        return "", 0
    return counts.most_common(1)[0]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["I will check the order status now", "Let me look again", "ok", "",
                 "Step one of the plan is to wait", "I will check the order status now."]
            ),
            st.sampled_from([". ", "! ", "\n", ".\n", " ", "? ", "!\n", "\n\n", ".. "]),
        ),
        max_size=12,
    ).map(lambda pieces: "".join(sentence + sep for sentence, sep in pieces)),
    st.integers(2, 4),
)
@settings(max_examples=400, deadline=None)
def test_chant_quick_look_finds_what_the_plain_rule_finds(text, min_count):
    """The quick look at a message is a faster spelling of the chant rule, not another
    rule."""
    assert chanted(text, 3, min_count) == _chanted_by_the_plain_rule(text, 3, min_count)


@given(st.lists(st.sampled_from([".", "!", " ", "\n", "a", "?"]), max_size=16).map("".join))
def test_a_message_is_cut_where_the_break_pattern_cuts_it(text: str) -> None:
    """``pieces`` (replace, then split) cuts where a pattern of the three breaks does."""
    import re

    assert pieces(text) == re.split(r"\. |\n|! ", text)
