"""The collector's HTTP routes as an ASGI application: OTLP in, named reads and metrics out.

- ``POST /v1/traces``: OTLP/HTTP, protobuf or JSON, gzip/deflate. 200 only once the spans are
  committed to the store; 400 for a body that does not decode (any failure to decode is a
  400, never a dropped connection: ``decode``), 415 for a wrong content type or encoding,
  413 for a body over the limit (after decompression; never for what it takes once decoded:
  ``limits``) or one that alone runs the store out of memory, 400 naming the field for a value the store cannot
  hold, 503 with ``Retry-After`` only for what
  a retry can fix: the bytes in flight are at the cap, the pipeline is overloaded or the store
  cannot be written now (clients retry 503; ingest is idempotent).
- ``GET /v1/reads`` lists the named reads; ``GET /v1/reads/{name}?param=value`` runs one and
  answers JSON ``{"rows": [...]}``: 400 naming the parameter for one the read does not take,
  one given twice, or a value it cannot take (``reads.params``: never a failed read), 500 when
  the read fails on the collector's side, 503 while the store cannot be read. A client can
  only name a read, never send SQL.
- ``POST /v1/labels`` with ``{"episode_id", "span_id" ('' = the episode), "label":
  "true_loop" | "false_kill" | "no_loop", "note"}``: a human verdict, written by the pipeline
  (the store's only writer); labels feed the metrics.
- ``GET /metrics``: Prometheus text format. ``GET /healthz``: 200 ``ok`` while the store can
  be written, else 503 ``failing: <why>`` (see ``storage.health``); spans then get 503 too.
- A ``POST`` framed by neither ``Content-Length`` nor chunked encoding (HTTP/1.1 gives it
  no body, so what its client meant to send would be lost): 411, and the connection closed.
- ``HEAD`` on a route read with ``GET`` answers as ``GET`` would, without the body. Any other
  method on these paths: 405 with ``Allow``; any other path: 404.

A request whose head is over its limits is 414 (a target over 8 KiB) or 431 (a head over
16 KiB, or of more than 100 header fields), before anything else (``connections``).
With an auth token, every request must carry ``Authorization: Bearer <token>`` (else 401).

HTTP itself is uvicorn's (``http_server``); the body is charged against the bytes in flight as
it arrives (``limits.InFlight``). Decoding, reads and metrics run on small thread pools, and
a request waiting for its spans to be stored holds no thread.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import hmac
import json
import logging
import math
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl

from google.rpc import status_pb2

from ..normalize.spans import Decoded
from ..pipeline.jobs import Job, Overloaded, PipelineStopped, Rejected, TooLargeToStore
from ..pipeline.thread import Pipeline
from ..reads import READS, UnknownRead
from ..reads import read as run_named_read
from ..storage import Database
from ..storage.errors import UNREADABLE_NOW
from ..storage.health import StoreUnavailable
from .connections import CONNECTION_KEY, WatchedH11Protocol, head_refused
from .decode import (
    DecodeError,
    PayloadTooLarge,
    decode_request,
    decoding,
    export_answer,
    inflate,
)
from .labels import check_label
from .limits import (
    MAX_BODY_BYTES,
    Busy,
    Hold,
    InFlight,
    attribute_count,
    charge_counted,
    charge_decoded,
    charge_parsing,
    estimate_decoded,
)

logger = logging.getLogger(__name__)

MAX_LABEL_BYTES: Final = 65536
ACK_TIMEOUT_S: Final = 30.0
RETRY_AFTER_S: Final = "2"
DECODE_THREADS: Final = 2
"""Decoding holds the GIL: two threads keep both cores busy between them and the pipeline
thread (which stores and judges), more only take turns with it (BENCHMARKS.md)."""
READ_THREADS: Final = 4

_POST: Final = ("POST",)
_GET: Final = ("GET", "HEAD")
_ROUTES: Final = {"/v1/traces": _POST, "/v1/labels": _POST, "/healthz": _GET, "/metrics": _GET,
                  "/v1/reads": _GET, "/v1/reads/": _GET}
_JSON: Final = b"application/json"
_TEXT: Final = b"text/plain; charset=utf-8"
_PROTOBUF: Final = b"application/x-protobuf"
_UNFRAMED: Final = ("Length Required: send the body with a Content-Length or chunked "
                    "Transfer-Encoding (a POST framed by neither has no body)")

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]
T = TypeVar("T")


class _Gone(Exception):
    """The client disconnected (or was disconnected) before its request was read."""


def _allowed(path: str) -> tuple[str, ...] | None:
    """The methods a path takes; None for a path that is not a route."""
    return _ROUTES.get(path) or (_GET if path.startswith("/v1/reads/") else None)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity as null: JSON has no such numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def dump_json(data: Any) -> bytes:
    """JSON as every client parses it: a number that is not finite is null, never a bare
    ``NaN`` (which is not JSON)."""
    try:
        text = json.dumps(data, default=_jsonable, ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(data), default=_jsonable, ensure_ascii=False,
                          allow_nan=False)
    return text.encode()


class _Exchange:
    """One request and its answer."""

    __slots__ = ("headers", "receive", "scope", "send", "started")

    def __init__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.started = False
        self.headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            self.headers.setdefault(name, value)

    def header(self, name: bytes) -> str | None:
        value = self.headers.get(name)
        return None if value is None else value.decode("latin-1")

    def head_refused(self) -> tuple[int, str] | None:
        """414 or 431 and why, for a head over its limits (``connections``)."""
        scope = self.scope
        target = len(scope["raw_path"]) + (len(scope["query_string"]) + 1
                                           if scope["query_string"] else 0)
        fields = scope["headers"]
        head = (len(scope["method"]) + target + 11  # "GET /x HTTP/1.1\r\n"
                + sum(len(name) + len(value) + 4 for name, value in fields))
        return head_refused(target, head, len(fields))

    @property
    def framed(self) -> bool:
        """Whether the request's body is framed: by Content-Length, or chunked (h11 refuses
        any other Transfer-Encoding). Without either, HTTP/1.1 gives a request no body."""
        return b"content-length" in self.headers or b"transfer-encoding" in self.headers

    @property
    def connection(self) -> WatchedH11Protocol | None:
        conn = self.scope.get("extensions", {}).get(CONNECTION_KEY, {}).get("protocol")
        return conn if isinstance(conn, WatchedH11Protocol) else None

    async def answer(self, status: int, body: bytes, content_type: bytes,
                     headers: dict[str, str] | None = None, *, close: bool = False) -> None:
        raw = [(b"Content-Type", content_type), (b"Content-Length", str(len(body)).encode())]
        raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
        if close:
            raw.append((b"Connection", b"close"))
        self.started = True
        await self.send({"type": "http.response.start", "status": status, "headers": raw})
        await self.send({"type": "http.response.body", "body": body, "more_body": False})

    async def json(self, status: int, data: Any, headers: dict[str, str] | None = None,
                   *, close: bool = False) -> None:
        await self.answer(status, dump_json(data), _JSON, headers, close=close)


class CollectorApp:
    """The collector's HTTP routes (module docstring); an ASGI 3 application."""

    def __init__(self, *, pipeline: Pipeline, db: Database, auth_token: str | None = None,
                 prometheus: Callable[[], str] | None = None,
                 max_body_bytes: int = MAX_BODY_BYTES, inflight: InFlight | None = None) -> None:
        self.pipeline = pipeline
        self.db = db
        self.auth_token = auth_token
        self.prometheus = prometheus
        self.max_body_bytes = max_body_bytes
        self.inflight = inflight or InFlight(max_body_bytes)
        self.decoding = ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="loopscope-decode")
        self.reading = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="loopscope-read")

    def close(self) -> None:
        self.decoding.shutdown(wait=False, cancel_futures=True)
        self.reading.shutdown(wait=False, cancel_futures=True)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        exchange = _Exchange(scope, receive, send)
        try:
            await self._route(exchange)
        except _Gone:
            return
        except Exception:
            logger.exception("loopscope collector: error serving %s %s", scope["method"],
                             scope["path"])
            if not exchange.started:
                await exchange.json(500, {"error": "the collector failed to answer this "
                                                   "request; see its log"})

    async def _route(self, ex: _Exchange) -> None:
        path, method = ex.scope["path"], ex.scope["method"]
        if refused := ex.head_refused():
            status, why = refused
            await ex.json(status, {"error": why}, close=True)
            return
        if self.auth_token and not self._authorized(ex):
            close = not await self._drain(ex)
            await ex.json(401, {"error": "missing or wrong bearer token"},
                          {"WWW-Authenticate": "Bearer"}, close=close)
            return
        allowed = _allowed(path)  # (HEAD is answered as GET; uvicorn sends no body to it)
        if allowed is None:
            hint = "; OTLP goes to /v1/traces" if method == "POST" else ""
            close = not await self._drain(ex)
            await ex.json(404, {"error": f"no route {method} {path}{hint}"}, close=close)
        elif method not in allowed:
            says = "is read with GET (or HEAD)" if allowed == _GET else "takes POST"
            close = not await self._drain(ex)
            await ex.json(405, {"error": f"{path} {says}, not {method}"},
                          {"Allow": ", ".join(allowed)}, close=close)
        elif path == "/v1/traces":
            await self._export(ex)
        elif path == "/v1/labels":
            await self._label(ex)
        elif path == "/healthz":
            await self._health(ex)
        elif path == "/metrics":
            text = await self._on(self.reading, self.prometheus) if self.prometheus else ""
            await ex.answer(200, text.encode(), b"text/plain; version=0.0.4; charset=utf-8")
        elif path in ("/v1/reads", "/v1/reads/"):
            await ex.json(200, {"reads": {n: {"params": list(r.params), "types": r.types,
                                              "required": list(r.required), "doc": r.doc}
                                          for n, r in sorted(READS.items())}})
        else:
            await self._read(ex, path.removeprefix("/v1/reads/"))

    async def _drain(self, ex: _Exchange, limit: int | None = None) -> bool:
        """Read and drop what is left of a body the answer will not use, up to ``limit``
        bytes (4 x the request limit), so that a client still sending it reads the answer
        instead of a reset. False when the body is not drained (too large, or the client
        waits for ``100 Continue``): the answer then closes the connection."""
        if ex.started:
            return True
        if ex.headers.get(b"expect", b"").lower() == b"100-continue":
            return False
        limit = 4 * self.max_body_bytes if limit is None else limit
        declared = ex.header(b"content-length")
        if declared is not None and int(declared) > limit:
            return False
        if declared in (None, "0") and b"transfer-encoding" not in ex.headers:
            return True
        drained = 0
        while True:
            message = await ex.receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            drained += len(message.get("body", b""))
            if drained > limit:
                return False
            if not message.get("more_body"):
                return True

    def _authorized(self, ex: _Exchange) -> bool:
        given = ex.header(b"authorization") or ""
        token = self.auth_token or ""
        return given.startswith("Bearer ") and hmac.compare_digest(
            given[7:].strip().encode("latin-1"), token.encode())

    async def _on(self, pool: ThreadPoolExecutor, work: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, work, *args)

    # -- reads, health ------------------------------------------------------------------------

    async def _health(self, ex: _Exchange) -> None:
        """200 ``ok`` while the store can be written; else 503 ``failing: <why>``."""
        health = self.pipeline.health
        if health.ok:
            await ex.answer(200, b"ok\n", _TEXT)
        else:
            await ex.answer(503, f"failing: {health.reason}\n".encode(), _TEXT,
                            {"Retry-After": RETRY_AFTER_S})

    async def _read(self, ex: _Exchange, name: str) -> None:
        """A named read: 404 / 400 for what the client asked wrong (a parameter the read does
        not take, one given twice, or a value it cannot take, each named), 503 while the store
        cannot be read, 500 for a read that fails on the collector's side."""
        read = READS.get(name)
        if read is None:
            await ex.json(404, {"error": f"no read named {name!r}; reads: "
                                         f"{', '.join(sorted(READS))}"})
            return
        pairs = parse_qsl(ex.scope["query_string"].decode("latin-1"), keep_blank_values=False)
        twice = sorted(key for key, n in Counter(key for key, _ in pairs).items() if n > 1)
        try:
            if twice:
                raise UnknownRead(f"read {name!r}: parameter {', '.join(twice)} given more "
                                  "than once")
            params = read.convert(dict(pairs))
        except (UnknownRead, ValueError) as exc:
            await ex.json(400, {"error": str(exc)})
            return
        try:
            rows = await self._on(self.reading, run_named_read, self.db, name, params)
        except (*UNREADABLE_NOW, StoreUnavailable) as exc:
            await ex.json(503, {"error": f"read {name!r}: the store cannot be read now: "
                                         f"{exc}"}, {"Retry-After": RETRY_AFTER_S})
            return
        except Exception as exc:
            logger.warning("loopscope collector: read %r failed: %s: %s", name,
                           type(exc).__name__, exc)
            await ex.json(500, {"error": f"read {name!r} failed on the collector's side: "
                                         f"{type(exc).__name__}: {exc}"})
            return
        await ex.json(200, {"rows": rows})

    # -- labels -------------------------------------------------------------------------------

    async def _label(self, ex: _Exchange) -> None:
        if not ex.framed:
            await ex.json(411, {"error": _UNFRAMED}, close=True)
            return
        try:
            body = await self._small_body(ex, MAX_LABEL_BYTES)
        except PayloadTooLarge:
            close = not await self._drain(ex)
            await ex.json(400, {"error": "a label is a JSON object of at most 64 KiB"},
                          close=close)
            return
        try:
            label = check_label(json.loads(body or b"null"))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError too
            await ex.json(400, {"error": str(exc)})
            return
        except RecursionError:
            await ex.json(400, {"error": "a label is a flat JSON object; this one is nested "
                                         "too deeply to read"})
            return
        try:
            job = self.pipeline.submit_labels([label])
            await self._stored(job)
        except Rejected as exc:
            await ex.json(400, {"error": str(exc)})
            return
        except Exception as exc:
            await ex.json(503, {"error": f"not stored, retry later: {exc}"},
                          {"Retry-After": RETRY_AFTER_S})
            return
        await ex.json(200, {"stored": label})

    async def _small_body(self, ex: _Exchange, limit: int) -> bytes:
        declared = ex.header(b"content-length")
        if declared is not None and int(declared) > limit:
            raise PayloadTooLarge(f"over {limit} bytes")
        chunks, size = [], 0
        while True:
            message = await ex.receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"over {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    # -- OTLP ---------------------------------------------------------------------------------

    async def _export(self, ex: _Exchange) -> None:
        content_type = ex.header(b"content-type")
        protobuf = "json" not in (content_type or "").lower()
        if not ex.framed:
            await self._refuse(ex, 411, _UNFRAMED, protobuf, close=True)
            return
        declared = ex.header(b"content-length")
        limit = self.max_body_bytes
        if declared is not None and int(declared) > limit:  # answered before its body
            await self._refuse(ex, 413, f"body of {declared} bytes is over the limit of "
                                        f"{limit}", protobuf, close=True)
            return
        conn = ex.connection
        loop = asyncio.get_running_loop()
        evict = None if conn is None else (lambda: loop.call_soon_threadsafe(conn.wake))
        hold = self.inflight.hold(0, evict=evict)
        with hold:
            try:
                body = await self._body(ex, hold, limit)
            except PayloadTooLarge as exc:
                await self._refuse(ex, 413, str(exc), protobuf, close=True)
                return
            except Busy as exc:
                hold.release()  # what is left of the body is drained, not held
                await self._not_admitted(ex, exc, protobuf)
                return
            hold.received()
            spans = await self._on(self.decoding, self._decode, body, content_type,
                                   ex.header(b"content-encoding"), hold)
            del body
            if isinstance(spans, DecodeError):  # 400, or 413 / 415 for its subclasses
                await self._refuse(ex, spans.http_status, str(spans), protobuf,
                                   spans=spans.spans)
                return
            if isinstance(spans, Busy):
                await self._busy(ex, spans, protobuf)
                return
            await self._store(ex, spans, protobuf, hold)

    async def _not_admitted(self, ex: _Exchange, exc: Busy, protobuf: bool) -> None:
        """503 to a request whose body did not fit, or was evicted: at once on a connection
        the client keeps alive (uvicorn drains the rest of the body, holding none of it), so
        a slow body cannot delay its answer; after draining the body when the client asked
        to close, so that it reads the answer instead of a reset."""
        if ex.headers.get(b"connection", b"").lower() == b"close" or ex.scope.get(
                "http_version") == "1.0":
            close = not await self._drain(ex)
        else:
            close = False
        await self._busy(ex, exc, protobuf, close=close)

    async def _body(self, ex: _Exchange, hold: Hold, limit: int) -> bytearray:
        """The body, each chunk charged as it arrives; ``Busy`` when it does not fit, or
        was evicted (``limits.InFlight``: then the connection ``wake``s this), ``_Gone``
        when the client left."""
        body = bytearray()
        while True:
            message = await ex.receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            if hold.evicted:
                raise Busy("evicted: this request's body arrived slowest while the "
                           "collector was full")
            chunk = message.get("body", b"")
            if chunk:
                if len(body) + len(chunk) > limit:
                    raise PayloadTooLarge(f"body is over the limit of {limit} bytes")
                hold.grow(len(chunk))
                body += chunk
            if not message.get("more_body"):
                return body

    def _decode(self, body: bytearray, content_type: str | None, encoding: str | None,
                hold: Hold) -> Decoded | DecodeError | Busy:
        """Decode on a decoding thread, charging memory before it is taken (``limits``):
        what parsing may take, then, once the spans are counted, what their records will
        take, then what they take (a request that alone takes more than the whole budget
        waits until nothing else is in flight: ``limits``)."""
        try:
            with decoding():
                data = inflate(body, content_encoding=encoding, max_bytes=self.max_body_bytes)
                charge_parsing(hold, len(data))
                wire = len(data) + (0 if data is body else len(body))  # (inflated: both)
                spans = decode_request(
                    data, content_type=content_type, content_encoding=None,
                    max_bytes=self.max_body_bytes,
                    admit=lambda count: charge_counted(hold, count, wire))
                size = estimate_decoded(len(spans), len(data), attribute_count(spans))
                charge_decoded(hold, size)
            return spans
        except (DecodeError, Busy) as exc:
            # Returned, not raised, and without its traceback: an exception that crosses an
            # awaited future is kept in a reference cycle (the future, its exception, the
            # traceback, the future's frame) until a full garbage collection, and with it
            # every frame it passed through: the body and the parsed message, hundreds of
            # MiB for a large request.
            exc.__traceback__ = exc.__context__ = exc.__cause__ = None
            return exc

    async def _stored(self, job: Job) -> None:
        """Wait (holding no thread) until the pipeline is done with ``job``; re-raise its
        error."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def settle() -> None:
            if not done.done():
                done.set_result(None)

        def finished() -> None:
            loop.call_soon_threadsafe(settle)

        job.add_done_callback(finished)
        try:
            await asyncio.wait_for(asyncio.shield(done), ACK_TIMEOUT_S)
        except TimeoutError:
            raise TimeoutError(f"spans not stored within {ACK_TIMEOUT_S:.0f} s") from None
        job.wait(0)

    async def _store(self, ex: _Exchange, spans: Decoded, protobuf: bool, hold: Hold) -> None:
        """Hand the spans to the pipeline and answer once they are committed (or not: when
        that takes too long, the answer is 503 and ``hold`` is kept until the pipeline is done
        with the spans)."""
        retry = {"Retry-After": RETRY_AFTER_S}
        job = None
        try:
            job = self.pipeline.submit(spans)
            await self._stored(job)
        except Rejected as exc:
            self.pipeline.count_rejected(400)
            await self._otlp_error(ex, 400, str(exc), protobuf)
            return
        except TooLargeToStore as exc:
            self.pipeline.count_rejected(413)
            await self._otlp_error(ex, 413, str(exc), protobuf)
            return
        except TimeoutError as exc:
            if job is not None:
                job.add_done_callback(hold.keep())
            await self._otlp_error(ex, 503, f"not stored, retry later: {exc}", protobuf, retry)
            return
        except (Overloaded, PipelineStopped, StoreUnavailable) as exc:
            await self._otlp_error(ex, 503, f"not stored, retry later: {exc}", protobuf, retry)
            return
        except Exception as exc:
            await self._otlp_error(ex, 503, f"the store failed, retry later: "
                                            f"{type(exc).__name__}", protobuf, retry)
            return
        answer = export_answer(spans)
        if protobuf:
            await ex.answer(200, answer.SerializeToString(), _PROTOBUF)
        else:
            message = answer.partial_success.error_message
            await ex.json(200, {"partialSuccess": {"errorMessage": message}} if message else {})

    async def _busy(self, ex: _Exchange, exc: Exception, protobuf: bool, *,
                    close: bool = False) -> None:
        await self._otlp_error(ex, 503, f"not admitted, retry later: {exc}", protobuf,
                               {"Retry-After": RETRY_AFTER_S}, close=close)

    async def _refuse(self, ex: _Exchange, status: int, message: str, protobuf: bool, *,
                      spans: int = 0, close: bool = False) -> None:
        """Answer an export refused for its content; count it and log why (rate-limited)."""
        client = ex.scope.get("client")
        self.pipeline.refuse(status, f"an OTLP/HTTP request from "
                                     f"{client[0] if client else 'an unknown client'}",
                             message, spans)
        await self._otlp_error(ex, status, message, protobuf, close=close)

    async def _otlp_error(self, ex: _Exchange, status: int, message: str, protobuf: bool,
                          headers: dict[str, str] | None = None, *, close: bool = False
                          ) -> None:
        if protobuf:
            body = status_pb2.Status(code=status, message=message).SerializeToString()
            await ex.answer(status, body, _PROTOBUF, headers, close=close)
        else:
            await ex.json(status, {"code": status, "message": message}, headers, close=close)
