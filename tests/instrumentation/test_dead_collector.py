"""The real OTLP/HTTP exporter aimed at a dead collector: the agent never notices."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from opentelemetry import trace

import loopscope
from loopscope import _config

CALLS = 200


@pytest.fixture(autouse=True)
def _no_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ambient OTLP endpoint or disabled SDK would redirect or skip the exporter."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
                 "OTEL_SDK_DISABLED", "OTEL_BSP_SCHEDULE_DELAY", "LOOPSCOPE_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 with nobody listening (bound once, then closed)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers a byte."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept_and_sleep() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)  # keep it open, say nothing

    thread = threading.Thread(target=accept_and_sleep, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    server.close()


def _run_agent(endpoint: str) -> list[str]:
    """An agent doing CALLS distinct tool calls; any exception fails the test."""
    loopscope.instrument(endpoint=endpoint, mode="enforce", service_name="dead-collector")

    @loopscope.tool(kind="read")
    def lookup(n: int) -> str:
        return f"record {n}"

    with loopscope.episode(task="many calls") as ep:
        results = [lookup(i) for i in range(CALLS)]
        ep.set_outcome("success")
    return results


def _dropped_after_flush() -> dict[str, int]:
    """Flush until the processor has handed every span to the exporter (bounded tries)."""
    stats = _config.export_stats()
    for _ in range(5):
        trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
        stats = _config.export_stats()
        if stats["dropped"] >= CALLS:
            break
    return stats


@pytest.mark.timeout(60)
def test_closed_port_costs_only_dropped_spans(closed_port: int) -> None:
    """A refused connection would raise into the agent or block it."""
    results = _run_agent(f"http://127.0.0.1:{closed_port}")
    assert results == [f"record {i}" for i in range(CALLS)]
    stats = _dropped_after_flush()
    assert stats["exported"] == 0
    assert stats["dropped"] > 0
    assert stats["failed_exports"] >= 1


@pytest.mark.timeout(60)
def test_silent_collector_costs_only_dropped_spans(silent_port: int) -> None:
    """A collector that accepts but never answers would hang the agent."""
    results = _run_agent(f"http://127.0.0.1:{silent_port}")
    assert len(results) == CALLS
    stats = _dropped_after_flush()
    assert stats["exported"] == 0
    assert stats["dropped"] > 0
    assert stats["failed_exports"] >= 1
