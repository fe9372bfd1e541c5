"""A real collector process, fed by the real OTel SDK exporters over HTTP and gRPC."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from collector_process import CollectorProcess, eventually, start_collector
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import loopscope

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[CollectorProcess]:
    proc = start_collector(tmp_path / "store.duckdb")
    yield proc
    proc.stop()


def test_sdk_over_http_stores_calls_guard_decisions_and_flags(collector: CollectorProcess) -> None:
    """An enforce-mode read spin sent by loopscope's SDK arrives as tool calls, the guard's own
    decisions, an episode with its stop reason, and the collector's own flags."""
    loopscope.instrument(service_name="spinner", endpoint=collector.url, mode="enforce")

    @loopscope.tool(kind="read")
    def search_orders(query: str) -> str:
        return "no orders match"

    with (
        pytest.raises(loopscope.LoopDetected),
        loopscope.episode(task="find order", task_type="lookup", episode_id="ep-spin"),
    ):
        for _ in range(8):
            search_orders("late parcel")
    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]

    calls = eventually(lambda: collector.read("episode_tool_calls", episode_id="ep-spin"))
    assert [c["tool"] for c in calls] == ["search_orders"] * len(calls)
    assert [c["status"] for c in calls][:4] == ["ok", "ok", "ok", "blocked"]  # warned, then blocked
    assert len({c["signature"] for c in calls}) == 1 and calls[0]["signature"]
    assert all(c["content_captured"] is False and c["args_text"] is None for c in calls)
    assert (calls[2]["guard_action"], calls[3]["guard_action"]) == ("warn", "block")
    assert [c["call_ordinal"] for c in calls] == list(range(1, len(calls) + 1))  # the agent's

    flags = eventually(lambda: collector.read("episode_detections", episode_id="ep-spin"))
    assert flags[0]["ordinal"] == 2 and flags[0]["severity"] == "warn"
    assert flags[0]["detector"] == "exact_repeat"
    assert [f["ordinal"] for f in flags if f["severity"] == "kill"][:1] == [3]

    episode = eventually(lambda: collector.read("episode", episode_id="ep-spin"))[0]
    # The process's provider keeps the resource it was created with (OTel sets it once).
    resource = trace.get_tracer_provider().resource  # type: ignore[attr-defined]
    assert episode["service"] == resource.attributes["service.name"]
    assert episode["stop_reason"] == "repeated_tool_call" and episode["outcome"] == "failure"
    decisions = collector.read("guard_decisions", episode_id="ep-spin")
    assert {d["action"] for d in decisions} >= {"allow", "block", "stop"}


def test_foreign_genai_spans_over_grpc_are_detected(collector: CollectorProcess) -> None:
    """Plain OTel GenAI execute_tool spans (no loopscope SDK) sent with the gRPC exporter get
    signatures computed by the collector and a repeat flagged."""
    provider = TracerProvider(resource=Resource.create({"service.name": "foreign"}))
    provider.add_span_processor(SimpleSpanProcessor(
        GrpcExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True)))
    tracer = provider.get_tracer("someone-elses-instrumentation")
    with tracer.start_as_current_span("invoke_agent",
                                      attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        trace_id = f"{root.get_span_context().trace_id:032x}"
        for i in range(4):
            with tracer.start_as_current_span("execute_tool get_weather", attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": f"call_{i}",
                "gen_ai.tool.call.arguments": '{"unit": "C", "city": "Paris"}' if i % 2
                else '{"city": "Paris", "unit": "C"}',
                "gen_ai.tool.call.result": '{"temp": 21}',
            }):
                pass
    provider.shutdown()

    calls = eventually(lambda: collector.read("episode_tool_calls", episode_id=trace_id))
    assert len(calls) == 4
    assert {c["convention"] for c in calls} == {"genai"}
    assert {c["call_ordinal"] for c in calls} == {None}  # numbered in the order they ran
    assert len({c["signature"] for c in calls}) == 1  # key order does not matter
    assert all(c["content_captured"] for c in calls)
    flags = eventually(lambda: collector.read("episode_detections", episode_id=trace_id))
    assert flags[0]["ordinal"] == 2 and flags[0]["kind"] == "exact_repeat"


