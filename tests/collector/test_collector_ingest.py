"""The OTLP/HTTP contract: bad input gets its 4xx and the collector keeps serving; acknowledged
spans survive kill -9; retries are not counted twice; auth and loopback rules."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from collector_process import CollectorProcess, eventually, metric_value, start_collector
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from otlp_requests import _kv, episode_request, request, tool_span

from loopscope_collector.storage import SchemaError, open_database

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[CollectorProcess]:
    proc = start_collector(tmp_path / "store.duckdb", extra=["--max-request-bytes", "1000000"])
    yield proc
    proc.stop()


def _still_serving(collector: CollectorProcess) -> None:
    request, _ = episode_request(2)
    status, _, _ = collector.post(request.SerializeToString())
    assert status == 200


@pytest.mark.parametrize(
    ("body", "content_type", "headers", "status", "says"),
    [
        (b"\x0a\xff\xff\xff", "application/x-protobuf", {}, 400, "protobuf"),
        (b'{"resourceSpans": [', "application/json", {}, 400, "JSON"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": '
         b'"0102030405060708", "name": "x"}]}]}]}', "application/json", {}, 400, "traceId"),
        (b"hello", "text/plain", {}, 415, "application/x-protobuf"),
        (b"\x00" * 10, "application/x-protobuf", {"Content-Encoding": "br"}, 415, "br"),
        (b"\x00" * 1_500_000, "application/x-protobuf", {}, 413, "limit"),
        (gzip.compress(b"\x00" * 50_000_000), "application/x-protobuf",
         {"Content-Encoding": "gzip"}, 413, ""),
        (zlib.compress(b"not a protobuf at all"), "application/x-protobuf",
         {"Content-Encoding": "deflate"}, 400, ""),
    ],
    ids=["bad-protobuf", "bad-json", "bad-trace-id", "wrong-type", "unknown-encoding",
         "too-large", "gzip-bomb", "deflate-garbage"],
)
def test_bad_input_gets_its_status_and_the_collector_keeps_serving(
    collector: CollectorProcess, body: bytes, content_type: str, headers: dict[str, str],
    status: int, says: str,
) -> None:
    """Each class of bad request is refused with its own status and a message naming the
    problem; nothing is stored from it; good requests still succeed afterwards."""
    got, _, answer = collector.post(body, content_type=content_type, headers=headers)
    assert got == status
    if says and content_type == "application/json":
        assert says in json.loads(answer)["message"]
    elif says:
        assert says.encode() in answer
    _still_serving(collector)
    assert collector.read("summary")[0]["tool_calls"] == 2


def test_json_and_protobuf_both_acknowledge_with_an_empty_response(
    collector: CollectorProcess,
) -> None:
    """OTLP/JSON with hex ids and string int64s is accepted; the answer is an empty
    ExportTraceServiceResponse in the request's encoding."""
    body = {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "json-agent"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
            "name": "execute_tool lookup", "kind": 1,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000100000000",
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
                {"key": "unknownField", "value": {"intValue": "7"}}],
            "someFutureField": {"x": 1}}]}]}]}
    status, headers, answer = collector.post(json.dumps(body).encode(),
                                             content_type="application/json")
    assert (status, json.loads(answer)) == (200, {})
    request, _ = episode_request(1)
    status, headers, answer = collector.post(request.SerializeToString())
    assert status == 200 and headers["Content-Type"] == "application/x-protobuf"
    assert answer == b""  # an empty ExportTraceServiceResponse serialises to no bytes
    calls = eventually(lambda: collector.read("episode_tool_calls",
                                              episode_id="5b8efff798038103d269b633813fc60c"))
    assert calls[0]["tool"] == "lookup"


def test_a_retried_request_is_not_counted_twice(collector: CollectorProcess) -> None:
    """Ingest is idempotent by (trace_id, span_id)."""
    request, _ = episode_request(5)
    body = request.SerializeToString()
    for _ in range(3):
        assert collector.post(body)[0] == 200
    assert collector.read("summary")[0]["tool_calls"] == 5
    metrics = collector.get("/metrics")
    assert "loopscope_spans_duplicate_total 10" in metrics


