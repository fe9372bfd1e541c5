"""The OTLP trace export, apart from its transport: what OTLP/HTTP and OTLP/gRPC both do.

As the OpenTelemetry Collector's OTLP receiver does it, there is one export path: gRPC calls
``OtlpExport.export`` with the message it received; HTTP reads the body first (charging its
bytes as they arrive: ``limits``), then takes the same steps: ``take`` on a decoding thread
(decode, with admission by the time the queue takes to drain; ``submit`` to the pipeline;
append the request to the spool), then the answer. With a spool (``receive.spool``: a
collector on a DuckDB file) a request is acknowledged once its record is durable, before its
batch is stored: the pipeline keeps an acknowledged request until it is stored, and the
collector replays the spool after a crash. Without one (``:memory:``, or the spool cannot be
written), or when the pipeline was done with the request first, the answer waits for its
batch's commit (``settle``; a request waiting to be stored holds no HTTP thread). A request
refused (400, 413, 415, 503) is never spooled. One check of the bearer token
(``authorized``) serves both.

Every way an export is not taken is a ``Refused`` with an HTTP status, permanent (the client
must not send the same request again) or retryable (it may, after ``limits.RETRY_AFTER_S``); the one
table of answers (``answers``) says which status answers each failure and which gRPC code
answers each status.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
from typing import Final

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)

from ..normalize.spans import Decoded
from ..pipeline.jobs import Job, Overloaded
from ..pipeline.thread import Pipeline
from .answers import GRPC_CODES, RETRYABLE, status_of
from .decode import (
    DecodeError,
    decode_request,
    decoding,
    export_answer,
    inflate,
    media_type,
)
from .errors import AdmissionError
from .limits import (
    MAX_BODY_BYTES,
    RETRY_AFTER_S,
    Busy,
    Hold,
    attribute_count,
    charge_counted,
    charge_decoded,
    charge_parsing,
    estimate_decoded,
)
from .spool import Spool, acknowledge

logger = logging.getLogger(__name__)

ACK_TIMEOUT_S: Final = 30.0
"""The longest a request waits for the pipeline to store its spans before it is answered
503 / UNAVAILABLE (its bytes stay held until the pipeline is done with them)."""
PROTOBUF: Final = "application/x-protobuf"

SPOOL_MAX_BYTES: Final = 4 * 1024 * 1024
"""A request larger than this (inflated) is acknowledged at its batch's commit, not spooled:
such a request may run the store out of memory alone, and its client must then be told so
(413: send smaller batches). OpenTelemetry's exporters send 512 spans a request by default,
well under it."""

MAX_RETRY_AFTER_S: Final = 30
"""The longest ``Retry-After`` a refusal asks for (a queue that takes longer to drain is
asked about again then)."""


class NoRoom(AdmissionError):
    """The pipeline's queue has no room for a request now (its ``Overloaded``), told while
    the request is decoded (the decoder passes admission's errors on, and makes any other a
    400)."""

    def __init__(self, overloaded: Overloaded) -> None:
        super().__init__(str(overloaded))
        self.overloaded = overloaded


class Refused(Exception):
    """An export not taken: its HTTP ``status`` (``grpc_code`` for gRPC) and why."""

    def __init__(self, status: int, message: str, *, retry_after_s: float | None = None
                 ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after_s = retry_after_s
        """When a retry may succeed, if the collector can tell (the time its queue takes
        to drain); else ``limits.RETRY_AFTER_S``."""

    @property
    def retryable(self) -> bool:
        return self.status in RETRYABLE

    @property
    def retry_after(self) -> str | None:
        """The ``Retry-After`` of a retryable refusal (seconds); None for a permanent one."""
        if not self.retryable:
            return None
        if self.retry_after_s is None:
            return RETRY_AFTER_S
        return str(min(MAX_RETRY_AFTER_S, max(1, math.ceil(self.retry_after_s))))

    @property
    def grpc_code(self) -> grpc.StatusCode:
        return GRPC_CODES.get(self.status, grpc.StatusCode.INVALID_ARGUMENT)


def authorized(given: str | None, token: str | None) -> bool:
    """Whether an ``Authorization`` value carries the bearer ``token`` (any value, when the
    collector has no token): the one auth check of every route and RPC."""
    if not token:
        return True
    given = given or ""
    return given.startswith("Bearer ") and hmac.compare_digest(
        given[7:].strip().encode("latin-1", "replace"), token.encode())


class Taken:
    """A request the pipeline took: its ``job``, its ``spans``, and whether it is
    ``acknowledged`` (spooled: answer 200 now) or waits for its batch's commit."""

    def __init__(self, job: Job, spans: Decoded, acknowledged: bool) -> None:
        self.job = job
        self.spans = spans
        self.acknowledged = acknowledged


