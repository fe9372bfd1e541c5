"""loopscope's exporter (the real OTLP/HTTP one) against collectors that are dead, busy or slow:
the agent never notices, each case is told for what it is, and every span is counted.

A busy collector is a real ``loopscope collector`` whose store cannot be written (the file
deleted, and a directory where it would write it back): it answers every span request 503
with ``Retry-After: 2`` until the directory is removed, then recovers by itself
(tests/collector/test_chaos_store.py). A dead one is a port nobody listens on (connections
refused); a slow one accepts connections and never answers.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace

import loopscope
from loopscope import _config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "collector"))

from collector_process import CollectorProcess, eventually, start_collector

CALLS = 200
SPANS = CALLS + 1  # the tool calls and the episode's root
OTEL_RETRYING = "retrying in"
"""What OpenTelemetry's exporter logs before it waits to retry a batch."""


@pytest.fixture(autouse=True)
def _no_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ambient OTLP endpoint, timeout, queue size, exporter choice or disabled SDK would
    change what these tests see."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT",
                 "OTEL_TRACES_EXPORTER", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_SDK_DISABLED",
                 "OTEL_BSP_SCHEDULE_DELAY", "LOOPSCOPE_ENDPOINT"):
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


def _health(collector: CollectorProcess) -> int:
    try:
        with urllib.request.urlopen(collector.url + "/healthz", timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _block_store(collector: CollectorProcess) -> Path:
    """Make ``collector`` answer spans 503 + Retry-After until the returned folder is gone."""
    blocker = collector.db.with_name(collector.db.name + ".recovering")
    blocker.mkdir()
    collector.db.unlink()
    eventually(lambda: _health(collector) == 503)
    return blocker


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    """A real collector that stores what it is sent."""
    process = start_collector(tmp_path_factory.mktemp("ok") / "store.duckdb", grpc=False)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def busy_collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    """A real collector that answers every span request 503 with ``Retry-After: 2``."""
    process = start_collector(tmp_path_factory.mktemp("busy") / "store.duckdb", grpc=False)
    _block_store(process)
    yield process
    process.stop()


def _run_agent(endpoint: str, calls: int = CALLS) -> str:
    """An agent doing ``calls`` distinct tool calls; any exception fails the test. Returns
    the episode's id."""
    loopscope.instrument(endpoint=endpoint, mode="enforce", service_name="export-test",
                         frameworks=[])

    @loopscope.tool(kind="read")
    def lookup(n: int) -> str:
        return f"record {n}"

    with loopscope.episode(task="many calls") as ep:
        results = [lookup(i) for i in range(calls)]
        ep.set_outcome("success")
    assert results == [f"record {i}" for i in range(calls)]
    return ep.id


def _flush() -> dict[str, int]:
    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    return _config.export_stats()


def _told(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def _only(stats: dict[str, int], **expected: int) -> None:
    """``stats`` has the ``expected`` counters and every other ``dropped_*`` at 0."""
    others = {k: v for k, v in stats.items() if k.startswith("dropped_") and k not in expected}
    assert {k: stats[k] for k in expected} == expected, stats
    assert set(others.values()) == {0}, stats


@pytest.mark.timeout(60)
def test_a_refused_connection_is_unreachable_and_never_retried(
        closed_port: int, caplog: pytest.LogCaptureFixture) -> None:
    """Nobody listens: "collector unreachable" (once), every span counted as dropped for that,
    and no retry waited out (the exporter would retry a refused connection for its whole
    timeout, holding the export thread and the flush at exit)."""
    caplog.set_level(logging.WARNING, logger="loopscope")
    _run_agent(f"http://127.0.0.1:{closed_port}")
    stats = _flush()
    assert not _told(caplog, OTEL_RETRYING) and not _told(caplog, "busy")
    assert len(_told(caplog, "collector unreachable")) == 1
    assert "connection refused" in _told(caplog, "collector unreachable")[0]
    _only(stats, exported=0, dropped=SPANS, dropped_unreachable=SPANS)


@pytest.mark.timeout(60)
def test_a_silent_collector_is_slow_not_unreachable(
        silent_port: int, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A collector that accepts and never answers costs the agent nothing either; it is told
    as slow (within the timeout the user set), not as unreachable."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")
    caplog.set_level(logging.WARNING, logger="loopscope")
    _run_agent(f"http://127.0.0.1:{silent_port}")
    stats = _flush()
    assert not _told(caplog, "unreachable")
    assert _told(caplog, "collector slow: no answer from")
    assert "within the 1 s export timeout" in _told(caplog, "collector slow")[0]
    _only(stats, exported=0, dropped=SPANS, dropped_timed_out=SPANS)


@pytest.mark.timeout(120)
def test_a_busy_collector_is_retried_until_it_stores_every_span(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A collector answering 503 + Retry-After is told "collector busy, retrying", and the
    exporter keeps retrying the batch (within the timeout the user set: 60 s here, so the
    test does not depend on how fast the store recovers); once the collector recovers, every
    span is exported and stored, none dropped."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "60")
    caplog.set_level(logging.INFO, logger="loopscope")
    collector = start_collector(tmp_path / "store.duckdb", grpc=False)
    try:
        blocker = _block_store(collector)
        episode_id = _run_agent(collector.url)
        eventually(lambda: _told(caplog, "collector busy, retrying"), timeout=30)
        blocker.rmdir()
        eventually(lambda: _config.export_stats()["exported"] == SPANS, timeout=90)
        eventually(lambda: len(collector.read("episode_spans", episode_id=episode_id)) == SPANS)
    finally:
        collector.stop()
    _only(_config.export_stats(), exported=SPANS, dropped=0)
    assert len(_told(caplog, "collector busy, retrying")) == 1
    assert "HTTP 503" in _told(caplog, "collector busy")[0]
    assert _told(caplog, "collector accepting spans again")
    assert not _told(caplog, "unreachable")


@pytest.mark.timeout(90)
def test_busy_past_the_export_timeout_is_kept_and_sent_again(
        busy_collector: CollectorProcess, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A collector still busy when the export timeout (3 s here) runs out: the batch is not
    dropped (issue 29: with throttling honoured, nothing is dropped while the queue has room)
    but kept and sent again after its Retry-After (2 s, what the exporter waited between
    attempts), told once; only the bounded flush at exit gives it up, counted at exit, never
    as unreachable."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "3")
    caplog.set_level(logging.WARNING, logger="loopscope")
    _run_agent(busy_collector.url)
    eventually(lambda: _told(caplog, "still busy after the 3 s export timeout"), timeout=30)
    eventually(lambda: len(_told(caplog, f"{OTEL_RETRYING} 2.00s")) >= 2, timeout=30)
    _only(_config.export_stats(), exported=0, dropped=0)  # kept, past the timeout
    assert not _told(caplog, "unreachable")
    assert len(_told(caplog, "collector busy, retrying")) == 1
    assert "Retry-After 2 s" in _told(caplog, "collector busy, retrying")[0]
    assert len(_told(caplog, "still busy after the 3 s export timeout")) == 1
    _config._STATE.processor.shutdown()  # type: ignore[union-attr]  # (the process's exit)
    _only(_config.export_stats(), exported=0, dropped=SPANS, dropped_at_exit=SPANS)


EXITING_AGENT = textwrap.dedent("""
    import atexit, json, logging, sys
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    from loopscope import _config
    # Registered before instrument() creates the provider, so it runs after its shutdown.
    atexit.register(lambda: print(json.dumps(_config.export_stats()), flush=True))
    import loopscope
    loopscope.instrument(endpoint=sys.argv[1], service_name="exiting", frameworks=[])

    @loopscope.tool(kind="read")
    def lookup(n):
        return n

    with loopscope.episode(task="exit with spans queued"):
        for i in range(1000):
            lookup(i)
""")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("collector_is", ["busy", "dead"])
def test_exit_is_bounded_and_what_is_left_is_counted(
        collector_is: str, busy_collector: CollectorProcess, closed_port: int) -> None:
    """An agent that exits with 1001 spans queued for a busy collector (the exporter would
    retry for its 10 s timeout per batch, and OpenTelemetry's shutdown waits up to 30 s) or a
    dead one: the process exits (the bound asserted is generous: 25 s, for a flush of 5 s),
    and every span is counted: sent within the bound, or dropped at exit."""
    url = busy_collector.url if collector_is == "busy" else f"http://127.0.0.1:{closed_port}"
    done = subprocess.run([sys.executable, "-c", EXITING_AGENT, url], capture_output=True,
                          text=True, timeout=25, check=False)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    if collector_is == "busy":
        _only(stats, exported=0, dropped=1001, dropped_at_exit=1001)
        assert "collector busy, retrying" in done.stderr
        assert "1001 spans were not sent within 5 s at shutdown" in done.stderr
        assert "unreachable" not in done.stderr
    else:
        _only(stats, exported=0, dropped=1001, dropped_unreachable=1001)
        assert "collector unreachable" in done.stderr
        assert "not sent within" not in done.stderr


@pytest.mark.timeout(90)
def test_a_batch_being_stored_at_exit_is_counted_by_its_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At exit, a batch the collector is still storing when the flush's time (1 s here) runs
    out is counted by its answer: the collector stores it, so the SDK counts it exported (it
    counted it dropped at exit, and its counts disagreed with the store's: issue 29). What
    was still queued then is dropped at exit; each span is in one counter."""
    from loopscope import _export
    from loopscope_collector.pipeline.thread import Pipeline
    from loopscope_collector.reads import read
    from loopscope_collector.serve.http_server import CollectorHTTPServer
    from loopscope_collector.storage import open_database

    monkeypatch.setattr(_export, "EXIT_FLUSH_S", 1.0)
    storing, answer = threading.Event(), threading.Event()

    def hold_the_answer(pipeline: object, results: object) -> None:  # (after the commit)
        storing.set()
        answer.wait(60)

    db = open_database(tmp_path / "store.duckdb")
    pipeline = Pipeline(db, on_batch=hold_the_answer).start()
    server = CollectorHTTPServer(("127.0.0.1", 0), pipeline=pipeline, db=db)
    server.serve_in_thread()
    try:
        episode_id = _run_agent(f"http://127.0.0.1:{server.server_address[1]}")
        assert storing.wait(60)
        processor = _config._STATE.processor
        assert processor is not None
        exiting = threading.Thread(target=processor.shutdown)
        exiting.start()
        exiting.join(2.0)  # (past the flush's 1 s: the batch is still being sent)
        answer.set()
        exiting.join(30)
        stored = len(read(db, "episode_spans", {"episode_id": episode_id}))
        assert stored == pipeline.stats.spans_stored
    finally:
        answer.set()
        server.shutdown()
        server.server_close()
        pipeline.stop()
        db.close()
    stats = _config.export_stats()
    assert stats["exported"] == stored > 0
    _only(stats, exported=stored, dropped=SPANS - stored, dropped_at_exit=SPANS - stored)


@pytest.mark.timeout(90)
def test_a_burst_past_the_queue_is_counted_not_lost_silently(
        silent_port: int, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the queue at 600 spans (``OTEL_BSP_MAX_QUEUE_SIZE``) and the first batch (512)
    stuck on a collector that does not answer, a burst of 2000 spans: at most 1112 can be
    held, the others are counted as dropped for a full queue (told once); the shutdown then
    counts the rest as dropped at exit. Every span is in one counter."""
    from loopscope import _export

    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "600")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "30")
    monkeypatch.setattr(_export, "EXIT_ANSWER_S", 0.5)  # (no answer comes: not 5 s for it)
    caplog.set_level(logging.WARNING, logger="loopscope")
    _run_agent(f"http://127.0.0.1:{silent_port}", calls=1999)
    processor = _config._STATE.processor
    assert processor is not None
    processor.shutdown()
    stats = _config.export_stats()
    assert stats["dropped_queue_full"] >= 2000 - 512 - 600
    _only(stats, exported=0, dropped=2000, dropped_queue_full=stats["dropped_queue_full"],
          dropped_at_exit=2000 - stats["dropped_queue_full"])
    assert len(_told(caplog, "span queue is full (600 spans")) == 1
    assert _told(caplog, "were not sent within 5 s at shutdown")


def test_the_export_timeout_is_opentelemetrys_unless_set(
        closed_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """loopscope's old 2 s timeout gave up on a busy collector before its first Retry-After;
    the default is now OpenTelemetry's 10 s, and its variables set it (the signal's first)."""
    url = f"http://127.0.0.1:{closed_port}"

    def timeout_s() -> float:
        _config.reset_for_tests()
        loopscope.instrument(endpoint=url, frameworks=[])
        processor = _config._STATE.processor
        assert processor is not None
        return float(processor.exporter.timeout_s)  # (an ExportProcessor)

    assert timeout_s() == 10.0
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "7")
    assert timeout_s() == 7.0
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2.5")
    assert timeout_s() == 2.5
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "soon")
    with pytest.raises(ValueError, match=r"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT.*'soon'"):
        timeout_s()


def test_otel_traces_exporter_none_adds_no_exporter_and_the_guard_still_works(
        closed_port: int, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """``OTEL_TRACES_EXPORTER=none``: loopscope adds no exporter (it added its own), and the
    guard, which runs in the process, still stops a loop."""
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{closed_port}")
    caplog.set_level(logging.INFO, logger="loopscope")
    loopscope.instrument(mode="enforce", frameworks=[])
    assert _config._STATE.processor is None
    assert _told(caplog, "adding no exporter of its own: $OTEL_TRACES_EXPORTER is none")

    @loopscope.tool(kind="read")
    def search(query: str) -> str:
        return "nothing new"

    with pytest.raises(loopscope.LoopDetected), loopscope.episode(task="spin"):
        for _ in range(10):
            search("same")
    assert set(_config.export_stats().values()) == {0}


USERS_PROVIDER = textwrap.dedent("""
    import json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import loopscope

    provider = TracerProvider()
    mine = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(mine))
    trace.set_tracer_provider(provider)
    loopscope.instrument(frameworks=[], **({"endpoint": sys.argv[1]} if sys.argv[1:] else {}))

    @loopscope.tool(kind="read")
    def lookup(n):
        return n

    with loopscope.episode(task="three calls") as ep:
        for i in range(3):
            lookup(i)
    provider.force_flush()
    print(json.dumps({"processors": len(provider._active_span_processor._span_processors),
                      "mine": len(mine.get_finished_spans()), "episode": ep.id,
                      "loopscope": loopscope.export_stats()}))
""")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("endpoint_argument", [False, True])
def test_a_provider_the_user_configured_gets_no_exporter_unless_an_endpoint_is_passed(
        endpoint_argument: bool, collector: CollectorProcess) -> None:
    """A process whose TracerProvider already has the user's span processor (and exporter):
    ``instrument()`` adds none of its own, although ``$OTEL_EXPORTER_OTLP_ENDPOINT`` names a
    collector (it used to add one, and every span went out twice). ``endpoint=`` still adds
    loopscope's beside the user's: both get every span, and the collector stores them."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "LOOPSCOPE_"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.url
    args = [collector.url] if endpoint_argument else []
    done = subprocess.run([sys.executable, "-c", USERS_PROVIDER, *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["mine"] == 4
    if endpoint_argument:
        assert seen["processors"] == 2
        assert seen["loopscope"]["exported"] == 4
        eventually(lambda: len(collector.read("episode_spans", episode_id=seen["episode"])) == 4)
    else:
        assert seen["processors"] == 1
        assert seen["loopscope"] == {k: 0 for k in seen["loopscope"]}
