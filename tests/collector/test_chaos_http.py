"""Chaos: HTTP as a hostile client speaks it (issue 20, cases 1-3 and 10).

Every request gets an HTTP answer: a body that does not decode is a 400 (never a closed
connection), a request that cannot be framed is a 400 (uvicorn and h11 frame HTTP), slow
bodies hold only the bytes they sent and are evicted first when a faster client needs room,
wrong methods are 405 with Allow, a read that fails on the collector's side is a 5xx, a
read parameter the read cannot take is a 400 naming it (issue 29), and the ``Server`` header
names no Python version.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import duckdb
import grpc
import pytest
from collector_process import CollectorProcess, eventually, start_collector
from otlp_requests import episode_request

from loopscope_collector.pipeline.thread import Pipeline
from loopscope_collector.receive.connections import ConnectionWatch
from loopscope_collector.serve.http_server import CollectorHTTPServer
from loopscope_collector.storage import open_database
from loopscope_collector.storage.errors import store_failures

pytestmark = pytest.mark.timeout(240)

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[CollectorProcess]:
    proc = start_collector(tmp_path / "store.duckdb")
    yield proc
    proc.stop()


def _span_json(**fields: object) -> dict[str, object]:
    span: dict[str, object] = {"traceId": os.urandom(16).hex(), "spanId": os.urandom(8).hex(),
                               "name": "x", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    span.update(fields)
    return span


def _json_body(span: dict[str, object]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


def _malformed() -> list[tuple[str, bytes, str]]:
    """Case 1: JSON that Python's own conversions refuse (not the decoder's checks)."""
    digits = _json_body(_span_json()).replace('"startTimeUnixNano": "1"',
                                              '"startTimeUnixNano": ' + "9" * 5000)
    double = _json_body(_span_json(attributes=[{"key": "a", "value": {"doubleValue": 0}}]))
    double = double.replace('"doubleValue": 0', '"doubleValue": 1' + "0" * 400)
    return [
        ("a number of 5,000 digits", digits.encode(), "invalid JSON"),
        ("doubleValue 1 and 400 zeros", double.encode(),
         "attributes[0].value.doubleValue: 1000"),
        ('"kind": "²"', _json_body(_span_json(kind="²")).encode(), "spans[0].kind: expected"),
        ('"startTimeUnixNano": "²"', _json_body(_span_json(startTimeUnixNano="²")).encode(),
         "startTimeUnixNano: expected an integer"),
    ]


def test_malformed_json_gets_a_400_and_the_connection_stays_usable(
    collector: CollectorProcess,
) -> None:
    """Case 1: each body is answered 400 naming what is wrong (an exporter does not retry a
    400), on a connection that then serves a good request; nothing is logged as a crash."""
    conn = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=30)
    for what, body, says in _malformed():
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        text = answer.read().decode()
        assert answer.status == 400, (what, answer.status, text)
        assert says in json.loads(text)["message"], (what, text)
    conn.request("POST", "/v1/traces", episode_request(2)[0].SerializeToString(),
                 {"Content-Type": "application/x-protobuf"})
    assert conn.getresponse().status == 200
    conn.close()
    assert collector.read("summary")[0]["tool_calls"] == 2
    log = collector.stop()
    assert "Traceback" not in log and "Exception in ASGI" not in log


def _raw(collector: CollectorProcess, data: bytes) -> bytes:
    """Send ``data`` as is; everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", collector.http_port), timeout=30) as sock:
        sock.sendall(data)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    return answer


def test_requests_that_cannot_be_framed_get_a_400(collector: CollectorProcess) -> None:
    """Case 2: a non-ASCII digit in Content-Length, two Content-Lengths that disagree, and
    Content-Length beside chunked encoding are ambiguous framing: each is answered 400 and
    the connection closed, and a normal client is served meanwhile."""
    head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    for framing in (
        "Content-Length: ٣\r\n".encode(),  # an Arabic-Indic three: str.isdigit() says yes
        "Content-Length: ３\r\n".encode(),  # a fullwidth three
        b"Content-Length: 2\r\nContent-Length: 3\r\n",
        b"Content-Length: 2, 3\r\n",
        b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
        b"Content-Length: -1\r\n",
        b"Content-Length: 1e3\r\n",
    ):
        answer = _raw(collector, head + framing + b"\r\n{}\r\n")
        assert answer.startswith(b"HTTP/1.1 400 "), (framing, answer)
        assert collector.post(episode_request(1)[0].SerializeToString())[0] == 200


