"""Detection v4, the loops the labelled sets showed it missing: each situation beside the
look-alike it must spare (issue 28)."""

from __future__ import annotations

import json
from typing import Any

from episode_steps import describe, msg, run, tool


def _kills(report: Any) -> list[tuple[int, str]]:
    return [(f.step, f.detector) for f in report.flags if f.severity == "kill"]


# -- a look-up that shows the record's reference and its amount found it --------------------------

CHARGE = {"customer": "cus_7Tq2", "amount": 18500, "currency": "eur",
          "payment_method": "pm_9XhQ2", "description": "ORD-55102", "confirm": True}


def _charge_then_look_up(listing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        tool("create_charge", CHARGE, "Error: request timed out after 30000 ms", status="timeout",
             kind="write", t=0.0),
        tool("list_charges", {"customer": "cus_7Tq2", "limit": 5}, json.dumps({"data": listing}),
             kind="read", t=40.0),
        tool("create_charge", CHARGE, json.dumps({"id": "ch_2", "status": "succeeded"}),
             kind="write", t=45.0),
    ]


def test_a_pending_charge_with_the_same_reference_and_amount_makes_a_retry_a_duplicate() -> None:
    """The amount is a number of five digits, too short to name a record alone; beside the
    reference it tells that the timed-out charge happened ("processing" is not "absent")."""
    found = _charge_then_look_up([
        {"id": "ch_1", "amount": 18500, "status": "processing", "description": "ORD-55102"},
        {"id": "ch_0", "amount": 4200, "status": "succeeded", "description": "ORD-54977"}])
    assert _kills(run(found)) == [(2, "write_duplicate")], describe(run(found))


def test_the_same_amount_on_another_reference_finds_nothing() -> None:
    other = _charge_then_look_up([
        {"id": "ch_0", "amount": 18500, "status": "succeeded", "description": "ORD-54977"}])
    assert _kills(run(other)) == [], describe(run(other))


# -- a call of unknown kind whose answer is only near the last one's acted --------------------------

BOXES = ("Agree to all", "Terms", "Privacy", "Marketing")


def _page(checked: tuple[bool, ...], clicked: int) -> str:
    boxes = "  ".join(f"[{31 + i}]{'☑' if on else '☐'} {name}"
                      for i, (on, name) in enumerate(zip(checked, BOXES, strict=True)))
    return f"Clicked button with index {31 + clicked}: {BOXES[clicked]}\n{boxes}"


def test_clicks_that_each_toggle_a_box_are_not_a_stagnating_answer() -> None:
    """Each click changes one box: the answers are near one another in words, not equal in
    what they say. A call whose kind nothing tells may act, so only an equal answer is
    stagnation for it."""
    states = [(True,) * 4, (False, False, True, True), (False, False, False, True), (False,) * 4]
    clicks = [tool("click_element_by_index", {"index": 31 + i}, _page(state, i), t=5.0 * i)
              for i, state in enumerate(states)]
    assert run(clicks).flags == (), describe(run(clicks))


def test_different_clicks_answering_the_same_page_still_stagnate() -> None:
    page = "The form was not submitted.\nPlease agree to the terms of service before you go on."
    clicks = [tool("click_element_by_index", {"index": 31 + i}, page, t=5.0 * i)
              for i in range(4)]
    assert [f.detector for f in run(clicks).flags][:1] == ["output_stagnation"], \
        describe(run(clicks))


# -- time spent on other work is not a wait: a read asked again after it is not a poll --------------

LOG = "\n".join(f"2024-06-12T02:{m:02d}:09Z INFO etl.load batch={m:04d} rows={9000 + m} table=fact"
                for m in range(40))


def test_a_log_read_again_after_other_reads_took_the_time_is_a_re_read() -> None:
    """cat, tail, cat of one unchanged log, 15 s apart: the 30 s since the first cat were
    spent on the tail, not waiting for the log to change; the third read of the same lines
    is stagnation, not a poll waiting in time."""
    steps = [tool("shell", {"command": "cat logs/etl.log"}, LOG, t=0.0),
             tool("shell", {"command": "tail -n 3000 logs/etl.log"}, LOG, t=15.0),
             tool("shell", {"command": "cat logs/etl.log"}, LOG, t=30.0)]
    report = run(steps)
    assert [(f.step, f.detector) for f in report.flags][:1] == [(2, "output_stagnation")], \
        describe(report)


