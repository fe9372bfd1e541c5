"""Detection v3's rules, one by one (issue 16): each shape beside the look-alike it must spare."""

from __future__ import annotations

import json
from typing import Any

from episode_steps import describe, msg, run, tool
from hypothesis import example, given, settings
from hypothesis import strategies as st

from loopscope.detect import EpisodeMonitor, Policy, ToolCall, ToolResult
from loopscope.detect.limits import IDLE_MESSAGES, NUDGE_CHARS, SAID_KEPT
from loopscope.detect.monologue import idle
from loopscope.detect.nudges import CONTINUE

POD = "NAME READY STATUS RESTARTS AGE\napi-7d9c 0/1 {state} {restarts} {age}m"


def _kills(report: Any) -> list[tuple[int, str]]:
    return [(f.step, f.detector) for f in report.flags if f.severity == "kill"]


# -- point 1: progress is new information ------------------------------------------------------


def test_a_shuffled_result_set_with_new_ids_is_no_progress_and_a_new_record_is() -> None:
    hits = [{"doc": f"kb-{n}", "title": f"page {n}"} for n in (112, 207, 318)]
    same = [
        tool("kb_search", {"q": q}, json.dumps({"search_id": f"s{i}", "took_ms": 10 + i,
                                                "hits": hits[i % 3:] + hits[: i % 3]}))
        for i, q in enumerate(["reset password", "how to reset my password",
                               "password reset steps", "reset a user password"])
    ]
    report = run(same)
    assert [f.kind for f in report.flags][:1] == ["param_jitter"], describe(report)
    grows = [
        tool("kb_search", {"q": q}, json.dumps({"hits": hits[: i + 1]}))
        for i, q in enumerate(["reset password", "reset password sso", "reset password mfa"])
    ]
    assert run(grows).flags == ()


def test_a_sweep_over_ids_with_the_same_short_verdict_is_exploring() -> None:
    stores = [tool("stock", {"store_id": sid}, "out of stock") for sid in (101, 102, 103, 104)]
    assert run(stores).flags == ()


# -- point 2: cycles by state -------------------------------------------------------------------


def test_git_status_and_reworded_commits_on_a_clean_tree_are_a_cycle() -> None:
    clean = "On branch main\nnothing to commit, working tree clean"
    steps = []
    for n, words in enumerate(["fix typo", "fix the typo", "typo fix", "Fix typo!", "fix: typo"]):
        steps += [tool("bash", {"command": "git status"}, clean),
                  tool("bash", {"command": f"git commit -am '{words} {n}'"}, clean)]
    report = run(steps)  # (git status, asked again and again, is also a read spin)
    assert report.flags and report.flags[0].step >= 3, describe(report)
    assert _kills(report), describe(report)
    tree = [tool("cat", {"path": "app.log"}, "start\nload\nOOM") if n % 2 == 0
            else tool("tail", {"path": "app.log", "lines": 3 + n}, "OOM") for n in range(8)]
    report = run(tree)
    assert "state_cycle" in {f.detector for f in report.flags}, describe(report)


# -- point 3: kinds -----------------------------------------------------------------------------


def test_an_undeclared_kind_and_where_it_came_from_reach_the_decision() -> None:
    m = EpisodeMonitor()
    cases = [
        (ToolCall("docs_lookup", {"q": "x"}, annotations={"readOnlyHint": True}),
         ("read", "annotation")),
        (ToolCall("http_request", {"method": "POST", "url": "https://api.x.io/v1/charges"}),
         ("write", "method")),
        (ToolCall("bash", {"command": "git push origin main"}), ("write", "name")),
        (ToolCall("browser_click", {"ref": "e12"}), (None, None)),
        (ToolCall("create_ticket", {"title": "t"}, kind="read"), ("read", "declared")),
    ]
    for call, expected in cases:
        decision = m.before_call(call)
        m.after_call(ToolResult("ok, done here"))
        assert (decision.kind, decision.kind_source) == expected, call


# -- points 4 and 5: writes -----------------------------------------------------------------------


def test_a_post_whose_connection_was_reset_is_unknown_and_its_retry_is_blocked() -> None:
    """Blocked at once when the evidence has never been wrong: a declared write, or any
    write under a policy without evidence caps. A kind guessed from the command line with an
    UNKNOWN read from the answer's text (the default caps, issue 28) only warns."""
    post = {"command": "curl -sS -X POST https://api.halden.io/v2/orders -d '{\"sku\": 1}'"}
    again = {"command": "curl -sSv -X POST https://api.halden.io/v2/orders -d '{\"sku\": 1}'"}
    steps = [tool("run_shell", post, "curl: (56) Connection reset by peer", status="error"),
             tool("run_shell", again, "HTTP/1.1 201 Created")]
    uncapped = Policy(evidence_caps={})
    assert _kills(run(steps, uncapped)) == [(1, "write_duplicate")], describe(run(steps))
    declared = [{**step, "kind": "write"} for step in steps]
    assert _kills(run(declared)) == [(1, "write_duplicate")], describe(run(declared))
    guessed = run(steps).flags
    assert [(f.step, f.action, f.evidence, f.capped) for f in guessed] == [
        (1, "warn", "write_duplicate/kind:guessed+outcome:parsed", True)]


