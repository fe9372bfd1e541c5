"""Healthy runs that detection v4 warned (issue 28: at most 5 false warnings), each kept as an
authored case of its situation: none of them may be flagged, and the loop beside it still is.
"""

from __future__ import annotations

import json

from episode_steps import describe, msg, run, tool

from loopscope.detect.answers import error_shape
from loopscope.detect.kinds import infer_kind
from loopscope.detect.task import task_deadline

ROLLOUT = ("Waiting for rollout of statefulset/db: {n} of 4 pods updated...\n"
           "error: timed out waiting for the condition")


def test_an_errors_shape_keeps_its_progress_figures() -> None:
    assert error_shape("line 20 after 20.2s", {}) == error_shape("line 21 after 21.2s", {})
    assert error_shape(ROLLOUT.format(n=1), {}) != error_shape(ROLLOUT.format(n=2), {})


def test_a_rollout_answering_not_done_yet_as_an_error_progresses_as_its_figures_move() -> None:
    cmd = {"command": "sleep 40 && kubectl rollout status sts/db --timeout=5s"}
    counts = [0, 1, 1, 2, 2, 3, 3]
    steps = [tool("run", cmd, ROLLOUT.format(n=n), status="error", t=45.0 * (i + 1))
             for i, n in enumerate(counts)]
    steps.append(tool("run", cmd, 'statefulset rolling update complete 4 pods at revision',
                      t=45.0 * (len(counts) + 1)))
    report = run(steps, task="Roll the db statefulset out and confirm it.")
    assert report.flags == (), describe(report)
    stuck = [tool("run", cmd, ROLLOUT.format(n=1), status="error", t=45.0 * (i + 1))
             for i in range(8)]
    assert run(stuck).flags, "a rollout whose figure never moves is still a stalled poll"


def test_a_write_by_its_name_with_nothing_to_write_reads() -> None:
    assert infer_kind("write_stdin", {"session_id": 7, "chars": "", "yield_time_ms": 20000}) == (
        "read", "name")
    assert infer_kind("write_stdin", {"session_id": 7, "chars": "y\n"}) == ("write", "name")
    assert infer_kind("delete_record", {"id": 5}) == ("write", "name")  # (no text at all)


def test_empty_stdin_writes_to_a_running_build_are_polls_of_its_output() -> None:
    start = tool("exec_command", {"cmd": ["bash", "-lc", "make -j4 test"]},
                 "Process running with session ID 7\nOutput:\ncc -c a.c", t=2.0)
    poll = {"session_id": 7, "chars": "", "yield_time_ms": 20000}
    outs = ["cc -c b.c\ncc -c c.c", "ld -o app a.o b.o c.o", "running 40 tests\n....",
            "test result: ok. 40 passed\nProcess exited with code 0"]
    steps = [start] + [tool("write_stdin", poll, f"Output:\n{o}", t=25.0 * (i + 1))
                       for i, o in enumerate(outs)]
    report = run(steps, task="Build the project and run its tests.")
    assert report.flags == (), describe(report)
    hung = [start] + [tool("write_stdin", poll, "Output:\n", t=25.0 * (i + 1))
                      for i in range(20)]
    assert run(hung).flags, "a process that prints nothing for minutes is a poll past its time"


def test_a_polls_wait_restarts_in_each_new_user_turn() -> None:
    poll = {"queue": "backups", "state": "failed"}
    steps = [msg("user", "Each time I ping you, check the failed-backups queue and say QUEUE_OK "
                         "if it is empty.")]
    for n in range(6):
        if n:
            steps.append(msg("user", f"[ping 0{n}:00] check the queue again"))
        steps += [tool("list_jobs", poll, '{"jobs": []}', kind="poll", t=3600.0 * n + 2),
                  msg("assistant", "QUEUE_OK")]
    report = run(steps)
    assert report.flags == (), describe(report)
    within = [tool("list_jobs", poll, '{"jobs": []}', kind="poll", t=120.0 * n) for n in range(6)]
    assert run(within).flags, "unchanged for ten minutes in one turn is past the default deadline"


def test_a_span_of_work_the_task_states_from_now_is_an_explicit_limit() -> None:
    said = task_deadline("Over the next 30 minutes, check the deploy queue every 5 minutes.")
    assert said is not None and (said.seconds, said.explicit) == (1860.0, True)
    assert task_deadline("For the next hour, tell me about new alerts.").seconds == 3660.0
    assert task_deadline("Keep an eye on it during the next few days.") is None


def test_checks_on_the_schedule_the_task_states_are_not_a_loop_until_its_end() -> None:
    task = "For the next hour, look at the build queue every 10 minutes and report new failures."
    check = {"queue": "builds"}
    quiet = '{"queue": "builds", "depth": 4, "oldest": "b-18"}'
    steps = []
    for n in range(7):  # (checks at 0, 10, ... 60 minutes)
        steps += [tool("list_builds", check, quiet, t=600.0 * n + 1),
                  tool("sleep", {"seconds": 600}, "slept 600s", t=600.0 * n + 2)]
    report = run(steps, task=task)
    assert report.flags == (), describe(report)
    longer = steps + [tool("list_builds", check, quiet, t=600.0 * n + 1) for n in range(7, 10)]
    assert run(longer, task=task).flags, "checks long past the stated hour are a loop"


