"""OTLP/HTTP: ``POST /v1/traces``, protobuf or JSON, gzip/deflate, over the one export path.

200 once the request is durably accepted (written to the spool, or without one committed to
the store: ``export``); 400 for a body that does not decode (any
failure to decode is a 400, never a dropped connection: ``decode``), 415 for a wrong content
type or encoding, 413 for a body over the limit (after decompression; never for what it takes
once decoded: ``limits``) or one that alone runs the store out of memory, 400 naming the field
for a value the store cannot hold, 503 with ``Retry-After`` only for what a retry can fix: the
bytes in flight are at the cap, the pipeline is overloaded or the store cannot be written now
(clients retry 503; ingest is idempotent). A ``POST`` framed by neither ``Content-Length`` nor
chunked encoding (HTTP/1.1 gives it no body, so what its client meant to send would be lost):
411, and the connection closed.

The body is charged against the bytes in flight as it arrives (``limits.InFlight``); then the
request takes the steps gRPC takes (``export``): it is decoded on a small thread pool, and
while it waits for its spans to be stored (without a spool) it holds no thread.
"""

from __future__ import annotations

import asyncio
import functools
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from google.rpc import status_pb2

from ..pipeline.thread import Pipeline
from .decode import PayloadTooLarge
from .exchange import UNFRAMED, Exchange, Gone, on_thread
from .export import OtlpExport, Refused, not_admitted, stored
from .limits import MAX_BODY_BYTES, Busy, Hold, InFlight
from .spool import Spool

DECODE_THREADS: Final = 2
"""Decoding holds the GIL: two threads keep both cores busy between them and the pipeline
thread (which stores and judges), more only take turns with it (BENCHMARKS.md)."""
PROTOBUF: Final = b"application/x-protobuf"


class OtlpHttp:
    """The ``POST /v1/traces`` route (module docstring)."""

    def __init__(self, pipeline: Pipeline, *, max_body_bytes: int = MAX_BODY_BYTES,
                 inflight: InFlight | None = None, spool: Spool | None = None) -> None:
        self.max_body_bytes = max_body_bytes
        self.inflight = inflight or InFlight(max_body_bytes)
        self.exporting = OtlpExport(pipeline, max_request_bytes=max_body_bytes, spool=spool)
        self.decoding = ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="loopscope-decode")

    def close(self) -> None:
        self.decoding.shutdown(wait=False, cancel_futures=True)

    async def export(self, ex: Exchange) -> None:
        """Answer the export; time the answer (``OtlpExport.answered``)."""
        started = time.monotonic()
        try:
            await self._export(ex)
        finally:
            if ex.status:
                self.exporting.answered(ex.status, time.monotonic() - started)

    async def _export(self, ex: Exchange) -> None:
        """Read the body (charged as it arrives), then the one export path (``export``):
        decode, submit, settle."""
        content_type = ex.header(b"content-type")
        protobuf = "json" not in (content_type or "").lower()
        client = ex.scope.get("client")
        source = f"an OTLP/HTTP request from {client[0] if client else 'an unknown client'}"
        if not ex.framed:
            refused = self.exporting.refuse(411, UNFRAMED, source=source)
            await self._refused(ex, refused, protobuf, close=True)
            return
        declared = ex.header(b"content-length")
        limit = self.max_body_bytes
        if declared is not None and int(declared) > limit:  # answered before its body
            refused = self.exporting.refuse(413, f"body of {declared} bytes is over the limit "
                                                 f"of {limit}", source=source)
            await self._refused(ex, refused, protobuf, close=True)
            return
        conn = ex.connection
        loop = asyncio.get_running_loop()
        evict = None if conn is None else (lambda: loop.call_soon_threadsafe(conn.wake))
        hold = self.inflight.hold(0, evict=evict)
        with hold:
            try:
                body = await self._body(ex, hold, limit)
            except PayloadTooLarge as exc:
                refused = self.exporting.refuse(413, str(exc), source=source)
                await self._refused(ex, refused, protobuf, close=True)
                return
            except Busy as exc:
                hold.release()  # what is left of the body is drained, not held
                await self._not_admitted(ex, not_admitted(exc), protobuf)
                return
            hold.received()
            taken = await on_thread(self.decoding, functools.partial(
                self.exporting.take, body, hold, content_type=content_type,
                content_encoding=ex.header(b"content-encoding"), source=source))
            del body
            if isinstance(taken, Refused):
                await self._refused(ex, taken, protobuf)
                return
            try:
                answer = (self.exporting.acknowledged(taken, hold) if taken.acknowledged
                          else self.exporting.settle(taken.job, taken.spans, hold,
                                                     stored=await stored(taken.job)))
            except Refused as exc:
                await self._refused(ex, exc, protobuf)
                return
        if protobuf:
            await ex.answer(200, answer.SerializeToString(), PROTOBUF)
        else:
            message = answer.partial_success.error_message
            await ex.json(200, {"partialSuccess": {"errorMessage": message}} if message else {})

    async def _not_admitted(self, ex: Exchange, refused: Refused, protobuf: bool) -> None:
        """503 to a request whose body did not fit, or was evicted: at once on a connection
        the client keeps alive (uvicorn drains the rest of the body, holding none of it), so
        a slow body cannot delay its answer; after draining the body when the client asked
        to close, so that it reads the answer instead of a reset."""
        if ex.headers.get(b"connection", b"").lower() == b"close" or ex.scope.get(
                "http_version") == "1.0":
            close = not await ex.drain(4 * self.max_body_bytes)
        else:
            close = False
        await self._refused(ex, refused, protobuf, close=close)

    async def _body(self, ex: Exchange, hold: Hold, limit: int) -> bytearray:
        """The body, each chunk charged as it arrives; ``Busy`` when it does not fit, or
        was evicted (``limits.InFlight``: then the connection ``wake``s this), ``Gone``
        when the client left."""
        body = bytearray()
        while True:
            message = await ex.receive()
            if message["type"] == "http.disconnect":
                raise Gone
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

    async def _refused(self, ex: Exchange, refused: Refused, protobuf: bool, *,
                       close: bool = False) -> None:
        """A refused export's answer, in the request's encoding (OTLP's ``Status``), with
        ``Retry-After`` when a retry may succeed."""
        status, message = refused.status, refused.message
        headers = None if refused.retry_after is None else {"Retry-After": refused.retry_after}
        if protobuf:
            body = status_pb2.Status(code=status, message=message).SerializeToString()
            await ex.answer(status, body, PROTOBUF, headers, close=close)
        else:
            await ex.json(status, {"code": status, "message": message}, headers, close=close)

