"""OTLP/gRPC: the ``TraceService/Export`` endpoint on port 4317, for any OTel SDK or Collector.

Same contract as the HTTP route: the response is sent once the spans are committed;
INVALID_ARGUMENT for a malformed request or a value the store cannot hold, UNAVAILABLE (which
OTLP clients retry) when too many bytes are in flight, the pipeline is overloaded or the store
cannot be written, UNAUTHENTICATED without the bearer token. A message over
``--max-request-bytes`` is refused by gRPC itself (RESOURCE_EXHAUSTED).

The method is registered on raw bytes, not on the parsed message, so that a message that
does not parse is the client's INVALID_ARGUMENT (gRPC would answer INTERNAL for a failed
deserialisation) and its size is admitted before it is decoded. The standard gRPC health
service reports the store's health.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from concurrent import futures
from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError as ProtoDecodeError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ..normalize.spans import Decoded
from ..pipeline.jobs import Overloaded, PipelineStopped, Rejected, TooLargeToStore
from ..pipeline.thread import Pipeline
from ..storage.health import StoreUnavailable
from .decode import (
    DecodeError,
    PayloadTooLarge,
    decode_proto_request,
    decoding,
    export_answer,
    span_count,
)
from .http_server import ACK_TIMEOUT_S, MAX_BODY_BYTES
from .limits import (
    Busy,
    Hold,
    InFlight,
    attribute_count,
    charge_counted,
    charge_decoded,
    charge_parsing,
    estimate_decoded,
)

MAX_WORKERS: Final = 8
TRACE_SERVICE: Final = "opentelemetry.proto.collector.trace.v1.TraceService"


class TraceService:
    """The OTLP trace service backed by the collector's pipeline."""

    def __init__(self, pipeline: Pipeline, auth_token: str | None,
                 inflight: InFlight | None = None) -> None:
        self.pipeline = pipeline
        self.auth_token = auth_token
        self.inflight = inflight or InFlight()

    def Export(self, body: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        """Admit, decode and store the request's spans, then acknowledge."""
        if self.auth_token and not _has_token(dict(context.invocation_metadata()),
                                               self.auth_token):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        try:
            with self.inflight.hold(len(body)) as held:
                spans = self._decode(body, context, held)
                self._store(spans, context, held)
        except Busy as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"not admitted, retry later: {exc}")
        return export_answer(spans)

    def _decode(self, body: bytes, context: grpc.ServicerContext, held: Hold) -> Decoded:
        """Parse, charge what the spans will take before building them, build them
        (``limits``: the memory bound is on decoded size, as for HTTP)."""
        try:
            with decoding():
                charge_parsing(held, len(body))
                try:
                    request = ExportTraceServiceRequest.FromString(body)
                except (ProtoDecodeError, ValueError, RecursionError) as exc:
                    raise DecodeError(f"protobuf: message could not be parsed ({exc})") from None
                count = span_count(request)
                charge_counted(held, count, len(body))
                spans = decode_proto_request(request)
                del request
                size = estimate_decoded(len(spans), len(body), attribute_count(spans))
                charge_decoded(held, size)
                return spans
        except DecodeError as exc:
            code = (grpc.StatusCode.RESOURCE_EXHAUSTED if isinstance(exc, PayloadTooLarge)
                    else grpc.StatusCode.INVALID_ARGUMENT)
            message = str(exc)
            self.pipeline.refuse(exc.http_status, f"an OTLP/gRPC request from "
                                                  f"{_peer(context)}", message, exc.spans)
            context.abort(code, message)
            raise  # abort raises; this line is for the type checker

    def _store(self, spans: Decoded, context: grpc.ServicerContext, held: Hold) -> None:
        """Hand the spans to the pipeline and wait until they are committed (or not: when
        that takes too long, UNAVAILABLE, and ``held`` is kept until the pipeline is done with
        the spans)."""
        job = None
        try:
            job = self.pipeline.submit(spans)
            job.wait(ACK_TIMEOUT_S)
        except Rejected as exc:
            self.pipeline.count_rejected(400)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except TooLargeToStore as exc:
            self.pipeline.count_rejected(413)
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except TimeoutError as exc:
            if job is not None:
                job.add_done_callback(held.keep())
            context.abort(grpc.StatusCode.UNAVAILABLE, f"not stored, retry later: {exc}")
        except (Overloaded, PipelineStopped, StoreUnavailable) as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"not stored, retry later: {exc}")
        except Exception as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE,
                          f"the store failed, retry later: {type(exc).__name__}")


class _TokenInterceptor(grpc.ServerInterceptor):
    """With an auth token, every method needs it, the health service's too: its answer says
    whether the store can be written and why not, as ``/healthz`` does, and ``/healthz`` asks
    for the token. A probe that cannot send metadata checks ``/healthz`` with the header, or
    runs ``grpc_health_probe -rpc-header 'authorization: Bearer TOKEN'``."""

    def __init__(self, token: str) -> None:
        self.token = token

        def refuse(_request: bytes, context: grpc.ServicerContext) -> None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

        self._refuse: grpc.RpcMethodHandler[bytes, bytes] = (
            grpc.unary_unary_rpc_method_handler(refuse))

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        metadata = dict(handler_call_details.invocation_metadata or ())
        if _has_token(metadata, self.token):
            return continuation(handler_call_details)
        return self._refuse


def _has_token(metadata: dict[str, Any], token: str) -> bool:
    given = str(metadata.get("authorization", ""))
    return given.startswith("Bearer ") and hmac.compare_digest(
        given[7:].strip().encode("latin-1", "replace"), token.encode())


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
               max_request_bytes: int = MAX_BODY_BYTES) -> grpc.Server:
    """Start the gRPC server (it serves on its own threads); returns it for ``stop``."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="loopscope-grpc"),
        # No SO_REUSEPORT: a second collector must not silently share (and split) the port.
        options=[("grpc.max_receive_message_length", max_request_bytes),
                 ("grpc.so_reuseport", 0)],
        interceptors=[_TokenInterceptor(auth_token)] if auth_token else None,
    )
    trace = TraceService(pipeline, auth_token, inflight)
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