def test_late_and_out_of_order_spans_are_re_evaluated(collector: CollectorProcess) -> None:
    """An episode whose calls arrive newest first, one request each, ends with the same flags
    as one that arrives in order: the collector re-evaluates in start-time order."""
    from otlp_requests import request, tool_span

    def spin(trace_id: bytes) -> list:
        return [tool_span(trace_id, bytes([i + 1]) * 8, tool="search", args='{"q": "same"}',
                          result="nothing found for same", start_ns=1_000_000_000 * (i + 1))
                for i in range(5)]

    in_order, reversed_ = b"\x01" * 16, b"\x02" * 16
    assert collector.post(request(spin(in_order)).SerializeToString())[0] == 200
    for span in reversed(spin(reversed_)):
        assert collector.post(request([span]).SerializeToString())[0] == 200

    def flags(trace_id: bytes) -> list[tuple[int, str]]:
        rows = collector.read("episode_detections", episode_id=trace_id.hex())
        return [(r["ordinal"], r["detector"]) for r in rows]

    expected = eventually(lambda: flags(in_order))
    assert expected[0] == (2, "exact_repeat")
    assert eventually(lambda: flags(reversed_) == expected and flags(reversed_))
    calls = collector.read("episode_tool_calls", episode_id=reversed_.hex())
    # "nothing found" to a new question is exploring (new_action), then the same again is none
    assert [c["collector_progress"] for c in calls] == ["new_action", "none", "none", "none",
                                                        "none"]


def test_labelled_runs_from_the_sdk_fill_the_scenario_rates(
    collector: CollectorProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scripted runs that know their ground truth (``loopscope.episode(label=...)``, as the
    demo's are) send it on the root span; `loopscope metrics` over the live collector then
    reports loop-detection and false-kill rates from the scenario label source."""
    import json

    from loopscope.offline.cli import main
    from loopscope.offline.demo import drive
    from loopscope.offline.scenarios import generate

    loopscope.instrument(service_name="labelled", endpoint=collector.url, mode="observe")
    scripts = generate(seed=5, per_shape=1, faults=False,
                       shapes=["read_spin", "oscillation", "healthy_lookup", "poll_legit"])
    for script in scripts:
        drive(script, mode="observe", service="labelled")
    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    loops = sum(1 for s in scripts if s["label"]["loop"])
    assert 0 < loops < len(scripts)

    def report() -> dict | None:
        main(["metrics", "--collector", collector.url, "--json"])
        found = json.loads(capsys.readouterr().out)
        return found if found["labels"]["by_source"]["scenario"] == len(scripts) else None

    m = eventually(report)
    detection = m["loop_detection_rate"]
    assert detection["label_source"] == "scenario"
    assert (detection["count"], detection["n"]) == (loops, loops)  # both spins caught
    assert m["false_kill_rate"]["by_label_source"]["scenario"]["count"] == 0


def test_the_sdk_sends_messages_and_the_collector_flags_a_monologue(
    collector: CollectorProcess,
) -> None:
    """``record_message`` writes a message span; the collector stores the conversation and
    flags the monologue the guard flagged, at the ordinal of the call that would follow."""
    loopscope.instrument(service_name="talker", endpoint=collector.url, mode="warn",
                         capture_content=True)

    @loopscope.tool(kind="read")
    def get_order(order_id: str) -> str:
        return f"order {order_id}: shipped"

    said = "I will now check the order status for you and report back shortly."
    with loopscope.episode(task="where is my order?", episode_id="ep-talk") as ep:
        ep.record_message("user", "Where is order A-7?")
        get_order("A-7")
        guard_flags = [ep.record_message("assistant", said) for _ in range(4)]
    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    assert any(d is not None and d.flags for d in guard_flags)

    flags = eventually(lambda: [f for f in collector.read("episode_detections",
                                                          episode_id="ep-talk")
                                if f["detector"] == "monologue"])
    assert {f["ordinal"] for f in flags} == {1}  # after the one call
    assert flags[0]["severity"] == "warn"