def test_the_same_read_after_a_sleep_or_a_quiet_minute_is_waiting() -> None:
    slept = [tool("shell", {"command": "cat logs/etl.log"}, LOG, t=0.0),
             tool("sleep", {"seconds": 60}, "slept 60s", t=1.0),
             tool("shell", {"command": "tail -n 3000 logs/etl.log"}, LOG, t=62.0),
             tool("sleep", {"seconds": 60}, "slept 60s", t=63.0),
             tool("shell", {"command": "cat logs/etl.log"}, LOG, t=124.0),
             tool("sleep", {"seconds": 60}, "slept 60s", t=125.0),
             tool("shell", {"command": "cat logs/etl.log"}, LOG, t=186.0)]
    assert run(slept).flags == (), describe(run(slept))
    quiet = [tool("shell", {"command": "cat logs/etl.log"}, LOG, t=60.0 * n) for n in range(4)]
    assert run(quiet).flags == (), describe(run(quiet))


# -- edits that flip a check's result back and forth ------------------------------------------------

RESULT_A = "FAILED tests/test_urls.py::test_valid - 4 valid URLs rejected\n1 failed, 11 passed"
RESULT_B = "FAILED tests/test_urls.py::test_invalid - foo:bar@example.com accepted\n1 failed, 11 passed"


def _edit(n: int) -> dict[str, Any]:
    return tool("str_replace_editor", {"command": "str_replace", "path": "app/validators.py",
                                       "old_str": f"USER_RE = r'{n}'", "new_str": f"USER_RE = r'{n + 1}'"},
                "The file app/validators.py has been edited.", t=20.0 * n)


def _check(output: str, n: int) -> dict[str, Any]:
    return tool("execute_bash", {"command": "python -m pytest tests/test_urls.py -q"}, output,
                t=20.0 * n + 10)


def test_a_test_whose_result_flips_between_two_failures_after_each_edit_is_an_oscillation() -> None:
    """Fifteen different regexes, no edit the inverse of another, yet the test answers A, B,
    A, B: each edit undoes what the last one did to the result. Two full cycles after the
    changes are the loop; the third flip is stopped."""
    steps = []
    for n, result in enumerate([RESULT_A, RESULT_A, RESULT_B, RESULT_A, RESULT_B, RESULT_A,
                                RESULT_A]):
        steps += [_edit(n), _check(result, n)]
    report = run(steps)
    flips = [(f.step, f.action) for f in report.flags if f.detector == "edit_revert"]
    assert flips == [(9, "warn"), (11, "warn"), (13, "stop")], describe(report)


def test_edits_that_move_the_result_on_or_leave_it_alone_are_not_flipping() -> None:
    moving = [f"{k} failed, {12 - k} passed" for k in (4, 3, 3, 2, 1)] + ["12 passed"]
    steps = []
    for n, result in enumerate(moving):
        steps += [_edit(n), _check(result, n)]
    assert run(steps).flags == (), describe(run(steps))
    status = [tool("get_build", {"id": "b-71"}, s, t=30.0 * n)
              for n, s in enumerate(["state: queued", "state: running"] * 3)]
    assert not [f for f in run(status).flags if f.detector == "edit_revert"], describe(run(status))


# -- the same failure from code an edit moved -------------------------------------------------------

TRACE = ('Traceback (most recent call last):\n  File "/workspace/repro.py", line {n}, in <module>\n'
         '    test.run()\n  File "/workspace/repro.py", line {m}, in run\n'
         "django.core.exceptions.FieldError: Cannot resolve keyword '{word}' into field. "
         "Choices are: id, name\n[Command finished with exit code 1]")


def _script_edit(n: int) -> dict[str, Any]:
    return tool("str_replace_editor", {"command": "str_replace", "path": "/workspace/repro.py",
                                       "old_str": f"# step {n}", "new_str": f"# step {n + 1}\n"},
                "The file /workspace/repro.py has been edited.", t=20.0 * n)


def test_the_same_traceback_from_lines_an_edit_moved_keeps_counting() -> None:
    """Every edit moves the script by a line or two; the failure stays: the third is flagged
    (the edits change nothing for it)."""
    steps = []
    for n, (line, inner) in enumerate([(65, 51), (66, 52), (61, 48)]):
        steps += [_script_edit(n),
                  tool("execute_bash", {"command": "python /workspace/repro.py"},
                       TRACE.format(n=line, m=inner, word="book_set"), status="error",
                       t=20.0 * n + 10)]
    report = run(steps)
    assert [(f.step, f.detector, f.evidence) for f in report.flags] == [
        (5, "repeat_same_error", "repeat_same_error/calls:same+error:unchanged+kind:unknown")
    ], describe(report)


