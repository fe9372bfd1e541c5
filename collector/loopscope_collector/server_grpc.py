"""OTLP/gRPC: the ``TraceService/Export`` endpoint on port 4317, for any OTel SDK or Collector.

Same contract as the HTTP route: the response is sent once the spans are committed;
INVALID_ARGUMENT for a malformed request, UNAVAILABLE (which OTLP clients retry) when the
pipeline is overloaded or the store failed, UNAUTHENTICATED without the bearer token.
"""

from __future__ import annotations

import hmac
from concurrent import futures
from typing import Any, Final

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from .decode import DecodeError, decode_proto_request
from .pipeline import Overloaded, Pipeline, PipelineStopped, Rejected
from .server import ACK_TIMEOUT_S, MAX_BODY_BYTES

MAX_WORKERS: Final = 8


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    """The OTLP trace service backed by the collector's pipeline."""

    def __init__(self, pipeline: Pipeline, auth_token: str | None) -> None:
        self.pipeline = pipeline
        self.auth_token = auth_token

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        """Store the request's spans, then acknowledge."""
        if self.auth_token:
            metadata = dict(context.invocation_metadata())
            given = str(metadata.get("authorization", ""))
            if not (given.startswith("Bearer ")
                    and hmac.compare_digest(given[7:].strip(), self.auth_token)):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        try:
            spans = decode_proto_request(request)
        except DecodeError as exc:
            self.pipeline.count_rejected(400)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        try:
            self.pipeline.submit(spans).wait(ACK_TIMEOUT_S)
        except Rejected as exc:
            self.pipeline.count_rejected(400)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except (Overloaded, PipelineStopped, TimeoutError) as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"not stored, retry later: {exc}")
        except Exception as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE,
                          f"the store failed, retry later: {type(exc).__name__}")
        return trace_service_pb2.ExportTraceServiceResponse()


TRACE_SERVICE: Final = "opentelemetry.proto.collector.trace.v1.TraceService"


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


def serve_grpc(pipeline: Pipeline, host: str, port: int, *,
               auth_token: str | None = None) -> grpc.Server:
    """Start the gRPC server (it serves on its own threads); returns it for ``stop``."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="loopscope-grpc"),
        # No SO_REUSEPORT: a second collector must not silently share (and split) the port.
        options=[("grpc.max_receive_message_length", MAX_BODY_BYTES), ("grpc.so_reuseport", 0)],
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
        TraceService(pipeline, auth_token), server)
    health_pb2_grpc.add_HealthServicer_to_server(_health_service(pipeline), server)
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:  # newer grpcio raises instead of returning 0
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}: {exc}") from None
    if not bound:
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}")
    server.start()
    return server
