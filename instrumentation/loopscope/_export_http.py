"""The HTTP session loopscope gives OpenTelemetry's OTLP/HTTP exporter: it tells the
``ResilientExporter`` how each attempt ended, which the exporter itself does not say.

The exporter takes a ``requests.Session`` (its documented ``session=`` argument) and sends
every attempt, retries included, through ``Session.send``. This one records the answer (its
status and ``Retry-After``), a timeout, or a refused connection. A refused connection is
raised as ``CollectorRefused``, which is not one of the connection errors the exporter
retries: nothing listens there, so retrying for the whole export timeout would only hold the
export thread (and the flush at exit) for nothing. Imported only when a collector exporter is
built, so that ``import loopscope`` does not import ``requests``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

import requests
from requests import PreparedRequest, Response

from ._export import Attempt


class CollectorRefused(ConnectionRefusedError):
    """The collector's address refused the connection: nothing listens there."""


def _ignore(attempt: Attempt) -> None:
    return None


class ObservedSession(requests.Session):
    """A ``requests.Session`` that reports each attempt to ``observer`` (set after the
    exporter that reads the reports is built)."""

    def __init__(self) -> None:
        super().__init__()
        self.observer: Callable[[Attempt], None] = _ignore

    def send(self, request: PreparedRequest, **kwargs: Any) -> Response:
        """Send as ``requests`` does; report how it ended; raise a refused connection as
        ``CollectorRefused`` (so the exporter does not retry it)."""
        try:
            response = super().send(request, **kwargs)
        except requests.exceptions.Timeout as exc:  # connect or read timeout
            self.observer(Attempt("timed_out", detail=str(exc)))
            raise
        except requests.exceptions.ConnectionError as exc:
            if refused(exc):
                self.observer(Attempt("refused", detail="connection refused"))
                raise CollectorRefused(f"connection refused by {request.url}") from exc
            self.observer(Attempt("error", detail=str(exc)))
            raise
        except Exception as exc:
            self.observer(Attempt("error", detail=f"{type(exc).__name__}: {exc}"))
            raise
        self.observer(Attempt("answered", status=response.status_code,
                              retry_after_s=retry_after_s(response.headers.get("Retry-After"))))
        return response


def refused(exc: BaseException) -> bool:
    """Whether a ``ConnectionRefusedError`` is among the causes of ``exc`` (``requests`` wraps
    it in urllib3's ``NewConnectionError`` inside a ``MaxRetryError``)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        error = todo.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, ConnectionRefusedError):
            return True
        linked = [error.__cause__, error.__context__, getattr(error, "reason", None),
                  *error.args]
        todo += [e for e in linked if isinstance(e, BaseException)]
    return False


def retry_after_s(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds from now (it is seconds or an HTTP date), or
    ``None`` when it is absent or cannot be read."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT
            when = when.replace(tzinfo=UTC)
        return max(when.timestamp() - time.time(), 0.0)
    return max(seconds, 0.0) if math.isfinite(seconds) else None