def test_another_failure_after_each_edit_is_work_going_on() -> None:
    steps = []
    for n, word in enumerate(["book", "book_set", "books"]):
        steps += [_script_edit(n),
                  tool("execute_bash", {"command": "python /workspace/repro.py"},
                       TRACE.format(n=65, m=51, word=word), status="error", t=20.0 * n + 10)]
    assert run(steps).flags == (), describe(run(steps))
    counts = []
    for n, failed in enumerate((3, 2, 1)):
        counts += [_script_edit(n),
                   tool("execute_bash", {"command": "pytest -q"},
                        f"tests/test_app.py:41: AssertionError\n{failed} failed, {9 - failed} passed",
                        status="error", t=20.0 * n + 10)]
    assert run(counts).flags == (), describe(run(counts))


# -- a brief handed back as a sub-agent's task is no new user turn ----------------------------------

BRIEF = ("You are a bounded implementer agent. Implement GET /api/exports/orders.csv as the brief "
         "in docs/export.md says, open a PR, then STOP and report the PR URL.")


def _spawn(n: int, prompt: str = BRIEF) -> dict[str, Any]:
    return tool("Task", {"description": "Implement the CSV export", "prompt": prompt,
                         "run_in_background": True},
                f"Async agent launched successfully.\nagentId: a{n}f0c2e9d (use this to check on "
                "progress)\nThe agent is working in the background.", t=10.0 * n)


def test_each_delegate_spawning_another_with_the_same_brief_is_a_duplicate() -> None:
    """The sub-agent's task is the brief the agent just sent: its own words handed back, not
    a person asking again, so the same spawn again is the same write again."""
    steps = [_spawn(0), msg("user", BRIEF), _spawn(1), msg("user", BRIEF), _spawn(2)]
    report = run(steps)
    assert [(f.step, f.detector, f.action) for f in report.flags] == [
        (2, "write_duplicate", "warn"), (4, "write_duplicate", "block")], describe(report)


def test_a_person_asking_in_other_words_starts_a_new_turn() -> None:
    steps = [_spawn(0), msg("user", "The agent crashed before it started. Please start it again "
                                    "with the same brief."), _spawn(1)]
    assert run(steps).flags == (), describe(run(steps))


# -- a plan restated word for word to each automatic nudge ----------------------------------------

PLAN = ("1. Create the migration 0043 adding the status enum with default active\n"
        "2. Backfill status from cancelled_at and pause_until for every row\n"
        "3. Add status to SubscriptionSerializer and allow the ?status= filter\n"
        "4. Write tests for the backfill and for the filter")
OPENINGS = ["Actually, I realize I should just start working now.",
            "OK, I think I should start; let me create the todo list.",
            "Right, execution mode from here on, as the user asked.",
            "Let me restate the plan once more before starting on it.",
            "OK, I will create the todo list and begin with the first step."]


def test_the_same_plan_under_other_openings_to_each_nudge_is_a_monologue() -> None:
    """Each answer to "[auto-continue]" opens with other words (word sets only ~65% alike)
    and restates the same four plan lines: the same message again, no tool called. (The
    first nudge is a new turn; the ones after it, the same words again, are not.)"""
    steps = [msg("user", "Execute the plan in PLAN.md."), msg("assistant", f"Plan:\n{PLAN}")]
    for opening in OPENINGS:
        steps += [msg("user", "[auto-continue] Continue with the task."),
                  msg("assistant", f"{opening}\n{PLAN}\nI'll create the todo list.")]
    report = run(steps)
    assert [(f.step, f.action) for f in report.flags] == [(7, "warn"), (9, "stop")], \
        describe(report)  # (the monologue ladder is warn → stop)


def test_a_summary_confirmed_again_in_the_next_user_turn_is_no_monologue() -> None:
    summary = ("- Reservation ID: YAX4DR and both passengers on it\n"
               "- Change: add 2 checked bags to the reservation\n"
               "- Cost: $0, covered by the Gold membership allowance")
    steps = [msg("user", "Add two checked bags to YAX4DR please."),
             msg("assistant", f"To confirm the action:\n{summary}\nShall I go ahead?"),
             msg("user", "Which card will you use for any future charge?"),
             msg("assistant", f"The Visa ending 9990, for this update:\n{summary}\nShall I?"),
             msg("user", "Yes, use the Visa ending 9990 and go ahead."),
             msg("assistant", f"Updating your reservation now:\n{summary}\nOne moment.")]
    assert run(steps).flags == (), describe(run(steps))


# -- a count that rose and then stopped has stalled -------------------------------------------------


def _count(n: int, t: float) -> dict[str, Any]:
    return tool("run_sql", {"sql": "SELECT count(*) FROM events_v2;"},
                f" count\n-------\n {n}\n(1 row)", kind="poll", t=t)


def _polls(counts: list[int], task: str) -> Any:
    steps = []
    for k, n in enumerate(counts):
        steps += [_count(n, 70.0 * k), tool("sleep", {"seconds": 60}, "slept 60s", t=70.0 * k + 5)]
    return run(steps, task=task)


