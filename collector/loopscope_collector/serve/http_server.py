"""The collector's loopback HTTP server: uvicorn (h11) serving ``app.CollectorApp``.

HTTP/1.1 framing, keep-alive, pipelining and malformed requests are uvicorn's and h11's, code
that serves millions of requests a day: a request it cannot frame (a ``Content-Length`` that
is not ASCII digits, two that disagree, a broken chunk) is answered 400 and the connection
closed. What is the collector's own is thin and lives beside it: the routes and auth
(``app``), admission (``receive.otlp_http``, ``receive.limits``) and the connection cap,
deadlines and limits on a request's head (``receive.connections``). The server runs its event
loop on a thread of its own, so the collector starts and stops it like the gRPC server. Its ``Server`` header says ``loopscope-collector``
and nothing about Python or uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any, Final

import uvicorn

from ..pipeline.thread import Pipeline
from ..receive.connections import ConnectionWatch, WatchedH11Protocol
from ..receive.limits import MAX_BODY_BYTES, MAX_HEAD_BYTES, InFlight
from ..receive.spool import Spool
from ..storage import Store
from .app import CollectorApp

__all__ = ["MAX_BODY_BYTES", "CollectorHTTPServer"]

logger = logging.getLogger(__name__)

SERVER_HEADER: Final = "loopscope-collector"
START_TIMEOUT_S: Final = 30.0


class CollectorHTTPServer:
    """The HTTP server of one collector. The port is bound when it is made (``OSError`` if
    taken); ``serve_in_thread`` serves; ``shutdown`` then ``server_close`` stop it."""

    def __init__(
        self,
        address: tuple[str, int],
        *,
        pipeline: Pipeline,
        db: Store,
        auth_token: str | None = None,
        prometheus: Callable[[], str] | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        inflight: InFlight | None = None,
        watch: ConnectionWatch | None = None,
        spool: Spool | None = None,
    ) -> None:
        self.watch = watch or ConnectionWatch()
        self.pipeline = pipeline
        self.db = db
        self.inflight = inflight or InFlight(max_body_bytes)
        self.app = CollectorApp(pipeline=pipeline, db=db, auth_token=auth_token,
                                prometheus=prometheus, max_body_bytes=max_body_bytes,
                                inflight=self.inflight, spool=spool)
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(128)
            self.socket.setblocking(False)
        except OSError:
            self.socket.close()
            raise
        self.server_address: tuple[Any, ...] = self.socket.getsockname()
        config = uvicorn.Config(
            self.app, http=WatchedH11Protocol.with_watch(self.watch), ws="none",
            lifespan="off", loop="asyncio", log_config=None, log_level=logging.WARNING,
            access_log=False, proxy_headers=False, server_header=False,
            headers=[("server", SERVER_HEADER)], backlog=128,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            timeout_keep_alive=int(self.watch.idle_timeout_s) + 1,
            timeout_graceful_shutdown=5,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def serve_in_thread(self) -> threading.Thread:
        """Serve on a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self._serve, name="loopscope-http", daemon=True)
        self._thread.start()
        for _ in range(int(START_TIMEOUT_S / 0.01)):
            if self._server.started or not self._thread.is_alive():
                break
            self._thread.join(0.01)
        if not self._server.started:
            raise OSError("the HTTP server did not start")
        return self._thread

    def _serve(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self.socket]))
        except Exception:
            logger.exception("loopscope collector: the HTTP server stopped")
        finally:
            self.watch.stop()

    def serve_forever(self) -> None:
        """Serve on the calling thread until ``shutdown``."""
        self._serve()

    def shutdown(self) -> None:
        """Stop serving: no new connections; requests in progress get their answers (a few
        seconds at most)."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(15)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(5)

    def server_close(self) -> None:
        """Release the port and the worker threads."""
        with contextlib.suppress(OSError):
            self.socket.close()
        self.app.close()
