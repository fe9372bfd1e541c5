"""The one table of answers: the HTTP status, and so the gRPC code, that answers each way a
request fails, for both OTLP transports (``export``) and the serving routes (``serve/``).

As the OpenTelemetry Collector's ``internal/errors`` does it: a failure is sorted once, by
what it means (``STATUSES``: the pipeline's refusals and the store's own errors,
``storage.errors``), into an HTTP status; ``GRPC_CODES`` gives the gRPC code for each status,
and ``RETRYABLE`` says which a client may send again (OTLP's retryable codes). A failure the
table does not know is the route's to answer (an export: 503, retry later; a read: 500).
"""

from __future__ import annotations

from typing import Final

import grpc

from ..pipeline.jobs import Overloaded, PipelineStopped, Rejected, TooLargeToStore
from ..storage.errors import StoreDown
from ..storage.health import StoreUnavailable

__all__ = ["GRPC_CODES", "RETRYABLE", "STATUSES", "status_of"]

STATUSES: Final[tuple[tuple[type[BaseException], int], ...]] = (
    (Rejected, 400),  # the store refused the data itself: do not send it again
    (TooLargeToStore, 413),  # this request alone ran the store out of memory: split it
    (Overloaded, 503),  # the pipeline cannot take it now (Retry-After: its queue's drain)
    (PipelineStopped, 503),  # the collector is stopping
    (StoreUnavailable, 503),  # health says the store cannot be written now
    (StoreDown, 503),  # the store cannot be read or written now (a read's failure)
)
"""What answers each failure, first match; a failure found in none is the route's."""

RETRYABLE: Final = frozenset({429, 503})
"""The statuses a client should send the same request again for (OTLP's retryable
codes); every other refusal is permanent."""
GRPC_CODES: Final = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    503: grpc.StatusCode.UNAVAILABLE,
}
"""The gRPC code for each HTTP status a request is refused with."""


def status_of(exc: BaseException) -> int | None:
    """The HTTP status that answers ``exc`` (``STATUSES``), or None when the table does not
    know it."""
    for kind, status in STATUSES:
        if isinstance(exc, kind):
            return status
    return None