def test_kill_9_loses_no_acknowledged_span_and_stores_no_duplicate(tmp_path: Path) -> None:
    """Under concurrent load, kill -9: a 200 comes once the request is in the spool, before
    its batch is stored, so the kill leaves acknowledged spans unstored (and may cut a
    record off mid-write: one is cut off here). The restart replays the spool before it
    serves (its start line says how many requests), skips the torn record with a log line,
    and every acknowledged span is there, none taken for a span "sent again with different
    content"; re-sending everything (as clients retry) adds nothing."""
    db = tmp_path / "store.duckdb"
    collector = start_collector(db)
    acked: list[str] = []
    sent: list[bytes] = []
    lock = threading.Lock()
    stop = threading.Event()

    def sender() -> None:
        while not stop.is_set():
            request, ids = episode_request(50)
            body = request.SerializeToString()
            with lock:
                sent.append(body)
            try:
                status, _, _ = collector.post(body)
            except OSError:
                return  # the collector died mid-request: not acknowledged
            if status == 200:
                with lock:
                    acked.extend(ids)

    threads = [threading.Thread(target=sender) for _ in range(4)]
    for thread in threads:
        thread.start()
    eventually(lambda: len(acked) >= 2000, timeout=60)
    collector.kill()
    stop.set()
    for thread in threads:
        thread.join(30)
    segments = sorted(Path(f"{db}.spool").glob("*.seg"))
    with segments[-1].open("ab") as segment:  # a record whose write the kill cut off
        segment.write(bytes([0x40, 0x0D, 0, 0]) + bytes(9) + b"\x0a\x02")

    replayed = start_collector(db)
    try:  # the replay stored acknowledged spans the kill had left unstored
        assert metric_value(replayed.get("/metrics"), "loopscope_spans_stored_total") > 0
    finally:
        log = replayed.stop()
    started = replayed.proc.stdout.read() if replayed.proc.stdout else ""
    count = re.search(r"\((\d+) request\(s\), \d+ span\(s\) replayed\)", started)
    assert count and int(count.group(1)) >= 1, started
    assert "is skipped" in log and "different content" not in log, log
    con = duckdb.connect(str(db), read_only=True)
    stored = {row[0] for row in con.execute("select span_id from spans").fetchall()}
    con.close()
    assert set(acked) <= stored

    restarted = start_collector(db)
    try:
        for body in sent:  # every client retries what it sent (503: later, as exporters do)
            assert restarted.taken(body)[0] == 200
    finally:
        restarted.stop()
    con = duckdb.connect(str(db), read_only=True)
    total, distinct = con.execute(
        "select count(*), count(distinct (trace_id, span_id)) from tool_calls").fetchone()
    assert total == distinct == 50 * len(sent)
    con.close()


def test_auth_token_is_required_when_set(tmp_path: Path) -> None:
    """With --auth-token, a request without the bearer token is refused with 401."""
    collector = start_collector(tmp_path / "auth.duckdb", token="s3cret")
    try:
        request, _ = episode_request(1)
        assert collector.post(request.SerializeToString())[0] == 200
        collector.token = None
        assert collector.post(request.SerializeToString())[0] == 401
    finally:
        collector.stop()