def test_a_retry_under_the_callers_idempotency_header_passes() -> None:
    call = {"method": "POST", "url": "https://api.parcel.io/v1/shipments",
            "headers": {"Idempotency-Key": "order-88213-1"}}
    report = run([tool("http_request", call, "HTTP 502 Bad Gateway", status="error", t=0.0),
                  tool("http_request", call, "HTTP 201 Created", t=5.0)])
    assert report.flags == (), describe(report)


def test_a_look_up_that_finds_the_record_makes_another_copy_a_duplicate() -> None:
    wire = {"account": "acc_ops_usd_01", "amount": "18400.00", "reference": "BF-2291"}
    steps = [tool("initiate_wire", wire, "504 Gateway Timeout", status="timeout"),
             tool("list_wires", {"account": "acc_ops_usd_01"},
                  json.dumps({"wires": [{"amount": "18400.00", "reference": "BF-2291",
                                         "status": "processing"}]})),
             tool("initiate_wire", wire, json.dumps({"id": "wr_2", "status": "processing"}))]
    assert _kills(run(steps)) == [(2, "write_duplicate")]
    absent = [*steps[:1], tool("list_wires", {"account": "acc_ops_usd_01"}, "No wires found."),
              steps[2]]
    assert run(absent).flags == ()


def test_identical_writes_are_duplicates_unless_something_else_changed_between() -> None:
    create = [tool("create_customer", {"email": "ana@example.com"}, json.dumps({"id": f"cus_{n}"}))
              for n in range(4)]
    assert _kills(run(create)), "four identical creates, each a new id"
    staged = []
    for service in ("billing", "orders", "search"):
        staged += [tool("bash", {"command": f"sed -i s/v1/v2/ {service}/config.yaml"}, ""),
                   tool("bash", {"command": "git add -A"}, ""),
                   tool("bash", {"command": f"git commit -m 'bump {service}'"},
                        f"[main 1a2b] bump {service}\n 1 file changed")]
    assert run(staged).flags == (), describe(run(staged))


def test_a_stated_number_of_the_things_a_write_counts_is_intended() -> None:
    scans = [tool("record_receipt", {"sku": "KT-3308", "cartons": 1},
                  json.dumps({"line": n, "bin_cartons": 12 + n})) for n in range(1, 8)]
    assert run(scans, task="Receive thirty cartons of KT-3308 into bin R-14.").flags == ()
    order = [tool("create_order", {"sku": "NAV-A4-500", "quantity": 1},
                  json.dumps({"order_id": f"PO-{n}"})) for n in range(3)]
    assert _kills(run(order, task="Buy one pack of A4 paper (500 sheets)."))


# -- point 6: polls ---------------------------------------------------------------------------------


def test_a_failed_state_is_a_loop_after_two_unchanged_polls_even_as_restarts_move() -> None:
    poll = {"command": "sleep 60 && kubectl get pods"}
    stuck = [tool("bash", poll, POD.format(state="CrashLoopBackOff", restarts=3 + n, age=5 + n),
                  t=70.0 * n) for n in range(5)]
    report = run(stuck)
    assert [(f.step, f.action) for f in report.flags if f.detector == "poll_timeout"][:2] == [
        (2, "warn"), (3, "block")], describe(report)
    starting = [tool("bash", poll, POD.format(state=state, restarts=0, age=n), t=70.0 * n)
                for n, state in enumerate(["ContainerCreating"] * 3 + ["Running"])]
    assert run(starting).flags == ()


def test_a_schedule_the_task_states_is_intended_repetition() -> None:
    checks = []
    for n in range(13):
        checks += [tool("queue_depth", {"queue": "orders-dlq"}, '{"depth": 0}', t=900.0 * n),
                   tool("sleep", {"seconds": 900}, "slept 900s", t=900.0 * n + 1)]
    task = "It's 09:00. Check the orders-dlq depth every 15 minutes until noon."
    assert run(checks, task=task).flags == (), describe(run(checks, task=task))
    assert run(checks).flags, "without the schedule, three hours of one answer is a loop"


# -- point 8: retries ------------------------------------------------------------------------------


def test_paced_retries_of_a_timeout_pass_and_hammering_a_503_does_not() -> None:
    url = {"url": "https://www.bankofcanada.ca/valet/observations/FXUSDCAD/json"}
    paced, t = [], 0.0
    for wait in (2, 4, 8, 16):
        paced.append(tool("fetch", url, "Read timed out. (read timeout=10)", status="timeout",
                          t=t))
        t += 10 + wait
    paced.append(tool("fetch", url, '{"FXUSDCAD": 1.3751}', t=t))
    assert run(paced).flags == (), describe(run(paced))
    hammered = [tool("fetch", url, "503 Service Unavailable", status="error", t=0.5 * n)
                for n in range(8)]
    assert _kills(run(hammered)), describe(run(hammered))
    ignored = [tool("search_code", {"q": "x"}, "429 Too Many Requests. Retry-After: 60",
                    status="error", t=1.0 * n) for n in range(8)]
    assert _kills(run(ignored)), describe(run(ignored))


