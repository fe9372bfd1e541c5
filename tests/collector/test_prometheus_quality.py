"""``GET /metrics`` on a real collector: the store's stopped runs, false stops and false-stop
rate, and budget stops beside them (never in them), as ``loopscope metrics`` counts them; the
names docs/glossary.md renamed, still served under their old names, marked deprecated."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from collector_process import CollectorProcess, eventually, start_collector
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from otlp_requests import request

from loopscope import conventions as c
from loopscope_collector.metrics.compute import compute_metrics
from loopscope_collector.storage import open_database

pytestmark = pytest.mark.timeout(120)

START = 1_700_000_000_000_000_000
GLOSSARY = Path(__file__).resolve().parents[2] / "docs" / "glossary.md"


def _kv(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _span(trace: bytes, n: int, attrs: dict[str, str | int], *, name: str) -> Span:
    return Span(trace_id=trace, span_id=os.urandom(8), name=name,
                start_time_unix_nano=START + n * 1_000_000_000,
                end_time_unix_nano=START + n * 1_000_000_000 + 1_000,
                attributes=[_kv(k, v) for k, v in attrs.items()])


def _call(trace: bytes, episode: str, n: int, query: str, **guard: str) -> Span:
    attrs: dict[str, str | int] = {
        c.GEN_AI_OPERATION_NAME: c.OP_EXECUTE_TOOL, c.GEN_AI_TOOL_NAME: "search",
        c.EPISODE_ID: episode, c.GEN_AI_TOOL_CALL_ARGUMENTS: f'{{"q": "{query}"}}',
        c.GEN_AI_TOOL_CALL_RESULT: f"nothing new about {query}", c.STEP: n}
    attrs.update({f"loopscope.guard.{k}": v for k, v in guard.items()})
    return _span(trace, n, attrs, name="execute_tool search")


def _root(trace: bytes, episode: str, outcome: str, stop_reason: str) -> Span:
    return _span(trace, 0, {c.GEN_AI_OPERATION_NAME: c.OP_INVOKE_AGENT, c.EPISODE_ID: episode,
                            c.OUTCOME: outcome, c.STOP_REASON: stop_reason},
                 name="invoke_agent")


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[CollectorProcess]:
    proc = start_collector(tmp_path / "store.duckdb", grpc=False)
    yield proc
    proc.stop()


def _gauge(metrics: str, name: str) -> str:
    found = re.search(rf"^{name} (\S+)$", metrics, re.MULTILINE)
    assert found, f"{name} not in /metrics"
    return found.group(1)


def test_budget_stops_are_exported_beside_the_false_kill_rate(
    collector: CollectorProcess,
) -> None:
    """A run its guard stopped for its budget (it made progress and succeeded) and a run the
    collector stops for repeating one call: /metrics has one kill, no false kill, a rate of 0
    and one budget stop, the numbers ``loopscope metrics`` gives for the same store."""
    budget, loop = os.urandom(16), os.urandom(16)
    spans = [_root(budget, "budget-run", "success", "budget")]
    spans += [_call(budget, "budget-run", n, f"q{n}") for n in range(1, 3)]
    spans.append(_call(budget, "budget-run", 3, "q3", mode="enforce", action="stop",
                       decision="stop", reason="budget"))
    spans.append(_root(loop, "loop-run", "failure", "repeated_tool_call"))
    spans += [_call(loop, "loop-run", n, "same") for n in range(1, 7)]
    assert collector.post(request(spans).SerializeToString())[0] == 200
    metrics = eventually(lambda: (m := collector.get("/metrics"))
                         and "loopscope_stopped_runs 1" in m and m)
    assert _gauge(metrics, "loopscope_false_stopped_runs") == "0"
    assert _gauge(metrics, "loopscope_false_stop_rate") == "0.0"
    assert _gauge(metrics, "loopscope_budget_stopped_runs") == "1"
    collector.stop()
    db = open_database(collector.db, read_only=True)
    try:
        report = compute_metrics(db)
    finally:
        db.close()
    assert (report["kills"], report["false_kills"], report["budget_stops"]) == (1, 0, 1)


def test_an_empty_store_exports_no_rate_yet(collector: CollectorProcess) -> None:
    metrics = collector.get("/metrics")
    assert _gauge(metrics, "loopscope_stopped_runs") == "0"
    assert _gauge(metrics, "loopscope_false_stop_rate") == "NaN"
    assert _gauge(metrics, "loopscope_budget_stopped_runs") == "0"


def test_renamed_metrics_keep_their_old_name_for_one_release_marked_deprecated(
    collector: CollectorProcess,
) -> None:
    """docs/glossary.md's renamed /metrics names: each old name is still served, with the new
    one's value and a HELP that says it is deprecated and names its successor."""
    metrics = collector.get("/metrics")
    renamed = re.findall(r"^\| `(loopscope_\w+)` \| `(loopscope_\w+)` \|$",
                         GLOSSARY.read_text("utf-8"), re.MULTILINE)
    assert len(renamed) >= 6
    for old, new in renamed:
        assert f"\n# TYPE {new} " in metrics, new
        assert f"# HELP {old} DEPRECATED: renamed {new}," in metrics, old
        assert f"# HELP {new} DEPRECATED" not in metrics, new
        samples = [line.removeprefix(new) for line in metrics.splitlines()
                   if line.startswith((new + " ", new + "{"))]
        assert samples == [line.removeprefix(old) for line in metrics.splitlines()
                           if line.startswith((old + " ", old + "{"))], old
