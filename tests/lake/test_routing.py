"""Routing (issue 17, point 2): the OpenTelemetry Collector configurations shipped in
docs/deploy/ name the exporter and receivers as the Collector expects and point at the example
topology of docs/deploy.md; a collector sent calls of an episode another one stored says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from collector_process import metric_value, start_collector
from lake_place import LakePlace
from otlp_requests import request, tool_span

from loopscope import conventions

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "docs" / "deploy"


def _topology_grpc_endpoints() -> list[str]:
    """The loopscope collectors' gRPC endpoints in docs/deploy.md's one-machine commands."""
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    ports = re.findall(r"loopscope collector .*?--grpc-port (\d+)", text, re.DOTALL)
    return [f"127.0.0.1:{port}" for port in ports]


@pytest.mark.parametrize(("name", "routing"), [
    ("otelcol-by-trace.yaml", {"routing_key": "traceID"}),
    ("otelcol-by-episode.yaml", {"routing_key": "attributes",
                                 "routing_attributes": [conventions.EPISODE_ID]}),
])
def test_the_collector_configurations_route_to_the_example_topology(
        name: str, routing: dict[str, object]) -> None:
    config = yaml.safe_load((DEPLOY / name).read_text(encoding="utf-8"))
    assert set(config) == {"receivers", "exporters", "service"}
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    assert protocols["http"]["endpoint"].endswith(":4318")
    exporter = config["exporters"]["load_balancing"]
    assert {k: exporter[k] for k in routing} == routing
    assert exporter["protocol"]["otlp"]["tls"]["insecure"] is True
    assert "endpoint" not in exporter["protocol"]["otlp"]  # the resolver gives each one
    endpoints = _topology_grpc_endpoints()
    assert len(endpoints) == 2
    assert exporter["resolver"]["static"]["hostnames"] == endpoints
    traces = config["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"]
    assert traces["exporters"] == ["load_balancing"]


def _calls(trace: bytes, first: int, last: int) -> bytes:
    spans = [tool_span(trace, bytes([trace[0], i, 0, 0, 0, 0, 0, 1]), tool="search",
                       args='{"q": "same"}', result="r", start_ns=10**18 + i * 10**7)
             for i in range(first, last)]
    return request(spans).SerializeToString()


def test_a_collector_sent_an_episode_another_stored_counts_and_logs_it(
        lake: LakePlace, tmp_path: Path) -> None:
    """The first calls of one trace go to collector a, the next ones to b: b counts one
    misrouted episode on /metrics and logs it, naming a. a, restarted under its name and sent
    the rest of an episode it stored itself, counts none."""
    split, own = bytes([1] * 16), bytes([2] * 16)
    first = start_collector(tmp_path / "a.duckdb", grpc=False,
                            extra=[*lake.args, "--instance", "a"])
    second = start_collector(tmp_path / "b.duckdb", grpc=False,
                             extra=[*lake.args, "--instance", "b"])
    try:
        assert first.post(_calls(split, 0, 2))[0] == 200
        assert first.post(_calls(own, 0, 2))[0] == 200
        assert second.post(_calls(split, 2, 4))[0] == 200
        assert metric_value(second.get("/metrics"), "loopscope_runs_misrouted_total") == 1
        port = first.http_port
        first.stop()
        first = start_collector(tmp_path / "a.duckdb", grpc=False, http_port=port,
                                extra=[*lake.args, "--instance", "a"])
        assert first.post(_calls(own, 2, 4))[0] == 200
        assert metric_value(first.get("/metrics"), "loopscope_runs_misrouted_total") == 0
    finally:
        log_b = second.stop()
        first.stop()
    assert "was sent episode" in log_b and "collector 'a' stored" in log_b
