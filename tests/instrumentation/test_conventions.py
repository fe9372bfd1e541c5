"""Issue 18 point 11: the GenAI conventions of 2026 on loopscope's spans: the conversation
id, the tool type, each loop verdict as a ``gen_ai.evaluation.result`` event, the policy the
guard ran, and ``OTEL_SEMCONV_STABILITY_OPT_IN`` for the content switch."""

from __future__ import annotations

import json

import pytest

import loopscope
from loopscope import conventions as c
from loopscope.testing import capture_spans


@loopscope.tool(kind="read")
def lookup_order(order_id: str) -> dict:
    return {"order": order_id, "status": "shipped"}


def test_every_span_of_a_run_carries_its_conversation_id_and_tool_type() -> None:
    with capture_spans() as spans:
        with loopscope.episode(task="t", conversation_id="thread-7"):
            lookup_order("1")
        with loopscope.episode(task="t", episode_id="run-without-thread"):
            lookup_order("2")
    found = {(s["name"].split()[0], s["attributes"][c.GEN_AI_CONVERSATION_ID])
             for s in spans.as_dicts()}
    assert found == {("invoke_agent", "thread-7"), ("execute_tool", "thread-7"),
                     ("invoke_agent", "run-without-thread"),
                     ("execute_tool", "run-without-thread")}
    assert {s["attributes"][c.GEN_AI_TOOL_TYPE] for s in spans.tool_spans()} == {"function"}


def test_each_loop_verdict_is_a_gen_ai_evaluation_result_event() -> None:
    """A read spin: warn at the 3rd identical read, block at the 4th, stop at the 5th. Each
    flag is an event on its call's span, named for its detector, labelled with its rung."""
    now = [0.0]
    with (capture_spans(mode="enforce") as spans,
          loopscope.episode(task="find order 1", clock=lambda: now[0]),
          pytest.raises(loopscope.LoopDetected)):
        for _ in range(8):
            now[0] += 5.0  # one model turn after another (calls at once are one turn)
            lookup_order("1")
    events = []
    for span in spans.spans():
        if span.name.startswith("execute_tool"):
            flags = list((span.attributes or {}).get(c.FLAGS, ()))
            got = [dict(e.attributes or {}) for e in span.events
                   if e.name == c.GEN_AI_EVALUATION_RESULT]
            assert [e[c.GEN_AI_EVALUATION_NAME] for e in got] == [f"loopscope.{f}"
                                                                  for f in flags]
            events += got
    labels = [e[c.GEN_AI_EVALUATION_SCORE_LABEL] for e in events]
    assert labels[:3] == ["warn", "block", "stop"], events
    first = events[0]
    assert first[c.GEN_AI_EVALUATION_NAME] == "loopscope.exact_repeat"
    assert first[c.GEN_AI_EVALUATION_SCORE_VALUE] == 0.0
    assert "lookup_order" in first[c.GEN_AI_EVALUATION_EXPLANATION]
    assert first[c.FLAG_KIND]
    assert first[c.FLAG_EVIDENCE] == "exact_repeat/kind:declared"  # (what the kill rests on)
    assert c.FLAG_CAPPED not in first


def test_observe_mode_events_say_what_enforce_would_do() -> None:
    now = [0.0]
    with (capture_spans(mode="observe") as spans,
          loopscope.episode(task="find order 1", clock=lambda: now[0])):
        for _ in range(5):
            now[0] += 5.0
            lookup_order("1")
    labels = [dict(e.attributes or {})[c.GEN_AI_EVALUATION_SCORE_LABEL]
              for s in spans.spans() for e in s.events if e.name == c.GEN_AI_EVALUATION_RESULT]
    actions = [s["attributes"][c.GUARD_ACTION] for s in spans.tool_spans()]
    assert labels[:3] == ["warn", "block", "stop"] and set(labels[3:]) <= {"stop"}
    assert set(actions) == {"allow"}  # (observe: the run goes on past a would-be stop)


def test_message_spans_carry_the_conversation_and_their_loop_verdicts() -> None:
    """A monologue (the same assistant message three times, no tool call) is a loop verdict
    on a message span: the same event, and the run's conversation id."""
    text = "Let me check the order status again before answering the customer now."
    with capture_spans() as spans, loopscope.episode(task="t", conversation_id="thread-9") as ep:
        for _ in range(4):
            ep.record_message("assistant", text)
        ep.reconcile("nothing", found=False)
    others = [s for s in spans.spans() if not s.name.startswith("invoke_agent")]
    assert others and {(s.attributes or {}).get(c.GEN_AI_CONVERSATION_ID) for s in others} == {
        "thread-9"}
    names = [dict(e.attributes or {})[c.GEN_AI_EVALUATION_NAME] for s in others
             for e in s.events if e.name == c.GEN_AI_EVALUATION_RESULT]
    assert names and set(names) == {"loopscope.monologue"}


