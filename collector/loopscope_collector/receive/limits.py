"""What one collector process lets in at once: bytes in flight, connections, and time.

A request's spans are in memory from the moment its body is read until its batch commits,
and decoding multiplies that: a 30 MiB protobuf body becomes about 110 MiB of span records.
So the receivers admit a request only while the bytes of the requests already in flight
leave room for it (``InFlight``); past that the client is told 503 with Retry-After, which
every OTLP exporter honours. The HTTP server also caps its connections, and
``ConnectionWatch`` closes a connection that takes too long to send its headers or its body,
or sits idle between requests, so slow or silent clients cannot hold threads and file
descriptors for ever. At the cap, a new connection takes the place of the one that has waited
longest without a complete request (idle, or still sending its headers): slow-loris clients
can fill the cap but never keep a normal client out; only connections the collector is busy
with (a body being received, a request being stored) make a new one wait (503).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Final

logger = logging.getLogger(__name__)

MAX_INFLIGHT_BYTES: Final = 48 * 1024 * 1024
"""Default cap on the bytes of requests being read, decoded or stored at once."""
MAX_CONNECTIONS: Final = 256
"""Default cap on open HTTP connections (well below the usual 1,024 file descriptors)."""
HEADER_TIMEOUT_S: Final = 10.0
"""Time from a request's first byte to the end of its headers."""
BODY_TIMEOUT_S: Final = 60.0
"""Time to receive a request's body once its headers are read."""
IDLE_TIMEOUT_S: Final = 30.0
"""Time a kept-alive connection may wait for its next request."""


class Busy(RuntimeError):
    """Not admitted now: too many bytes in flight or too many connections (503 Retry-After)."""


class InFlight:
    """The bytes of requests in flight across all receivers; thread-safe."""

    def __init__(self, max_bytes: int = MAX_INFLIGHT_BYTES) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self.refused = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, size: int) -> Iterator[Hold]:
        """Hold ``size`` bytes for the ``with`` block; ``Busy`` when they do not fit.

        A request is always admitted when nothing else is in flight, so one request up to
        the request size limit never waits for ever.
        """
        held = Hold(self)
        held.grow(size)
        try:
            yield held
        finally:
            with self._lock:
                self.used -= held.size

    def _take(self, size: int) -> None:
        with self._lock:
            if self.used and self.used + size > self.max_bytes:
                self.refused += 1
                raise Busy(f"{self.used} bytes of requests in flight, the limit is "
                           f"{self.max_bytes}")
            self.used += size


class Hold:
    """The bytes one request holds; ``grow`` when it turns out bigger (a body inflated)."""

    def __init__(self, owner: InFlight) -> None:
        self.owner = owner
        self.size = 0

    def grow(self, size: int) -> None:
        """Hold ``size`` more bytes; ``Busy`` when they do not fit."""
        self.owner._take(size)
        self.size += size


class ConnectionWatch:
    """Counts the HTTP server's connections and closes those past their deadline.

    Each connection's handler sets a deadline for the phase it is in (idle, headers, body)
    and clears it while the collector itself is working; a thread looks every quarter second
    and shuts down the sockets whose deadline has passed, which wakes their handler with an
    end of file. Connections waiting for a complete request (idle or in their headers) are
    also kept in the order they started waiting, the oldest first: at the cap, ``enter``
    evicts the oldest to admit the new one.
    """

    def __init__(self, *, max_connections: int = MAX_CONNECTIONS,
                 header_timeout_s: float = HEADER_TIMEOUT_S,
                 body_timeout_s: float = BODY_TIMEOUT_S,
                 idle_timeout_s: float = IDLE_TIMEOUT_S) -> None:
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.timed_out = 0
        self.refused = 0
        self.evicted = 0
        self._deadlines: dict[socket.socket, float | None] = {}
        self._waiting: dict[socket.socket, None] = {}
        """Connections without a complete request, oldest first (a dict keeps that order)."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loopscope-http-watch",
                                        daemon=True)

    def start(self) -> None:
        """Start the watching thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the watching thread."""
        self._stop.set()

    def enter(self, sock: socket.socket) -> bool:
        """Count a new connection (idle deadline). At the cap, evict the connection that has
        waited longest for a complete request; False when every one is busy."""
        victim = None
        with self._lock:
            if len(self._deadlines) >= self.max_connections:
                if not self._waiting:
                    self.refused += 1
                    return False
                victim = next(iter(self._waiting))
                del self._waiting[victim], self._deadlines[victim]
                self.evicted += 1
            self._deadlines[sock] = time.monotonic() + self.idle_timeout_s
            self._waiting[sock] = None
        if victim is not None:  # wakes its handler with an end of file
            with contextlib.suppress(OSError):
                victim.shutdown(socket.SHUT_RDWR)
        return True

    def leave(self, sock: socket.socket) -> None:
        """The connection is closed."""
        with self._lock:
            self._deadlines.pop(sock, None)
            self._waiting.pop(sock, None)

    def expect(self, sock: socket.socket, timeout_s: float | None, *,
               waiting: bool = False) -> None:
        """The connection must make progress within ``timeout_s`` (None: no deadline).

        ``waiting``: it has no complete request yet (idle, or reading headers), so it may be
        evicted at the cap; a connection already waiting keeps its place in the order.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            if sock in self._deadlines:
                self._deadlines[sock] = deadline
                if waiting:
                    self._waiting.setdefault(sock, None)
                else:
                    self._waiting.pop(sock, None)

    @property
    def connections(self) -> int:
        """Open connections."""
        return len(self._deadlines)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            now = time.monotonic()
            with self._lock:
                late = [s for s, d in self._deadlines.items() if d is not None and d < now]
                for sock in late:
                    self._deadlines[sock] = None
                    self._waiting.pop(sock, None)
            for sock in late:
                self.timed_out += 1
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