def _until_closed(sock: socket.socket) -> bytes:
    answer = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_body_declared_over_the_limit_is_413_at_once_and_the_connection_closed(
    collector: CollectorProcess,
) -> None:
    """Issue 29: a POST declaring 40 MiB (over --max-request-bytes), without ``Expect:
    100-continue``, is answered 413 as soon as its headers arrive, before any byte of its
    body, and the connection is closed (before: the whole body was read first). A client
    that writes its whole body before it reads (as http.client does) still reads the 413:
    what it sends after the answer is dropped, not met with a reset."""
    head = (b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: " + str(40 * 2**20).encode() + b"\r\n\r\n")
    with socket.create_connection(("127.0.0.1", collector.http_port), timeout=30) as sock:
        sock.sendall(head)  # and nothing of the body
        answer = _until_closed(sock)
    status, headers, body = _head(answer)
    assert status == b"HTTP/1.1 413 Request Entity Too Large", answer[:300]
    assert headers[b"connection"] == b"close"
    assert b"over the limit" in body
    conn = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=30)
    conn.request("POST", "/v1/traces", bytes(40 * 2**20),
                 {"Content-Type": "application/x-protobuf"})
    refused = conn.getresponse()
    assert refused.status == 413 and b"over the limit" in refused.read()
    conn.close()
    assert collector.post(episode_request(1)[0].SerializeToString())[0] == 200


def test_a_post_framed_by_neither_length_nor_chunks_is_411(collector: CollectorProcess) -> None:
    """Issue 29: a POST without Content-Length and not chunked has no body in HTTP/1.1, so
    the spans its client meant to send were lost behind a 200 (protobuf: an empty export) or
    a 400 (JSON), and the bytes that followed were read as a next request. It is answered
    411 Length Required and the connection closed, what followed dropped unread; a chunked
    body is stored."""
    spans = episode_request(2)[0].SerializeToString()
    for path, content_type in (("/v1/traces", "application/x-protobuf"),
                               ("/v1/traces", "application/json"),
                               ("/v1/labels", "application/json")):
        answer = _raw(collector, f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                 f"{content_type}\r\n\r\n".encode() + spans)
        status, headers, rest = _head(answer)
        assert status == b"HTTP/1.1 411 Length Required", (path, answer[:300])
        assert headers[b"connection"] == b"close"
        assert b"Content-Length or chunked" in rest and b"HTTP/1.1" not in rest, rest
    conn = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=30)
    conn.request("POST", "/v1/traces", iter([spans[:10], spans[10:]]),
                 {"Content-Type": "application/x-protobuf"}, encode_chunked=True)
    assert conn.getresponse().status == 200
    assert collector.read("summary")[0]["tool_calls"] == 2


_FIELDS = b"".join(b"X-%d: v\r\n" % i for i in range(2000))


_OVER_LIMITS: list[tuple[str, bytes, bytes]] = [
    ("a 10,000-byte URI", b"GET /healthz?" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
     b"414"),
    ("a 20,000-byte URI", b"GET /healthz?" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
     b"414"),
    ("a 20,000-byte URI, its end never sent", b"GET /healthz?" + b"a" * 20_000,
     b"414"),
    ("a 100 KiB header", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 102_400
     + b"\r\n\r\n", b"431"),
    ("a 100 KiB header, the head's end never sent",
     b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 102_400,
     b"431"),
    ("2,000 headers", b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n" + _FIELDS
     + b"Content-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
     b"431"),
    ("2,000 short headers in 8 KiB", b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
     + b"".join(b"%d:\r\n" % (i % 10) for i in range(2000)) + b"\r\n",
     b"431"),
]


def test_a_head_over_its_limits_is_414_or_431(collector: CollectorProcess) -> None:
    """Issue 29: a request target over 8 KiB is 414, a head over 16 KiB or of more than 100
    header fields 431, whether the head arrives whole or never ends, and the connection is
    closed (before: 200 for those that arrived whole, 400 for the others); a normal client
    is served meanwhile."""
    wrong = []
    for what, data, status in _OVER_LIMITS:
        with socket.create_connection(("127.0.0.1", collector.http_port), timeout=30) as sock:
            sock.sendall(data)
            answer = _until_closed(sock)
        if (not answer.startswith(b"HTTP/1.1 " + status + b" ")
                or _head(answer)[1].get(b"connection") != b"close"):
            wrong.append((what, answer[:200]))
        assert collector.get("/healthz") == "ok\n"
    assert not wrong, "\n".join(map(str, wrong))


