"""Spans lost before the store, end to end as a user meets them: an agent (the real SDK) makes
half its calls while no collector listens, then a real collector starts and takes the rest.
The SDK's own counts reach the collector with the next batch that gets through, and the store,
the SDK, `/metrics`, `loopscope metrics` and the Overview page all give the same loss and name
the run incomplete."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from app_pages import APP
from collector_process import free_port, start_collector
from opentelemetry import trace
from streamlit.testing.v1 import AppTest

import loopscope
from loopscope import _config, _export
from loopscope.offline.cli import main

pytestmark = pytest.mark.timeout(180)
BEFORE, AFTER = 40, 30
"""Tool calls made while nothing listens (dropped), and after the collector started."""


def test_spans_the_sdk_dropped_are_counted_and_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
                 "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "LOOPSCOPE_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_export, "DOWN_BACKOFF_S", 0.0)  # try the collector again at once
    port = free_port()
    loopscope.instrument(endpoint=f"http://127.0.0.1:{port}", service_name="lossy-service",
                         frameworks=[])

    # (the process's provider may be an earlier test's, under its service name)
    service = trace.get_tracer_provider().resource.attributes["service.name"]  # type: ignore[attr-defined]

    @loopscope.tool(kind="read")
    def lookup(n: int) -> str:
        return f"record {n}"

    collector = None
    try:
        with loopscope.episode(task="look records up", episode_id="half-lost",
                               label={"loop": True}) as ep:
            for n in range(BEFORE):
                lookup(n)
            trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
            dropped = _config.export_stats()["dropped_unreachable"]
            assert dropped == BEFORE
            collector = start_collector(tmp_path / "store.duckdb", grpc=False, http_port=port)
            for n in range(BEFORE, BEFORE + AFTER):
                lookup(n)
                if n == BEFORE + 9:  # two batches after the loss: the first report is early
                    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
            ep.set_outcome("success")
        trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
        stats = _config.export_stats()
        assert stats["exported"] == AFTER + 1 and stats["dropped"] == BEFORE, stats

        # the store, per service and instance: what the SDK counted
        row = collector.read("span_loss", service=service)[-1]
        assert (row["dropped"], row["unreachable"], row["instances"],
                row["incomplete_runs"]) == (BEFORE, BEFORE, 1, 1)
        assert (row["started"], row["exported"]) == (stats["started"], stats["exported"])
        assert len(collector.read("episode_tool_calls", episode_id="half-lost")) == AFTER

        metrics = collector.get("/metrics")
        assert (f'loopscope_agent_spans_dropped_total{{reason="unreachable",'
                f'service="{service}"}} {BEFORE}') in metrics
        assert "loopscope_incomplete_runs 1" in metrics

        assert main(["metrics", "--collector", collector.url]) == 0
        out = capsys.readouterr().out
        assert (f"spans lost before the store {BEFORE} dropped by the agents' SDKs "
                f"(unreachable {BEFORE}; by service: {service} {BEFORE}); 1 runs named "
                "as incomplete") in out
        assert "runs                       1 (1 incomplete: spans lost on the way)" in out
        assert re.search(r"loop-detection rate +0\.0% \(0/1; 1 runs incomplete,", out), out
        assert main(["metrics", "--collector", collector.url, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["incomplete_episodes"] == 1
        assert report["spans_lost"]["by_reason"]["unreachable"] == BEFORE
    finally:
        if collector is not None:
            collector.stop()

    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(tmp_path / "store.duckdb"))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, at.exception
    warning = "\n".join(str(w.value) for w in at.warning)
    assert (f"**{BEFORE} spans lost before the store**: dropped by the agents' SDKs "
            f"(unreachable {BEFORE}; by service: {service} {BEFORE})") in warning
    assert "**1 run incomplete** in this window" in warning
    captions = "\n".join(str(c.value) for c in at.caption)
    assert "0 of 1 labelled loops (1 run incomplete)" in captions