class OtlpExport:
    """Admission, decoding and storing of OTLP trace exports, for every transport."""

    def __init__(self, pipeline: Pipeline, *, max_request_bytes: int = MAX_BODY_BYTES,
                 spool: Spool | None = None) -> None:
        self.pipeline = pipeline
        self.max_request_bytes = max_request_bytes
        self.spool = spool

    def export(self, body: bytes, hold: Hold, *, source: str) -> ExportTraceServiceResponse:
        """Decode, queue and acknowledge a protobuf request (gRPC's whole export), waiting on
        the calling thread; raises ``Refused``."""
        taken = self.take(body, hold, content_type=PROTOBUF, content_encoding=None,
                          source=source)
        if isinstance(taken, Refused):
            raise taken
        if taken.acknowledged:
            return self.acknowledged(taken, hold)
        return self.settle(taken.job, taken.spans, hold,
                           stored=taken.job.done.wait(ACK_TIMEOUT_S))

    def take(self, body: bytes | bytearray, hold: Hold, *, content_type: str | None,
             content_encoding: str | None, source: str) -> Taken | Refused:
        """``decode``, ``submit``, then append the request to the spool (on the calling
        thread: a decoding thread, or gRPC's). A refusal is returned, not raised (``decode``
        says why)."""
        decoded = self.decode(body, hold, content_type=content_type,
                              content_encoding=content_encoding, source=source)
        if isinstance(decoded, Refused):
            return decoded
        spans, data = decoded
        try:
            job = self.submit(spans)
        except Refused as refused:
            return refused
        return Taken(job, spans, self.spooled(job, media_type(content_type), data))

    def spooled(self, job: Job, media: str | None, data: bytes | bytearray) -> bool:
        """Append the queued request to the spool: whether it is acknowledged now (False
        without a spool, for a request over ``SPOOL_MAX_BYTES``, when the spool cannot be
        written, or when the pipeline was done with the job first: its commit answers)."""
        if self.spool is None or media is None or len(data) > SPOOL_MAX_BYTES:
            return False
        try:
            record = self.spool.append(media, data)
        except OSError as exc:
            logger.warning("loopscope collector: the spool cannot be written (%s); this "
                           "request is acknowledged once its batch is stored", exc)
            return False
        return acknowledge(job, self.spool, record)

    def acknowledged(self, taken: Taken, hold: Hold) -> ExportTraceServiceResponse:
        """The 200 of a spooled request: its memory stays held until the pipeline is done with
        its spans."""
        taken.job.add_done_callback(hold.keep())
        return export_answer(taken.spans)

    def answered(self, status: int, seconds: float) -> None:
        """An export was answered ``status`` ``seconds`` after it began (the answer-time
        histogram on ``/metrics``)."""
        outcome = ("stored" if status == 200 else "throttled" if status in RETRYABLE
                   else "refused")
        self.pipeline.answer_times.record(outcome, seconds)

    def refuse(self, status: int, message: str, *, source: str, spans: int = 0) -> Refused:
        """A request refused for its content: counted and logged (rate-limited) by the
        pipeline, naming its ``source`` ("an OTLP/HTTP request from 127.0.0.1"); returns its
        ``Refused``."""
        self.pipeline.refuse(status, source, message, spans)
        return Refused(status, message)

    def decode(self, body: bytes | bytearray, hold: Hold, *, content_type: str | None,
               content_encoding: str | None, source: str
               ) -> tuple[Decoded, bytes | bytearray] | Refused:
        """Decode, charging memory before it is taken (``limits``): what parsing may take,
        then, once the spans are counted, what their records will take, then what they take
        (a request that alone takes more than the whole budget waits until nothing else is in
        flight). Returns the spans and the inflated body they were decoded from (what the
        spool keeps). A refusal is returned, not raised, and without its traceback: an exception
        that crosses an awaited future is kept in a reference cycle (the future, its
        exception, the traceback, the future's frame) until a full garbage collection, and
        with it every frame it passed through: the body and the parsed message, hundreds of
        MiB for a large request."""
        try:
            with decoding():
                data = inflate(body, content_encoding=content_encoding,
                               max_bytes=self.max_request_bytes)
                charge_parsing(hold, len(data))
                wire = len(data) + (0 if data is body else len(body))  # (inflated: both)
                spans = decode_request(
                    data, content_type=content_type, content_encoding=None,
                    max_bytes=self.max_request_bytes,
                    admit=lambda count: self.admit(hold, count, wire))
                size = estimate_decoded(len(spans), len(data), attribute_count(spans))
                charge_decoded(hold, size)
            return spans, data
        except DecodeError as exc:  # 400, or 413 / 415 for its subclasses
            return self.refuse(exc.http_status, str(exc), source=source, spans=exc.spans)
        except Busy as exc:
            return not_admitted(exc)
        except NoRoom as exc:
            return self.refused(exc.overloaded)

    def admit(self, hold: Hold, count: int, wire: int) -> None:
        """Once the request's ``count`` spans are known, before their records are built: is
        there room in the pipeline's queue (``NoRoom`` if not: under overload most requests
        are refused, and building their records would take the pipeline's CPU), then in
        memory (``limits.charge_counted``)."""
        try:
            self.pipeline.admit(count)
        except Overloaded as exc:
            raise NoRoom(exc) from None
        charge_counted(hold, count, wire)

    def submit(self, spans: Decoded) -> Job:
        """Queue the spans for the pipeline; raises ``Refused`` (503) when it cannot take
        them now."""
        try:
            return self.pipeline.submit(spans)
        except Exception as exc:
            if status_of(exc) != 503:
                raise
            raise self.refused(exc) from None

    def settle(self, job: Job, spans: Decoded, hold: Hold, *, stored: bool
               ) -> ExportTraceServiceResponse:
        """The answer once the pipeline is done with ``job``, or once the wait for it ended
        (``stored`` False: then ``hold`` is kept until the pipeline is done with the spans);
        raises ``Refused``."""
        if not stored:
            job.add_done_callback(hold.keep())
            raise Refused(503, f"not stored, retry later: spans not stored within "
                               f"{ACK_TIMEOUT_S:.0f} s")
        try:
            job.wait(0)
        except Exception as exc:
            raise self.refused(exc) from None
        return export_answer(spans)

    def refused(self, exc: Exception) -> Refused:
        """The ``Refused`` that answers a request the pipeline did not take or store, by the
        one table (``answers.status_of``); a permanent refusal is counted."""
        status = status_of(exc)
        if status is None:
            return Refused(503, f"the store failed, retry later: {type(exc).__name__}")
        if status in RETRYABLE:
            return Refused(status, f"not stored, retry later: {exc}",
                           retry_after_s=exc.retry_after_s if isinstance(exc, Overloaded)
                           else None)
        self.pipeline.count_rejected(status)
        return Refused(status, str(exc))


def not_admitted(exc: Busy) -> Refused:
    """A request admission did not let in now (``limits.Busy``): 503, retry later."""
    return Refused(503, f"not admitted, retry later: {exc}")


async def stored(job: Job) -> bool:
    """Wait (holding no thread) until the pipeline is done with ``job``, for at most
    ``ACK_TIMEOUT_S``; whether it is."""
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
        return False
    return True