def _slow_body(collector: CollectorProcess, declared: int, stop: threading.Event,
               every_s: float, sent: list[int]) -> None:
    """Declare ``declared`` bytes, then send one byte every ``every_s`` until stopped."""
    with socket.create_connection(("127.0.0.1", collector.http_port), timeout=30) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/x-protobuf\r\nContent-Length: "
                     + str(declared).encode() + b"\r\n\r\n")
        try:
            while not stop.wait(every_s):
                sock.sendall(b"\0")
                sent.append(1)
        except OSError:
            return


def test_slow_bodies_hold_only_what_they_sent(collector: CollectorProcess) -> None:
    """Case 3, first half: two clients declare 24 MiB and send a byte a second. They hold
    the bytes they sent, not what they declared: every other HTTP request and every gRPC
    call is served meanwhile (before: 503 and UNAVAILABLE for 15 s)."""
    stop = threading.Event()
    sent: list[int] = []
    slow = [threading.Thread(target=_slow_body, args=(collector, 25_165_824, stop, 1.0, sent))
            for _ in range(2)]
    for thread in slow:
        thread.start()
    try:
        eventually(lambda: len(sent) >= 4)
        statuses = [collector.post(episode_request(3)[0].SerializeToString())[0]
                    for _ in range(10)]
        with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
            export = channel.unary_unary(EXPORT)
            replies = [export(episode_request(3)[0].SerializeToString(), timeout=30)
                       for _ in range(5)]
        metrics = collector.get("/metrics")
    finally:
        stop.set()
        for thread in slow:
            thread.join(10)
    assert statuses == [200] * 10
    assert replies == [b""] * 5
    assert collector.read("summary")[0]["tool_calls"] == 45
    inflight = next(line for line in metrics.splitlines()
                    if line.startswith("loopscope_inflight_bytes "))
    assert float(inflight.split()[1]) < 1000  # the slow bodies' few bytes, nothing declared


def test_a_slow_body_is_evicted_when_a_faster_request_needs_its_bytes(tmp_path: Path) -> None:
    """Case 3, admission: under a 1 MB cap, a body trickling in holds 900 kB it sent; a
    faster request that needs room evicts it and is stored. The evicted one is answered 503
    with Retry-After at once (its connection is kept: the rest of its body is drained, not
    held), and the eviction is counted."""
    collector = start_collector(tmp_path / "store.duckdb", extra=[
        "--max-request-bytes", "1000000", "--max-inflight-bytes", "1000000"])
    try:
        slow = socket.create_connection(("127.0.0.1", collector.http_port), timeout=30)
        slow.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/x-protobuf\r\nContent-Length: 999000\r\n\r\n"
                     + b"\0" * 900_000)
        eventually(lambda: _gauge(collector, "loopscope_inflight_bytes") >= 900_000)
        time.sleep(1.2)  # a body is judged slow once it has been arriving a second
        second, _ = episode_request(1)
        second.resource_spans[0].scope_spans[0].spans[0].attributes.add(
            key="padding").value.string_value = "q" * 300_000
        status, _, _ = collector.post(second.SerializeToString())
        assert status == 200
        answer = b""
        slow.settimeout(10)
        while b"in flight" not in answer and b"evicted" not in answer:
            chunk = slow.recv(65536)
            assert chunk, answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 2" in answer
        assert b"evicted" in answer
        slow.close()
        metrics = collector.get("/metrics")
        assert "loopscope_inflight_bodies_evicted_total 1" in metrics
    finally:
        collector.stop()


def _gauge(collector: CollectorProcess, name: str) -> float:
    for line in collector.get("/metrics").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def test_300_slow_bodies_cannot_lock_a_normal_client_out(collector: CollectorProcess) -> None:
    """Case 3, connections: 300 connections (over the cap of 256) send complete headers,
    then a byte every 2 s. A normal client's requests, /metrics included, are all served:
    at the cap each new connection takes the place of the body arriving slowest."""
    socks = []
    try:
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", collector.http_port), timeout=30)
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         b"application/x-protobuf\r\nContent-Length: 1000000\r\n\r\n\0")
            socks.append(sock)
        stop = threading.Event()

        def trickle() -> None:
            while not stop.wait(2.0):
                for sock in socks:
                    with contextlib.suppress(OSError):
                        sock.sendall(b"\0")

        trickler = threading.Thread(target=trickle)
        trickler.start()
        try:
            time.sleep(1.5)  # the slow bodies have been arriving long enough to be judged
            statuses = [collector.post(episode_request(2)[0].SerializeToString())[0]
                        for _ in range(10)]
            metrics = collector.get("/metrics")
        finally:
            stop.set()
            trickler.join(10)
        assert statuses == [200] * 10
        assert "loopscope_http_connections_evicted_total 0" not in metrics
        assert "loopscope_http_connections_refused_total 0" in metrics
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
def test_other_methods_get_405_with_allow(collector: CollectorProcess, method: str) -> None:
    """Case 10: every route answers a method it does not take with 405 and Allow (a route
    read with GET takes HEAD too)."""
    for path, allow in (("/v1/traces", "POST"), ("/v1/labels", "POST"),
                        ("/healthz", "GET, HEAD"), ("/metrics", "GET, HEAD"),
                        ("/v1/reads", "GET, HEAD"), ("/v1/reads/summary", "GET, HEAD")):
        if method == "HEAD" and "HEAD" in allow:
            continue
        conn = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=30)
        conn.request(method, path, b"{}" if method != "HEAD" else None)
        answer = conn.getresponse()
        answer.read()
        conn.close()
        assert (answer.status, answer.getheader("Allow")) == (405, allow), (method, path)