# -- points 9 and 11: message loops end; every caught loop ends ----------------------------------------


def test_answers_to_an_identical_nudge_that_say_the_same_thing_are_stopped() -> None:
    answer = "The fix is complete: all tests pass and the handler now retries on 503 errors."
    steps = []
    for _ in range(6):
        steps += [msg("user", "Please continue working on the task. If you are done, say DONE."),
                  msg("assistant", answer)]
    report = run(steps)
    assert [f.action for f in report.flags if f.detector == "monologue"][:2] == [
        "warn", "stop"], describe(report)


_SAID = ["Please continue.", "please  continue.", "PLEASE\nCONTINUE.", "Please continue!",
         "Keep going", "keep   going", "Go on, please", "go on,  please", "Thanks", "What next?",
         "Pleasé continue.", "E.", "e .", "[heartbeat]", "Try again", "try again."]


@given(st.lists(st.one_of(st.sampled_from(_SAID), st.integers(0, 24).map("note {}".format),
                          st.text(alphabet="eE., \nxa", max_size=12)), max_size=60))
@example(["Please continue.", *(f"note {i}" for i in range(15)), "please continue."])
@example(["Please continue.", *(f"note {i}" for i in range(16)), "please continue."])
@settings(max_examples=300, deadline=None)
def test_a_nudge_is_told_by_the_plain_rule(messages: list[str]) -> None:
    """Which user messages open a new turn: the monitor (which compares the words of two
    messages only when their marks agree) against the rule spelled plainly (every message
    normalised, the last ``SAID_KEPT`` different ones kept)."""
    monitor = EpisodeMonitor()
    said: dict[str, None] = {}
    plain_turn = idle_run = 0
    for content in messages:
        monitor.record_message("user", content)
        idle_run = idle_run + 1 if idle(content) else 0
        if idle_run < IDLE_MESSAGES:
            words = " ".join(content.lower().split()) if len(content) <= NUDGE_CHARS else None
            if words is None or words not in said or not CONTINUE.search(words):
                if words is not None:
                    said.pop(words, None)
                    said[words] = None
                    if len(said) > SAID_KEPT:
                        del said[next(iter(said))]
                plain_turn += 1
        assert monitor.turn == plain_turn, (messages, content)


def test_a_nudge_that_changes_nothing_ends_the_run_within_three_calls() -> None:
    """Two different files re-read in turn with the same answers: each read's own ladder
    would start at warn; the run is stopped three calls after the first nudge."""
    reads = [tool("read_file", {"path": p}, f"contents of {p}") for p in ["a.py", "b.py"] * 6]
    report = run(reads)
    first = report.flags[0].step
    assert any(f.severity == "kill" and f.step <= first + 3 for f in report.flags), (
        describe(report))



def test_the_calls_of_one_model_turn_are_one_ignored_decision() -> None:
    """After a nudge, parallel calls of one turn (milliseconds apart) count once toward
    ``ignored_calls``; a record without timings (every call at one time) counts each."""
    def batch(t: float) -> list[dict[str, Any]]:
        return [tool("read_file", {"path": f"src/m{n}.py"}, f"contents of m{n}", t=t + 0.01 * n)
                for n in range(3)]
    steps = [step for turn in range(8) for step in batch(5.0 * turn)]
    ignored = [f.step for f in run(steps).flags if f.detector == "no_progress"
               and f.severity == "kill"]
    timeless = [dict(step, t=0.0) for step in steps]
    ignored_timeless = [f.step for f in run(timeless).flags if f.detector == "no_progress"
                        and f.severity == "kill"]
    assert ignored and ignored_timeless and ignored[0] > ignored_timeless[0], (
        describe(run(steps)), describe(run(timeless)))


def test_a_write_whose_answer_could_not_be_decoded_is_unknown_and_its_retry_is_blocked() -> None:
    """An answer the client could not decode (a JSON parse error) means the request reached
    the other side and what it did is unreadable: UNKNOWN, not failed. The same declared
    write sent again without a look-up is blocked; a look-up first lets it through."""
    send = {"to": ["ops@example.org"], "subject": "Q3 invoice", "body": "Attached."}
    unreadable = "JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    steps = [tool("send_email", send, unreadable, status="error", kind="write"),
             tool("send_email", send, unreadable, status="error", kind="write")]
    assert _kills(run(steps)) == [(1, "write_duplicate")], describe(run(steps))
    checked = [steps[0],
               tool("search_sent", {"subject": "Q3 invoice"}, '{"messages": []}', kind="read"),
               tool("send_email", send, '{"id": "m_1", "sent": true}', kind="write")]
    assert _kills(run(checked)) == [], describe(run(checked))
