"""Detection v4 (issue 28): a caught loop ends — blocked or stopped within three steps of its
first flag — by mechanisms that hold for every detector, each beside what it must spare."""

from __future__ import annotations

from episode_steps import describe, msg, run, tool

from loopscope.detect import Policy

ANSWER = "Order 5521 is packed and waiting for the courier at the depot."


def test_the_ignored_count_goes_on_once_the_breaker_fires() -> None:
    """A nudge two calls before the no-progress breaker's first rung: the breaker's own
    warning does not pause the count of calls that ignored the nudge, so the run stops three
    calls after it (not when the breaker's ladder reaches its top, two calls later), with
    one no_progress flag a call."""
    steps = [tool("get_order", {"id": 5521}, ANSWER, kind="read")]
    steps += [tool(f"lookup_{n}", {"id": 5521}, ANSWER, kind="read") for n in range(8)]
    report = run(steps, Policy(no_progress_k={"other": 4}, ignored_calls=3))
    first = report.flags[0].step
    breaker = [(f.step, f.key, f.action) for f in report.flags if f.detector == "no_progress"]
    assert breaker[:2] == [(first + 2, "no_progress", "warn"), (first + 3, "ignored", "stop")], (
        describe(report))


def test_a_condition_raised_after_a_nudge_that_changed_nothing_starts_a_rung_up() -> None:
    """Two reads in turn, the same answers: tool_a's third read is warned; tool_b's third,
    issued after that warning with nothing learned since, is blocked at once (its own ladder
    would have started at warn); a read that learns something puts the next condition back
    at warn."""
    cycle = [tool(f"tool_{n}", {"q": n}, f"{n} result words here", kind="read")
             for _ in range(3) for n in "ab"]
    report = run(cycle)
    assert [(f.step, f.detector, f.action) for f in report.flags][:2] == [
        (4, "exact_repeat", "warn"), (5, "exact_repeat", "block")], describe(report)
    learnt = [*cycle[:5], tool("tool_c", {"q": "c"}, "c finds something new", kind="read"),
              *[tool("tool_d", {"q": "d"}, "d result words here", kind="read")] * 3]
    report = run(learnt)
    assert [(f.step, f.action) for f in report.flags] == [(4, "warn"), (8, "warn")], (
        describe(report))


def test_a_harness_prompt_sent_again_that_asks_for_the_next_steps_is_no_new_intent() -> None:
    """The same automatic prompt after every answer ("... suggest the next steps") starts no
    new turn, so the same answer to it is warned, then stopped; a person's new question
    still starts one."""
    prompt = ("Pick the most appropriate tool for the user's needs. After using each tool, "
              "explain the results and suggest the next steps.")
    answer = ("I can help with that! I have access to 2 tools: 1. Python, 2. a file saver. "
              "Let me know how you would like to proceed.")
    steps = [msg("user", "Summarise sales.csv into report.md."), msg("assistant", answer)]
    for _ in range(4):
        steps += [msg("user", prompt), msg("assistant", answer)]
    actions = [f.action for f in run(steps).flags if f.detector == "monologue"]
    assert actions[:2] == ["warn", "stop"], describe(run(steps))
    asked = [*steps[:2]]
    for n in range(4):
        asked += [msg("user", f"What are the next steps for region {n}?"), msg("assistant", answer)]
    assert not [f for f in run(asked).flags if f.severity == "kill"], describe(run(asked))


def test_a_warning_answered_in_words_and_then_ignored_is_not_given_twice() -> None:
    """The same error for every reworded query: a condition seen only after the call warns
    twice before it stops when the calls come back to back (the second call may have been
    issued before the first warning was read), but once the agent has written a message
    after the warning, it was read: the next repeat is stopped, not warned again."""
    error = "ERROR 1146: table 'sales.q3_orders' does not exist"
    queries = [f"SELECT sum(total) FROM sales.q3_orders WHERE region = '{r}'"
               for r in ("north", "south", "east", "west", "centre", "islands")]
    calls = [tool("run_sql", {"sql": q}, error, status="error", kind="read") for q in queries]
    back_to_back = [(f.step, f.action) for f in run(calls).flags
                    if f.detector == "repeat_same_error"]
    first = back_to_back[0][0]
    assert back_to_back[:3] == [(first, "warn"), (first + 1, "warn"), (first + 2, "stop")], (
        describe(run(calls)))
    talked: list[dict[str, object]] = []
    for call in calls:
        talked += [call, msg("assistant", "That failed; trying the query another way.")]
    said = [(f.step, f.action) for f in run(talked).flags if f.detector == "repeat_same_error"]
    assert said[:2] == [(said[0][0], "warn"), (said[0][0] + 2, "stop")], describe(run(talked))


def test_calls_that_bring_nothing_new_after_a_nudge_count_as_ignoring_it() -> None:
    """A read spin is warned; the agent then logs two new notes, each answered by the
    acknowledgement it got before: new requests, but nothing learned, so the warning changed
    nothing and the run stops at the second (not when the read comes back). Before any nudge
    such acknowledgements stay neutral: a long run of notes between reads that learn nothing
    new raises nothing by itself."""
    def note(n: int) -> dict[str, object]:
        return tool("log_note", {"text": f"step {n}: checked the order"}, "Noted.")
    spin = [note(0), *[tool("get_order", {"id": 5521}, ANSWER, kind="read")] * 3,
            note(1), note(2), tool("get_order", {"id": 5521}, ANSWER, kind="read")]
    report = run(spin)
    assert [(f.step, f.detector, f.action) for f in report.flags][:2] == [
        (3, "exact_repeat", "warn"), (5, "no_progress", "stop")], describe(report)
    notes = [tool("get_order", {"id": 5521}, ANSWER, kind="read"), *[note(n) for n in range(12)]]
    assert not run(notes).flags, describe(run(notes))


def test_time_spent_writing_a_message_is_not_waiting() -> None:
    """A long log read whole, by its tail, whole again (warned: the same result three ways)
    and by its tail again: each read 22 s after the last because the model was reading it
    and wrote a message before the next. The record shows the agent working until its
    message, so the last tail is a re-read, not a poll that waited, and it is stopped (the
    warning was answered in words). A tail asked again after a `sleep` did wait: not
    flagged."""
    log = "\n".join(f"02:{m:02d}:00 INFO load batch={m} rows={m * 7}" for m in range(40))

    def said(text: str, t: float) -> dict[str, object]:
        return {**msg("assistant", text), "t": t}

    def reads(slept: bool) -> list[dict[str, object]]:
        steps = [{**msg("user", "The nightly load failed: find why in load.log."), "t": 0.0},
                 tool("shell", {"command": "cat load.log"}, log, t=1.0),
                 said("Long log; the end should tell.", 10.0),
                 tool("shell", {"command": "tail -n 500 load.log"}, log, t=10.2),
                 said("Reading the whole log again.", 32.0),
                 tool("shell", {"command": "cat load.log"}, log, t=32.3)]
        if slept:
            steps += [said("It may still be written to; waiting half a minute.", 33.0),
                      tool("shell", {"command": "sleep 30"}, "", t=33.2)]
        else:
            steps.append(said("Checking the end again.", 55.0))
        return [*steps, tool("shell", {"command": "tail -n 500 load.log"}, log, t=64.0 if slept else 55.3)]

    report = run(reads(slept=False))
    assert [(f.step, f.detector, f.action) for f in report.flags] == [
        (5, "output_stagnation", "warn"), (7, "output_stagnation", "stop")], describe(report)
    report = run(reads(slept=True))
    assert not [f for f in report.flags if f.severity == "kill"], describe(report)