def _head(data: bytes) -> tuple[bytes, dict[bytes, bytes], bytes]:
    """The status line and headers (names in lower case) of the first answer in ``data``,
    and what follows them."""
    head, _, rest = data.partition(b"\r\n\r\n")
    status, *lines = head.split(b"\r\n")
    return status, {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":")
                                                                for line in lines)}, rest


def test_head_on_a_get_route_answers_like_get_without_a_body(
    collector: CollectorProcess,
) -> None:
    """Issue 29: HEAD on a route read with GET answers as GET would (200, its Content-Type
    and Content-Length) and sends no body, so the next answer on the connection follows at
    once (before: 405)."""
    for path in ("/healthz", "/metrics", "/v1/reads", "/v1/reads/summary"):
        data = _raw(collector, f"HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n"
                               f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                    .encode())
        status, headers, rest = _head(data)
        assert status == b"HTTP/1.1 200 OK", (path, data[:300])
        assert int(headers[b"content-length"]) > 0 and headers[b"content-type"]
        assert rest.startswith(b"HTTP/1.1 200 OK\r\n"), (path, rest[:100])  # no body came
        assert _head(rest)[1][b"content-type"] == headers[b"content-type"], path


def test_the_server_header_names_no_python_version(collector: CollectorProcess) -> None:
    """Case 10: the Server header is the collector's name, nothing about what runs it."""
    conn = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=30)
    conn.request("GET", "/healthz")
    answer = conn.getresponse()
    answer.read()
    assert answer.getheader("Server") == "loopscope-collector"


class _FailingReads:
    """A store whose reads fail on the collector's side, as a bug or a broken file would
    (the named reads take a cursor of the store: ``reads.read``)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def cursor(self) -> object:
        raise self.error

    def failures(self) -> AbstractContextManager[None]:
        return store_failures()


@pytest.mark.parametrize(("error", "status"), [
    (duckdb.OutOfRangeException("Overflow in addition of INT64"), 500),
    (duckdb.InternalException("an internal error"), 500),
    (duckdb.IOException("cannot read the file"), 503),
])
def test_a_read_that_fails_on_the_server_side_is_a_5xx(
    tmp_path: Path, error: Exception, status: int,
) -> None:
    """Case 10: a read that fails in the store is the collector's failure (500, or 503 with
    Retry-After while the store cannot be read), never the client's 400."""
    db = open_database(tmp_path / "x.duckdb")
    pipeline = Pipeline(db)
    server = CollectorHTTPServer(("127.0.0.1", 0), pipeline=pipeline,
                                 db=_FailingReads(error),  # type: ignore[arg-type]
                                 watch=ConnectionWatch())
    server.serve_in_thread()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
        conn.request("GET", "/v1/reads/summary")
        answer = conn.getresponse()
        text = answer.read().decode()
        assert answer.status == status, text
        assert "summary" in json.loads(text)["error"]
        if status == 503:
            assert answer.getheader("Retry-After")
        conn.request("GET", "/v1/reads/summary?nope=1")
        bad = conn.getresponse()
        bad.read()
        assert bad.status == 400  # what the client asked wrong is still the client's
    finally:
        server.shutdown()
        server.server_close()
        db.close()


