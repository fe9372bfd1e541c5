"""OTLP/gRPC: the ``TraceService/Export`` endpoint on port 4317, for any OTel SDK or Collector.

The export path is the HTTP route's (``export``), and so is the contract: the response is
sent once the spans are committed; INVALID_ARGUMENT for a malformed request or a value the
store cannot hold, UNAVAILABLE (which OTLP clients retry; with ``google.rpc.RetryInfo`` in the
trailing metadata, the HTTP answer's ``Retry-After``) when too many bytes are in flight, the
pipeline would keep the request waiting too long or the store cannot be written,
UNAUTHENTICATED without the bearer token (``export.authorized``, in an interceptor). A message over
``--max-request-bytes`` is refused by gRPC itself (RESOURCE_EXHAUSTED).

The method is registered on raw bytes, not on the parsed message, so that a message that
does not parse is the client's INVALID_ARGUMENT (gRPC would answer INTERNAL for a failed
deserialisation) and its size is admitted before it is decoded. The standard gRPC health
service reports the store's health.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent import futures
from typing import Any, Final

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)

from ..pipeline.thread import Pipeline
from .answers import GRPC_CODES
from .export import OtlpExport, Refused, authorized, not_admitted
from .limits import MAX_BODY_BYTES, Busy, InFlight
from .spool import Spool

MAX_WORKERS: Final = 8
TRACE_SERVICE: Final = "opentelemetry.proto.collector.trace.v1.TraceService"
RETRY_INFO_KEY: Final = "google.rpc.retryinfo-bin"
"""The trailing metadata a retryable refusal carries its ``RetryInfo`` in (OTLP/gRPC's
throttling, which OpenTelemetry's exporters honour)."""


class TraceService:
    """The OTLP trace service: the collector's one export path (``export``) over gRPC."""

    def __init__(self, export: OtlpExport, inflight: InFlight | None = None) -> None:
        self.exporting = export
        self.inflight = inflight or InFlight()

    def Export(self, body: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        """Admit, decode and store the request's spans, then acknowledge (the bearer token
        is checked before: ``_TokenInterceptor``)."""
        started = time.monotonic()
        try:
            with self.inflight.hold(len(body)) as held:
                answer = self.exporting.export(
                    body, held, source=f"an OTLP/gRPC request from {_peer(context)}")
            self.exporting.answered(200, time.monotonic() - started)
            return answer
        except Busy as exc:
            refused = not_admitted(exc)
        except Refused as exc:
            refused = exc
        self.exporting.answered(refused.status, time.monotonic() - started)
        if refused.retry_after is not None:
            delay = Duration(seconds=int(refused.retry_after))
            context.set_trailing_metadata(
                ((RETRY_INFO_KEY, RetryInfo(retry_delay=delay).SerializeToString()),))
        context.abort(refused.grpc_code, refused.message)
        raise refused  # abort raises; this line is for the type checker


class _TokenInterceptor(grpc.ServerInterceptor):
    """With an auth token, every method needs it, the health service's too: its answer says
    whether the store can be written and why not, as ``/healthz`` does, and ``/healthz`` asks
    for the token. A probe that cannot send metadata checks ``/healthz`` with the header, or
    runs ``grpc_health_probe -rpc-header 'authorization: Bearer TOKEN'``."""

    def __init__(self, token: str) -> None:
        self.token = token

        def refuse(_request: bytes, context: grpc.ServicerContext) -> None:
            context.abort(GRPC_CODES[401], "missing or wrong bearer token")

        self._refuse: grpc.RpcMethodHandler[bytes, bytes] = (
            grpc.unary_unary_rpc_method_handler(refuse))

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        metadata = dict(handler_call_details.invocation_metadata or ())
        if authorized(str(metadata.get("authorization", "")), self.token):
            return continuation(handler_call_details)
        return self._refuse


def _peer(context: grpc.ServicerContext) -> str:
    """The client's address as gRPC names it (``ipv4:127.0.0.1:53012``), without the port."""
    peer = str(context.peer() or "an unknown peer")
    kind, _, address = peer.partition(":")
    return address.rpartition(":")[0] if kind in ("ipv4", "ipv6") and ":" in address else peer


def _health_service(pipeline: Pipeline) -> health.HealthServicer:
    """The standard gRPC health service: SERVING while the store can be written, for the
    server as a whole ("") and for the trace service; NOT_SERVING while it cannot."""
    service = health.HealthServicer()

    def follow(ok: bool, _reason: str) -> None:
        status = (health_pb2.HealthCheckResponse.SERVING if ok
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        for name in ("", TRACE_SERVICE):
            service.set(name, status)

    follow(pipeline.health.ok, pipeline.health.reason)
    pipeline.health.listeners.append(follow)
    return service


def serve_grpc(pipeline: Pipeline, host: str, port: int, *, auth_token: str | None = None,
               inflight: InFlight | None = None,
               max_request_bytes: int = MAX_BODY_BYTES, spool: Spool | None = None
               ) -> grpc.Server:
    """Start the gRPC server (it serves on its own threads); returns it for ``stop``."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="loopscope-grpc"),
        # No SO_REUSEPORT: a second collector must not silently share (and split) the port.
        options=[("grpc.max_receive_message_length", max_request_bytes),
                 ("grpc.so_reuseport", 0)],
        interceptors=[_TokenInterceptor(auth_token)] if auth_token else None,
    )
    trace = TraceService(OtlpExport(pipeline, max_request_bytes=max_request_bytes, spool=spool),
                         inflight)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(TRACE_SERVICE, {
        "Export": grpc.unary_unary_rpc_method_handler(
            trace.Export, response_serializer=ExportTraceServiceResponse.SerializeToString),
    })])
    health_pb2_grpc.add_HealthServicer_to_server(_health_service(pipeline), server)
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:  # newer grpcio raises instead of returning 0
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}: {exc}") from None
    if not bound:
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}")
    server.start()
    return server