def test_a_failed_state_after_an_edit_is_a_check_of_the_edit_not_a_stuck_poll() -> None:
    cmd = {"command": "python /work/repro.py"}
    failed = "TypeError: unsupported operand\nProcess exited with code 1"

    def edit(n: int) -> dict:
        return tool("str_replace_editor", {"command": "str_replace", "path": "/work/calc.py",
                                           "old_str": f"v{n}", "new_str": f"v{n + 1}"},
                    "The file /work/calc.py has been edited.", t=20.0 * n + 10)

    steps = [tool("bash", cmd, "AssertionError: 3 != 4\nProcess exited with code 1", t=0.0)]
    for n in range(1, 5):
        steps += [edit(n), tool("bash", cmd, failed, t=20.0 * n + 15)]
    steps += [edit(5), tool("bash", cmd, "all 12 checks passed\nProcess exited with code 0",
                            t=125.0)]
    report = run(steps, task="Fix calc.py so that repro.py passes.")
    assert report.flags == (), describe(report)
    rerun = steps[:3] + [tool("bash", cmd, failed, t=40.0 + n) for n in range(4)]
    assert run(rerun).flags, "the same failed state again with nothing changed is stuck"


def test_a_rate_limit_refusing_a_batch_is_not_the_same_error_across_its_arguments() -> None:
    refused = json.dumps({"error": "rate_limited", "retryAfterSeconds": 30,
                          "message": "20 requests per minute"})
    ids = [f"inv-{n:04d}" for n in range(1, 7)]
    steps = [tool("get_invoice", {"invoice": i}, json.dumps({"id": i, "total": 10 * n}), t=1.0)
             for n, i in enumerate(ids[:2])]
    steps += [tool("get_invoice", {"invoice": i}, refused, status="error", t=3.0)
              for i in ids[2:]]
    steps += [tool("sleep", {"seconds": 30}, "slept 30s", t=4.0)]
    steps += [tool("get_invoice", {"invoice": i}, json.dumps({"id": i, "total": 7 * n}), t=35.0)
              for n, i in enumerate(ids[2:])]
    report = run(steps, task="Sum the totals of invoices 1 to 6.")
    assert report.flags == (), describe(report)
    invalid = json.dumps({"error": "invalid_invoice", "message": "unknown invoice id"})
    wrong = [tool("get_invoice", {"invoice": f"INV{n}"}, invalid, status="error", t=2.0 * n)
             for n in range(5)]
    assert run(wrong).flags, "the same plain error for argument after argument is still a sign"


def test_a_timeouterror_is_a_transient_failure_that_a_paced_retry_may_cure() -> None:
    cmd = {"command": "pytest tests/test_pool.py::test_acquire -q"}
    timeout = "E   TimeoutError: pool did not hand out a connection within 2.0s\n1 failed"
    steps = [tool("bash", cmd, timeout, status="error", t=12.0 * n) for n in range(3)]
    steps.append(tool("bash", cmd, "1 passed in 0.4s", t=36.0))
    report = run(steps, task="test_acquire timed out on CI: is it flaky?")
    assert report.flags == (), describe(report)
    hammered = [tool("bash", cmd, timeout, status="error", t=0.5 * n) for n in range(6)]
    assert run(hammered).flags, "a timeout retried without a pause is still counted"


def test_going_back_to_a_known_list_between_items_is_not_a_read_spin() -> None:
    listing = ("Results for 'desk lamp' (3): [L-100] Arc lamp $25 [L-200] Dome lamp $40 "
               "[L-201] Dome lamp $40")
    dome = "Dome lamp, brass, 40 W, E27 socket. Price: $40. Rating 4.1. [Buy] [< Back]"
    steps = [
        tool("search", {"q": "desk lamp"}, listing, t=1.0),
        tool("open", {"item": "L-100"}, "Arc lamp, black, 25 W. Price: $25. Rating 3.2. [< Back]",
             t=2.0),
        tool("click", {"target": "< Back"}, listing, t=3.0),
        tool("open", {"item": "L-200"}, dome, t=4.0),
        tool("click", {"target": "< Back"}, listing, t=5.0),
        tool("open", {"item": "L-201"}, dome, t=6.0),  # (a second listing of the same lamp)
        tool("click", {"target": "< Back"}, listing, t=7.0),
    ]
    report = run(steps, task="Find a desk lamp under $30.")
    assert report.flags == (), describe(report)
    spin = steps[:2] + [tool("search", {"q": "desk lamp"}, listing, t=3.0 + n) for n in range(3)]
    assert run(spin).flags, "the same search with the same results again and again spins"