def test_a_model_turn_is_a_chat_span_with_its_usage_from_before_the_call_to_its_record(
) -> None:
    """``before_model_call`` .. ``record_model_call`` is one ``chat {model}`` span under the
    run's root (the trace view's model turn: duration, tokens, cost); ``span=False`` leaves
    it to another instrumentation, and the budgets count the turn either way."""
    with capture_spans() as spans, loopscope.episode(task="t", conversation_id="c-1") as ep:
        ep.before_model_call()
        lookup_order("1")
        ep.record_model_call(input_tokens=1200, output_tokens=80, cost_usd=0.004,
                             model="gpt-4o")
        ep.before_model_call()
        ep.record_model_call(input_tokens=10, output_tokens=1, span=False)
    assert ep.model_turns == 2 and ep.input_tokens == 1210
    by_name = {s.name: s for s in spans.spans()}
    chat, root, call = by_name["chat gpt-4o"], by_name["invoke_agent"], by_name[
        "execute_tool lookup_order"]
    assert len([s for s in spans.spans() if s.name.startswith("chat")]) == 1
    attrs = dict(chat.attributes or {})
    assert attrs[c.GEN_AI_OPERATION_NAME] == "chat"
    assert attrs[c.GEN_AI_USAGE_INPUT_TOKENS] == 1200
    assert attrs[c.GEN_AI_USAGE_OUTPUT_TOKENS] == 80
    assert attrs[c.COST_USD] == pytest.approx(0.004)
    assert attrs[c.GEN_AI_CONVERSATION_ID] == "c-1" and attrs[c.EPISODE_ID] == ep.id
    assert chat.parent is not None and root.context is not None
    assert chat.parent.span_id == root.context.span_id
    assert chat.start_time is not None and call.start_time is not None
    assert chat.start_time <= call.start_time  # (the turn began before the call it made)


def test_the_root_span_records_the_policy_the_guard_ran() -> None:
    policy = {"budgets": {"tool_calls": 40}, "repeat_threshold": 4}
    with capture_spans(policy=policy) as spans, loopscope.episode(task="t"):
        lookup_order("1")
    root = next(s for s in spans.as_dicts() if s["name"].startswith("invoke_agent"))
    recorded = json.loads(root["attributes"][c.GUARD_POLICY])
    assert recorded["repeat_threshold"] == 4
    assert recorded["budgets"]["tool_calls"] == 40
    assert loopscope.detect.Policy.from_mapping(recorded) == loopscope.detect.Policy.from_mapping(
        policy)
    with capture_spans() as spans, loopscope.episode(task="t"):
        lookup_order("1")
    root = next(s for s in spans.as_dicts() if s["name"].startswith("invoke_agent"))
    assert root["attributes"][c.GUARD_POLICY] == "{}"


@pytest.mark.parametrize(("opt_in", "value", "captured"), [
    ("", "true", True), ("", "false", False), ("", "", False),
    ("http,gen_ai_latest_experimental", "SPAN_ONLY", True),
    ("gen_ai_latest_experimental", "SPAN_AND_EVENT", True),
    ("gen_ai_latest_experimental", "EVENT_ONLY", False),
    ("gen_ai_latest_experimental", "NO_CONTENT", False),
])
def test_the_otel_content_switch_is_read_as_the_opted_in_conventions_define_it(
        monkeypatch: pytest.MonkeyPatch, opt_in: str, value: str, captured: bool) -> None:
    monkeypatch.delenv("LOOPSCOPE_CAPTURE_CONTENT", raising=False)
    monkeypatch.setenv(c.OTEL_SEMCONV_STABILITY_OPT_IN, opt_in)
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value)
    with capture_spans() as spans, loopscope.episode(task="t"):
        lookup_order("1")
    (span,) = spans.tool_spans()
    assert (c.GEN_AI_TOOL_CALL_ARGUMENTS in span["attributes"]) is captured


def test_a_wrong_content_switch_is_refused_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOPSCOPE_CAPTURE_CONTENT", raising=False)
    monkeypatch.setenv(c.OTEL_SEMCONV_STABILITY_OPT_IN, "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    with pytest.raises(ValueError, match="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"):
        loopscope.instrument(span_processor=None, endpoint="http://127.0.0.1:9")
    monkeypatch.setenv("LOOPSCOPE_CAPTURE_CONTENT", "false")  # loopscope's own variable wins
    with capture_spans() as spans, loopscope.episode(task="t"):
        lookup_order("1")
    assert c.GEN_AI_TOOL_CALL_ARGUMENTS not in spans.tool_spans()[0]["attributes"]