def test_refuses_a_non_loopback_address_without_a_token(tmp_path: Path) -> None:
    """Listening on the network without authentication needs an explicit --insecure-remote."""
    result = subprocess.run(
        [sys.executable, "-m", "loopscope", "collector", "--host", "0.0.0.0",
         "--db", str(tmp_path / "x.duckdb")],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "--auth-token" in result.stderr and "--insecure-remote" in result.stderr


def test_labels_are_written_by_the_collector_and_validated(collector: CollectorProcess) -> None:
    """POST /v1/labels stores a human verdict (replacing an earlier one); a bad label is a 400
    naming the field."""
    import urllib.error
    import urllib.request

    def post(label: dict) -> tuple[int, dict]:
        req = urllib.request.Request(collector.url + "/v1/labels", method="POST",
                                     data=json.dumps(label).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    assert post({"episode_id": "ep-1", "label": "true_loop"})[0] == 200
    assert post({"episode_id": "ep-1", "label": "no_loop", "note": "polling"})[0] == 200
    status, answer = post({"episode_id": "ep-1", "label": "maybe"})
    assert status == 400 and "label" in answer["error"]
    status, answer = post({"label": "true_loop"})
    assert status == 400 and "episode_id" in answer["error"]
    collector.stop()
    con = duckdb.connect(str(collector.db), read_only=True)
    assert con.execute("select label, note from labels").fetchall() == [("no_loop", "polling")]
    con.close()


def test_a_second_collector_on_the_same_store_or_port_is_refused_clearly(
    collector: CollectorProcess, tmp_path: Path,
) -> None:
    """One writer per DuckDB file, one owner per port: the second gets a one-line error, not
    a traceback, and the first keeps serving."""
    def second(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "loopscope", "collector", *args],
                              capture_output=True, text=True, timeout=60)

    locked = second("--db", str(collector.db), "--http-port", "0", "--grpc-port", "0")
    assert locked.returncode == 1 and "another --db" in locked.stderr
    assert "Traceback" not in locked.stderr
    taken = second("--db", str(tmp_path / "other.duckdb"), "--http-port",
                   str(collector.http_port), "--grpc-port", "0")
    assert taken.returncode == 1 and "another --http-port" in taken.stderr
    grpc_taken = second("--db", str(tmp_path / "third.duckdb"), "--http-port", "0",
                        "--grpc-port", str(collector.grpc_port))
    assert grpc_taken.returncode == 1 and "another --grpc-port" in grpc_taken.stderr
    assert grpc_taken.stderr.count("\n") == 1, grpc_taken.stderr  # no raw gRPC log line
    assert not list(tmp_path.glob("third.duckdb*")) and not list(tmp_path.glob("other.duckdb*"))
    _still_serving(collector)


def test_a_store_that_is_not_a_duckdb_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    """DuckDB reads a path named like data (runs.jsonl) as that data on an in-memory database:
    a collector on it would acknowledge spans and lose them. It is refused, the file is left
    as it was, and the message names the problem (not a lock); so are out-of-range ports."""
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "loopscope", "collector", *args,
                               "--http-port", "0", "--grpc-port", "0"],
                              capture_output=True, text=True, timeout=60)

    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"episode_id": "e", "steps": []}\n', encoding="utf-8")
    refused = run("--db", str(runs))
    assert refused.returncode == 1 and "not a DuckDB file" in refused.stderr
    assert "another --db" not in refused.stderr and "Traceback" not in refused.stderr
    assert runs.read_text(encoding="utf-8") == '{"episode_id": "e", "steps": []}\n'
    missing_dir = run("--db", str(tmp_path / "no" / "such" / "x.duckdb"))
    assert missing_dir.returncode == 1 and "another --db" not in missing_dir.stderr
    bad_port = subprocess.run([sys.executable, "-m", "loopscope", "collector", "--grpc-port",
                               "70001"], capture_output=True, text=True, timeout=60)
    assert bad_port.returncode == 2 and "out of range" in bad_port.stderr
    db = tmp_path / "fine.duckdb"
    with pytest.raises(SchemaError, match="not a DuckDB file"):
        open_database(runs)
    open_database(db).close()  # a new file of any name that DuckDB stores into is fine
    open_database(db, read_only=True).close()


def test_a_run_stored_unnamed_takes_the_agent_name_a_later_span_brings(
        collector: CollectorProcess) -> None:
    """GenAI instrumentations name the agent on its model turns and agent span, which end
    (and are exported) after the tool calls: the run, stored unnamed from the first batch,
    takes the name when the named span arrives in a later one. A named run keeps its name."""
    trace, parent = bytes.fromhex("7a" * 16), bytes.fromhex("7b" * 8)
    calls = [tool_span(trace, bytes([0x70 + i]) * 8, tool="search", args=f'{{"q": "{i}"}}',
                       result=f"r{i}", start_ns=1_700_000_000_000_000_000 + i * 10**7,
                       parent=parent) for i in range(3)]
    assert collector.post(request(calls).SerializeToString())[0] == 200
    episode = trace.hex()
    assert [r["agent"] for r in collector.read("episode", episode_id=episode)] == [None]

    def turn(agent: str, span_id: bytes) -> Span:
        return Span(trace_id=trace, span_id=span_id, parent_span_id=parent,
                    name="chat gpt-4o", kind=Span.SPAN_KIND_CLIENT,
                    start_time_unix_nano=1_700_000_000_000_000_000,
                    end_time_unix_nano=1_700_000_000_100_000_000,
                    attributes=[_kv("gen_ai.operation.name", "chat"),
                                _kv("gen_ai.agent.name", agent)])

    assert collector.post(request([turn("support", b"\x7c" * 8)]).SerializeToString())[0] == 200
    assert [r["agent"] for r in collector.read("episode", episode_id=episode)] == ["support"]
    assert collector.post(request([turn("other", b"\x7d" * 8)]).SerializeToString())[0] == 200
    assert [r["agent"] for r in collector.read("episode", episode_id=episode)] == ["support"]
