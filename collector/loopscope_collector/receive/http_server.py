"""The collector's loopback HTTP server: OTLP in, named reads and Prometheus metrics out.

- ``POST /v1/traces``: OTLP/HTTP, protobuf or JSON, gzip/deflate. 200 only once the spans are
  committed to the store; 400 for a malformed body, 415 for a wrong content type or encoding,
  413 for a body over the limit (after decompression), 400 naming the field for a value the
  store cannot hold, 503 with ``Retry-After`` only for what a retry can fix: the pipeline is
  overloaded or the store cannot be written now (clients retry 503; ingest is idempotent).
- ``GET /v1/reads`` lists the named reads; ``GET /v1/reads/{name}?param=value`` runs one and
  answers JSON ``{"rows": [...]}``. A client can only name a read, never send SQL.
- ``POST /v1/labels`` with ``{"episode_id", "span_id" ('' = the episode), "label":
  "true_loop" | "false_kill" | "no_loop", "note"}``: a human verdict, written by the pipeline
  (the store's only writer); labels feed the metrics.
- ``GET /metrics``: Prometheus text format. ``GET /healthz``: 200 ``ok`` while the store can
  be written, else 503 ``failing: <why>`` (see ``storage.health``); spans then get 503 too.

With an auth token, every request must carry ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import hmac
import json
import logging
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ..normalize.spans import SpanRecord
from ..pipeline.jobs import Overloaded, PipelineStopped, Rejected
from ..pipeline.thread import Pipeline
from ..storage import Database
from ..storage.health import StoreUnavailable
from ..storage.queries import READS, UnknownRead
from .decode import DecodeError, decode_request, inflate
from .labels import check_label
from .limits import MAX_INFLIGHT_BYTES, Busy, ConnectionWatch, Hold, InFlight

logger = logging.getLogger(__name__)

MAX_BODY_BYTES: Final = 32 * 1024 * 1024
"""Largest request accepted, compressed or not (after decompression too)."""
ACK_TIMEOUT_S: Final = 30.0
RETRY_AFTER_S: Final = "2"


class CollectorHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server carrying the collector's pipeline, store and settings."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        *,
        pipeline: Pipeline,
        db: Database,
        auth_token: str | None = None,
        prometheus: Callable[[], str] | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        inflight: InFlight | None = None,
        watch: ConnectionWatch | None = None,
    ) -> None:
        if ":" in address[0]:  # an IPv6 address such as ::1
            self.address_family = socket.AF_INET6
        self.watch = watch or ConnectionWatch()
        super().__init__(address, _Handler)
        self.pipeline = pipeline
        self.db = db
        self.auth_token = auth_token
        self.prometheus = prometheus
        self.max_body_bytes = max_body_bytes
        self.inflight = inflight or InFlight(max(MAX_INFLIGHT_BYTES, max_body_bytes))

    def serve_in_thread(self) -> threading.Thread:
        """Serve on a daemon thread; returns it."""
        self.watch.start()
        thread = threading.Thread(target=self.serve_forever, name="loopscope-http", daemon=True)
        thread.start()
        return thread

    def server_close(self) -> None:
        self.watch.stop()
        super().server_close()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on its own thread. At the connection cap it takes the place
        of the connection waiting longest for a complete request; when every connection is
        busy, answer 503 with Retry-After at once, on the accepting thread."""
        if self.watch.enter(request):
            super().process_request(request, client_address)
            return
        with contextlib.suppress(OSError):
            request.settimeout(1.0)
            request.sendall(_TOO_MANY_CONNECTIONS)
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that broke (closed by its client or by the watch) is routine."""
        if isinstance(sys.exc_info()[1], OSError):
            logger.debug("connection from %s broke: %s", client_address, sys.exc_info()[1])
            return
        logger.exception("loopscope collector: error serving %s", client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.watch.leave(request)


_TOO_MANY_CONNECTIONS: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: " + RETRY_AFTER_S.encode()
    + b"\r\nContent-Type: text/plain\r\nContent-Length: 33\r\nConnection: close\r\n\r\n"
    b"too many connections, retry later"
)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


class _Handler(BaseHTTPRequestHandler):
    server: CollectorHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "loopscope-collector"

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - " + format, self.address_string(), *args)

    # -- deadlines (``limits.ConnectionWatch``) --------------------------------------------------

    def handle_one_request(self) -> None:
        """Wait for a request (idle timeout), then read its headers (header timeout)."""
        watch = self.server.watch
        watch.expect(self.connection, watch.idle_timeout_s, waiting=True)
        try:
            waiting = self.rfile.peek(1)  # type: ignore[attr-defined]
        except OSError:
            waiting = b""
        if not waiting:  # the client closed, or the watch did
            self.close_connection = True
            return
        watch.expect(self.connection, watch.header_timeout_s, waiting=True)
        super().handle_one_request()

    def parse_request(self) -> bool:
        """Headers read: the body must follow within the body timeout."""
        ok = super().parse_request()
        self.server.watch.expect(self.connection, self.server.watch.body_timeout_s)
        return ok

    def handle_expect_100(self) -> bool:
        """Headers read (``parse_request`` answers ``Expect: 100-continue`` before it
        returns): the body timeout starts before the client is told to send it."""
        self.server.watch.expect(self.connection, self.server.watch.body_timeout_s)
        return super().handle_expect_100()

    def _received(self) -> None:
        """The request is read: no deadline while the collector works on it."""
        self.server.watch.expect(self.connection, None)

    # -- plumbing -----------------------------------------------------------------------------

    def _send(self, code: int, body: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        self.server.watch.expect(self.connection, self.server.watch.body_timeout_s)
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, data: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(data, default=_jsonable, ensure_ascii=False).encode()
        self._send(code, body, "application/json", headers)

    def _otlp_error(self, code: int, message: str, *, protobuf: bool,
                    headers: dict[str, str] | None = None) -> None:
        if protobuf:
            status = status_pb2.Status(code=code, message=message)
            self._send(code, status.SerializeToString(), "application/x-protobuf", headers)
        else:
            self._json(code, {"code": code, "message": message}, headers)

    def _reject(self, code: int, message: str, *, protobuf: bool, spans: int = 0,
                stored: bool = False) -> None:
        """Answer an export refused for its content, and count it: refused here (its
        ``spans`` counted and the refusal logged, rate-limited), or by the store (``stored``:
        the pipeline counted and logged it)."""
        if stored:
            self.server.pipeline.count_rejected(code)
        else:
            self.server.pipeline.refuse(code, f"an OTLP/HTTP request from "
                                              f"{self.client_address[0]}", message, spans)
        self._otlp_error(code, message, protobuf=protobuf)

    def _authorized(self) -> bool:
        token = self.server.auth_token
        if not token:
            return True
        given = self.headers.get("Authorization", "")
        if given.startswith("Bearer ") and hmac.compare_digest(given[7:].strip(), token):
            return True
        self._json(401, {"error": "missing or wrong bearer token"},
                   {"WWW-Authenticate": "Bearer"})
        return False

    # -- routes ---------------------------------------------------------------------------------

    def do_POST(self) -> None:
        if not self._authorized():
            return
        path = urlsplit(self.path).path
        if path == "/v1/traces":
            self._export()
        elif path == "/v1/labels":
            self._label()
        elif path in _GET_ROUTES or path.startswith("/v1/reads/"):
            self._drain()
            self._json(405, {"error": f"{path} is read with GET"}, {"Allow": "GET"})
        else:
            self._drain()
            self._json(404, {"error": f"no route POST {self.path}; OTLP goes to /v1/traces"})

    def _label(self) -> None:
        raw = self.headers.get("Content-Length") or ""
        if not raw.isdigit() or int(raw) > 65536:
            self._drain()
            self._json(400, {"error": "a label is a JSON object of at most 64 KiB"})
            return
        try:
            body = self.rfile.read(int(raw))
            self._received()
            label = check_label(json.loads(body or b"null"))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError too
            self._json(400, {"error": str(exc)})
            return
        except RecursionError:
            self._json(400, {"error": "a label is a flat JSON object; this one is nested too "
                                      "deeply to read"})
            return
        try:
            self.server.pipeline.submit_labels([label]).wait(ACK_TIMEOUT_S)
        except Rejected as exc:
            self._json(400, {"error": str(exc)})
            return
        except Exception as exc:
            self._json(503, {"error": f"not stored, retry later: {exc}"},
                       {"Retry-After": RETRY_AFTER_S})
            return
        self._json(200, {"stored": label})

    def do_GET(self) -> None:
        if not self._authorized():
            return
        self._received()
        url = urlsplit(self.path)
        if url.path in ("/v1/traces", "/v1/labels"):
            self._json(405, {"error": f"{url.path} takes POST"}, {"Allow": "POST"})
        elif url.path == "/healthz":
            self._health()
        elif url.path == "/metrics":
            text = self.server.prometheus() if self.server.prometheus else ""
            self._send(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")
        elif url.path in ("/v1/reads", "/v1/reads/"):
            self._json(200, {"reads": {n: {"params": list(r.params), "types": r.types,
                                           "required": list(r.required), "doc": r.doc}
                                       for n, r in sorted(READS.items())}})
        elif url.path.startswith("/v1/reads/"):
            self._read(url.path.removeprefix("/v1/reads/"), url.query)
        else:
            self._json(404, {"error": f"no route GET {url.path}"})

    def _health(self) -> None:
        """200 ``ok`` while the store can be written; else 503 ``failing: <why>``."""
        health = self.server.pipeline.health
        if health.ok:
            self._send(200, b"ok\n", "text/plain; charset=utf-8")
        else:
            self._send(503, f"failing: {health.reason}\n".encode(), "text/plain; charset=utf-8",
                       {"Retry-After": RETRY_AFTER_S})

    def _drain(self) -> None:
        raw = self.headers.get("Content-Length") or "0"
        self._discard(int(raw) if raw.isdigit() else 0)

    def _discard(self, length: int) -> None:
        """Read and drop a body we will not use, in bounded chunks, so the client sees our
        answer instead of a reset; a body far over the limit closes the connection instead."""
        if length > 4 * self.server.max_body_bytes:
            self.close_connection = True
            return
        while length > 0:
            chunk = self.rfile.read(min(length, 65536))
            if not chunk:
                break
            length -= len(chunk)

    def _read(self, name: str, query: str) -> None:
        try:
            read = READS.get(name)
            if read is None:
                raise UnknownRead(f"no read named {name!r}; reads: {', '.join(sorted(READS))}")
            params = read.convert(dict(parse_qsl(query, keep_blank_values=False)))
            rows = self.server.db.read(name, params)
        except UnknownRead as exc:
            self._json(404 if name not in READS else 400, {"error": str(exc)})
            return
        except Exception as exc:  # a bad parameter type, for instance
            self._json(400, {"error": f"read {name!r} failed: {exc}"})
            return
        self._json(200, {"rows": rows})

    def _export(self) -> None:
        content_type = self.headers.get("Content-Type")
        protobuf = "json" not in (content_type or "").lower()
        raw_length = self.headers.get("Content-Length")
        if raw_length is None or not raw_length.strip().isdigit():
            self.close_connection = True
            self._otlp_error(411, "Content-Length is required", protobuf=protobuf)
            return
        length = int(raw_length)
        if length > self.server.max_body_bytes:
            self._discard(length)
            self._reject(413, f"body of {length} bytes is over the limit of "
                              f"{self.server.max_body_bytes}", protobuf=protobuf)
            return
        retry = {"Retry-After": RETRY_AFTER_S}
        try:
            with self.server.inflight.hold(length) as held:
                spans = self._decode(length, held, content_type, protobuf)
                if spans is not None:
                    self._store(spans, protobuf)
        except Busy as exc:
            self._discard(length)
            self._otlp_error(503, f"not admitted, retry later: {exc}", protobuf=protobuf,
                             headers=retry)

    def _decode(self, length: int, held: Hold, content_type: str | None,
                protobuf: bool) -> list[SpanRecord] | None:
        """Read and decode the body; ``None`` when it was refused (and answered)."""
        body = self.rfile.read(length)
        if len(body) < length:  # the client went away, or the body timeout closed it
            self.close_connection = True
            return None
        self._received()
        try:
            data = inflate(body, content_encoding=self.headers.get("Content-Encoding"),
                           max_bytes=self.server.max_body_bytes)
            held.grow(max(len(data) - length, 0))
            return decode_request(data, content_type=content_type, content_encoding=None,
                                  max_bytes=self.server.max_body_bytes)
        except DecodeError as exc:  # 400, or 413 / 415 for its subclasses
            self._reject(exc.http_status, str(exc), protobuf=protobuf, spans=exc.spans)
            return None
        except Busy as exc:  # the body inflated past what is left: it is read, just answer
            self._otlp_error(503, f"not admitted, retry later: {exc}", protobuf=protobuf,
                             headers={"Retry-After": RETRY_AFTER_S})
            return None

    def _store(self, spans: list[SpanRecord], protobuf: bool) -> None:
        """Hand the spans to the pipeline and answer once they are committed (or not)."""
        retry = {"Retry-After": RETRY_AFTER_S}
        try:
            self.server.pipeline.submit(spans).wait(ACK_TIMEOUT_S)
        except Rejected as exc:
            self._reject(400, str(exc), protobuf=protobuf, stored=True)
            return
        except (Overloaded, PipelineStopped, StoreUnavailable, TimeoutError) as exc:
            self._otlp_error(503, f"not stored, retry later: {exc}", protobuf=protobuf,
                             headers=retry)
            return
        except Exception as exc:
            self._otlp_error(503, f"the store failed, retry later: {type(exc).__name__}",
                             protobuf=protobuf, headers=retry)
            return
        if protobuf:
            self._send(200, ExportTraceServiceResponse().SerializeToString(),
                       "application/x-protobuf")
        else:
            self._json(200, {})


_GET_ROUTES: Final = frozenset({"/healthz", "/metrics", "/v1/reads", "/v1/reads/"})
