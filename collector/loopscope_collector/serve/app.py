"""The collector's HTTP routes as an ASGI application: OTLP in, named reads, labels and
health out.

- ``POST /v1/traces``: OTLP/HTTP (``receive.otlp_http``, over the export path gRPC takes).
- ``GET /v1/reads``, ``GET /v1/reads/{name}``: the named reads (``reads``).
- ``POST /v1/labels``: a human verdict (``labels``).
- ``GET /metrics``: Prometheus text format. ``GET /healthz``: 200 ``ok`` while the store can
  be written and exports are stored in time; 200 ``slow: <the wait>`` while the store can be
  written but exports waited over a second to be stored lately (``Pipeline.slow``);
  503 ``failing: <why>`` while the store cannot be written (see ``storage.health``), and
  spans then get 503 too.
- ``HEAD`` on a route read with ``GET`` answers as ``GET`` would, without the body. Any other
  method on these paths: 405 with ``Allow``; any other path: 404.

A request whose head is over its limits is 414 (a target over 8 KiB) or 431 (a head over
16 KiB, or of more than 100 header fields), before anything else (``receive.connections``).
With an auth token, every request must carry ``Authorization: Bearer <token>`` (else 401:
``receive.export.authorized``, the check gRPC makes too).

HTTP itself is uvicorn's (``http_server``). Decoding, reads and metrics run on small thread
pools, and a request waiting for its spans to be stored holds no thread. A named read and
``/metrics`` first wait (briefly) for the exports acknowledged before them to be stored.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from ..pipeline.thread import Pipeline
from ..receive.exchange import Exchange, Gone, Receive, Send, on_thread
from ..receive.export import authorized
from ..receive.limits import MAX_BODY_BYTES, RETRY_AFTER_S, InFlight
from ..receive.otlp_http import OtlpHttp
from ..receive.spool import Spool
from ..storage import Store
from .labels import label
from .reads import list_reads, named_read

logger = logging.getLogger(__name__)

READ_THREADS: Final = 4
READ_WAIT_S: Final = 5.0
"""The longest a named read or ``/metrics`` waits for the exports acknowledged before it to be
stored (``Pipeline.caught_up``: admission keeps that under about a second)."""

_POST: Final = ("POST",)
_GET: Final = ("GET", "HEAD")
_ROUTES: Final = {"/v1/traces": _POST, "/v1/labels": _POST, "/healthz": _GET, "/metrics": _GET,
                  "/v1/reads": _GET, "/v1/reads/": _GET}
_TEXT: Final = b"text/plain; charset=utf-8"


def _allowed(path: str) -> tuple[str, ...] | None:
    """The methods a path takes; None for a path that is not a route."""
    return _ROUTES.get(path) or (_GET if path.startswith("/v1/reads/") else None)


class CollectorApp:
    """The collector's HTTP routes (module docstring); an ASGI 3 application."""

    def __init__(self, *, pipeline: Pipeline, db: Store, auth_token: str | None = None,
                 prometheus: Callable[[], str] | None = None,
                 max_body_bytes: int = MAX_BODY_BYTES, inflight: InFlight | None = None,
                 spool: Spool | None = None) -> None:
        self.pipeline = pipeline
        self.db = db
        self.auth_token = auth_token
        self.prometheus = prometheus
        self.max_body_bytes = max_body_bytes
        self.otlp = OtlpHttp(pipeline, max_body_bytes=max_body_bytes, inflight=inflight,
                             spool=spool)
        self.inflight = self.otlp.inflight
        self.reading = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="loopscope-read")

    def close(self) -> None:
        self.otlp.close()
        self.reading.shutdown(wait=False, cancel_futures=True)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        exchange = Exchange(scope, receive, send)
        try:
            await self._route(exchange)
        except Gone:
            return
        except Exception:
            logger.exception("loopscope collector: error serving %s %s", scope["method"],
                             scope["path"])
            if not exchange.started:
                await exchange.json(500, {"error": "the collector failed to answer this "
                                                   "request; see its log"})

    async def _route(self, ex: Exchange) -> None:
        path, method = ex.scope["path"], ex.scope["method"]
        if refused := ex.head_refused():
            status, why = refused
            await ex.json(status, {"error": why}, close=True)
            return
        drain_limit = 4 * self.max_body_bytes
        if not authorized(ex.header(b"authorization"), self.auth_token):
            close = not await ex.drain(drain_limit)
            await ex.json(401, {"error": "missing or wrong bearer token"},
                          {"WWW-Authenticate": "Bearer"}, close=close)
            return
        allowed = _allowed(path)  # (HEAD is answered as GET; uvicorn sends no body to it)
        if allowed is None:
            hint = "; OTLP goes to /v1/traces" if method == "POST" else ""
            close = not await ex.drain(drain_limit)
            await ex.json(404, {"error": f"no route {method} {path}{hint}"}, close=close)
        elif method not in allowed:
            says = "is read with GET (or HEAD)" if allowed == _GET else "takes POST"
            close = not await ex.drain(drain_limit)
            await ex.json(405, {"error": f"{path} {says}, not {method}"},
                          {"Allow": ", ".join(allowed)}, close=close)
        elif path == "/v1/traces":
            await self.otlp.export(ex)
        elif path == "/v1/labels":
            await label(ex, self.pipeline, drain_limit=drain_limit)
        elif path == "/healthz":
            await self._health(ex)
        elif path == "/metrics":
            await self._caught_up()
            text = await on_thread(self.reading, self.prometheus) if self.prometheus else ""
            await ex.answer(200, text.encode(), b"text/plain; version=0.0.4; charset=utf-8")
        elif path in ("/v1/reads", "/v1/reads/"):
            await list_reads(ex)
        else:
            await self._caught_up()
            await named_read(ex, path.removeprefix("/v1/reads/"), self.db, self.reading)

    async def _caught_up(self) -> None:
        """Before a read or ``/metrics``: wait until the exports acknowledged before it are
        stored (a 200 comes once a request is spooled, before its batch), so what they show
        holds every one (``Pipeline.caught_up``, at most ``READ_WAIT_S``)."""
        await on_thread(self.reading, functools.partial(self.pipeline.caught_up, READ_WAIT_S))

    async def _health(self, ex: Exchange) -> None:
        """200 ``ok`` while the store can be written (``slow: <the wait>`` while answers
        wait); else 503 ``failing: <why>``."""
        health = self.pipeline.health
        if health.ok:
            slow = self.pipeline.slow()
            await ex.answer(200, b"ok\n" if slow is None else f"slow: {slow}\n".encode(),
                            _TEXT)
        else:
            await ex.answer(503, f"failing: {health.reason}\n".encode(), _TEXT,
                            {"Retry-After": RETRY_AFTER_S})