_BAD_VALUES: dict[str, tuple[str, ...]] = {
    # per parameter, values its read cannot take (issue 29, point 6); beside them every
    # parameter is also sent twice
    "limit": ("-1", "99999999999999999999", "abc"),
    "offset": ("-1", "99999999999999999999", "1.5"),
    "since_ns": ("99999999999999999999", "-99999999999999999999", "1e18"),
    "until_ns": ("99999999999999999999", "x"),
    "bucket_s": ("0", "-60", "9223372036854775807"),
    "stale_s": ("-1", "9223372036854775807"),
    "points": ("0", "-5", "abc", "99999999999999999999"),
    "prices": ("abc", '{"gpt-4o": 1}', '{"gpt-4o": {"input": "x", "output": 1}}',
               '{"gpt-4o": {"input": 1e400, "output": 1}}', '{"gpt-4o": {"input": 1}}', "[]"),
    "flagged": ("maybe",), "ascending": ("yes please",),
    "sort": ("bogus",), "verdict": ("bogus",), "status": ("bogus",),
    "service": (), "agent": (), "model": (), "tool": (), "outcome": (), "episode_id": (),
    "search": (), "trace_id": (), "span_id": (),
    "where": ("gen_ai.tool.name == 'x'", '[{"field": "a\\"]", "op": "exists"}]',
              '[{"field": "a", "op": "like", "text": "x"}]', '{"field": "a"}'),
}
_GOOD_VALUES: dict[str, str] = {
    "limit": "5", "offset": "0", "since_ns": "0", "until_ns": "9223372036854775807",
    "bucket_s": "60", "stale_s": "300", "points": "300", "flagged": "false", "ascending": "true",
    "prices": '{"gpt-4o": {"input": 2.5, "output": 10}}', "sort": "cost",
    "verdict": "not flagged", "status": "ended", "service": "load", "agent": "a",
    "model": "gpt-4o", "tool": "search", "outcome": "success", "episode_id": "e-1",
    "search": "e-", "trace_id": "0af7651916cd43dd8448eb211c80319c",
    "span_id": "b7ad6b7169203331",
    "where": '[{"field":"gen_ai.tool.name","op":"==","text":"search","number":null}]',
}


def _get(collector: CollectorProcess, path: str, query: str) -> tuple[int, str]:
    # a connection per request: on a kept-alive one each answer waited 40 ms (delayed ACK)
    conn = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=30)
    try:
        conn.request("GET", f"{path}?{query}")
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def test_every_wrong_read_parameter_is_a_400_naming_it(collector: CollectorProcess) -> None:
    """Issue 29, point 6: a value a read cannot take (``limit=-1``, a limit past BIGINT,
    ``prices=abc``, a bucket of 0 s, a sort the read does not know, a parameter given twice)
    is a 400 naming the parameter, for every parameter of every read, never a 500 from the
    read; good values of every parameter still answer 200."""
    spans, _ = episode_request(3, repeat=True)
    assert collector.post(spans.SerializeToString())[0] == 200
    reads = collector.get("/v1/reads")["reads"]
    declared = {p for read in reads.values() for p in read["params"]}
    assert declared == set(_BAD_VALUES) == set(_GOOD_VALUES), "a parameter without a test"
    wrong = []
    for name, read in sorted(reads.items()):
        path = f"/v1/reads/{name}"
        good = {p: _GOOD_VALUES[p] for p in read["params"]}
        status, text = _get(collector, path, urllib.parse.urlencode(good))
        assert status == 200, (name, text)
        needed = {p: _GOOD_VALUES[p] for p in read["required"]}
        for param in read["params"]:
            asked = [urllib.parse.urlencode({**needed, param: value})
                     for value in _BAD_VALUES[param]]
            asked.append(urllib.parse.urlencode([*needed.items(), (param, "1"), (param, "2")]))
            for query in asked:
                status, text = _get(collector, path, query)
                if status != 400 or f"parameter {param} " not in json.loads(text)["error"]:
                    wrong.append((name, query, status, text[:200]))
    assert not wrong, "\n".join(map(str, wrong))


def test_grpc_health_asks_for_the_token_like_every_other_route(tmp_path: Path) -> None:
    """Case 10, decided: with a token, the gRPC health service answers only a caller that
    carries it (UNAUTHENTICATED otherwise), as /healthz does; without a token it is open."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    collector = start_collector(tmp_path / "store.duckdb", token="s3cret")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            check = health_pb2.HealthCheckRequest(service="")
            with pytest.raises(grpc.RpcError) as caught:
                stub.Check(check, timeout=30, wait_for_ready=True)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            answer = stub.Check(check, timeout=30,
                                metadata=[("authorization", "Bearer s3cret")])
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            conn = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=30)
            conn.request("GET", "/healthz")
            assert conn.getresponse().status == 401
    finally:
        collector.stop()
