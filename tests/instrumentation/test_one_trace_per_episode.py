"""Every span of one SDK episode shares its trace (issue 17): a load balancer that routes by
trace id (the OpenTelemetry Collector's ``load_balancing`` exporter in front of N collectors)
then sends the whole episode to one collector, whose detection state is per episode."""

from __future__ import annotations

import threading

import loopscope
from loopscope import ToolCallScope
from loopscope.testing import capture_spans


def _traces(spans: list) -> set[int]:
    return {span.context.trace_id for span in spans}


def test_a_tool_call_on_another_thread_stays_in_its_episodes_trace() -> None:
    """The context does not follow a thread; the episode the call and the message are
    recorded on does."""
    with capture_spans() as captured, loopscope.episode(task="threads", agent_name="a") as ep:
        with ToolCallScope("search", {"q": "here"}, kind="read") as call:
            call.finish("r1")

        def elsewhere() -> None:
            with loopscope.tool_call("search", {"q": "there"}, kind="read", episode=ep) as call:
                call.finish("r2")
            ep.record_message("assistant", "done")

        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
    spans = captured.spans()
    assert len(spans) == 4  # the root, two calls, one message
    assert len(_traces(spans)) == 1
    root = next(s for s in spans if s.parent is None)
    assert all(s.parent.span_id == root.context.span_id for s in spans if s is not root)


def test_the_implicit_episode_keeps_one_trace_for_its_calls() -> None:
    """Calls outside any episode belong to the process-wide implicit one: without a current
    span, its first call is the root of a trace that the later ones join."""
    with capture_spans() as captured:
        for q in ("a", "b", "c"):
            with ToolCallScope("search", {"q": q}, kind="read") as call:
                call.finish("same")
    spans = captured.spans()
    assert len(spans) == 3
    assert len(_traces(spans)) == 1
    assert len({s.attributes["loopscope.episode.id"] for s in spans}) == 1
    first, *later = sorted(spans, key=lambda s: s.start_time)
    assert first.parent is None
    assert all(s.parent.span_id == first.context.span_id for s in later)


def test_spans_inside_the_callers_own_span_stay_in_the_callers_trace() -> None:
    """An episode opened inside the caller's span (a request) is a child of it, as before."""
    from opentelemetry import trace

    with capture_spans() as captured:
        tracer = trace.get_tracer("caller")
        with (tracer.start_as_current_span("request") as request,
              loopscope.episode(task="in a request") as ep,
              ToolCallScope("search", {"q": "x"}, kind="read", episode=ep) as call):
            call.finish("r")
    assert _traces(captured.spans()) == {request.get_span_context().trace_id}