TASK = "Start the events_v2 backfill and tell me when it has caught up (usually about 10 minutes)."


def test_a_row_count_that_rose_twice_and_then_froze_has_stalled() -> None:
    """0, 6.1M, 12.4M, then 12.4M on every poll: the job died. No status says "running", but
    a count that moved one way twice is on its way; frozen for half the default deadline
    (150 s) it has stalled, whatever the task estimated for the whole."""
    report = _polls([0, 6_104_113, 12_417_902] + [12_417_902] * 5, TASK)
    assert [(f.step, f.kind, f.action) for f in report.flags] == [
        (10, "output_stagnation", "warn"), (12, "output_stagnation", "block"),
        (14, "output_stagnation", "stop")], describe(report)


def test_a_count_still_rising_or_a_value_that_went_up_and_down_is_not_stalled() -> None:
    assert _polls([0, 100, 200, 200, 300, 400, 400, 500], TASK).flags == ()
    report = _polls([4210, 4188, 4230] + [4230] * 3, "Watch the queue depth and tell me if "
                    "it goes above 5000.")
    assert report.flags == (), describe(report)


# -- the same record made again in other words ------------------------------------------------------

TITLE = "QA acceptance: checkout retry fixes [SHOP-212]"


def _child(n: int, description: str, title: str = TITLE) -> dict[str, Any]:
    return tool("create_child_issue", {"parent_id": "SHOP-212", "title": title,
                                       "assignee": "qa-agent", "description": description},
                json.dumps({"id": f"SHOP-{213 + n}", "title": title, "status": "todo",
                            "assignee": "qa-agent", "parent_id": "SHOP-212", "created": True}),
                kind="write", t=6.0 * n)


def test_a_child_issue_made_again_with_its_description_reworded_is_a_duplicate() -> None:
    """The title, parent and assignee are the same; only the description is put in other
    words, and each answer shows the same issue but for its new id. The second copy is
    warned; a third, made after that warning, is stopped: the warning changed nothing and
    the answer shows one more copy of the same record."""
    steps = [_child(0, "Verify the three fixes: timeout now 45s, data-testid selectors, retry."),
             _child(1, "Verify the fixes of SHOP-212: timeout, selectors, retry on network only."),
             _child(2, "Verify SHOP-212 fixes (timeout, selectors, retry).")]
    report = run(steps)
    assert [(f.step, f.detector, f.action) for f in report.flags] == [
        (1, "write_duplicate", "warn"), (2, "write_duplicate", "stop")], describe(report)


def test_issues_with_other_titles_or_posts_to_one_channel_are_new_records() -> None:
    issues = [_child(n, f"From triage, item {n + 1}.", title)
              for n, title in enumerate(["Checkout button unresponsive on Safari",
                                         "CSV export drops rows with emoji",
                                         "Webhook retries ignore 410 Gone"])]
    assert run(issues).flags == (), describe(run(issues))
    posts = [tool("post_message", {"channel": "#deploys", "text": text},
                  json.dumps({"ok": True, "channel": "#deploys", "ts": f"171804960{n}.8103"}),
                  kind="write", t=30.0 * n)
             for n, text in enumerate(["Deploy of billing v2.14 started.",
                                       "Deploy of billing v2.14 is at 50% of the pods.",
                                       "Deploy of billing v2.14 finished."])]
    assert run(posts).flags == (), describe(run(posts))


def test_a_query_rewritten_around_the_same_missing_column_is_the_same_error() -> None:
    """A database that quotes the line of the query it stopped at (``LINE 1: …`` and a caret
    under the place) gives the same error for every rewording of the query: the quoted line
    is the query's own text, masked like any other echo. Errors that name other columns are
    other errors."""
    def failing(sql: str, column: str = "signup_date") -> dict[str, object]:
        first = sql.split("\n")[0]
        error = (f"ERROR:  column {column} does not exist\nLINE 1: {first[:60]}\n"
                 f"{' ' * (8 + first.find(column))}^")
        return tool("run_sql", {"sql": sql}, error, status="error", kind="read")

    queries = [f"SELECT {form} AS week, channel, count(*)\nFROM users GROUP BY 1, 2;"
               for form in ("date_trunc('week', signup_date)", "signup_date::date",
                            "to_char(signup_date, 'IYYY-IW')", "DATE_TRUNC('week', signup_date)")]
    report = run([failing(q) for q in queries])
    assert [(f.step, f.detector) for f in report.flags][:1] == [(2, "repeat_same_error")], (
        describe(report))
    columns = ("signup_date", "signup_day", "created_on", "joined_at")
    others = run([failing(q.replace("signup_date", c), c) for q, c in zip(queries, columns, strict=True)])
    assert not [f for f in others.flags if f.detector == "repeat_same_error"], describe(others)
