"""The HTTP connections the collector keeps open, and how long each may take.

HTTP/1.1 itself (framing, keep-alive, malformed requests) is uvicorn's, with h11; this is the
thin layer it does not have: a connection cap, and deadlines for each phase of a request.
``WatchedH11Protocol`` is uvicorn's h11 protocol with each connection's phase followed:

- idle: open, no byte of a request yet (``--idle-timeout``; also between requests);
- headers: a request has begun, its headers are not complete (``--header-timeout``);
- body: headers read, the body arriving (``--body-timeout``), or being drained after an early
  answer;
- working: the request is complete and the collector works on it: no deadline;
- linger: answered, and the connection closing (``Connection: close``, or a request refused
  before its body was read): the answer is sent and then the sending side is shut (FIN),
  and what the client still sends is read and dropped, never parsed, until it closes, or
  sends nothing for ``LINGER_S``, or the body timeout passes; then the connection is closed.
  Closing at once would reset a connection whose client is still sending its body, and a
  client that writes its whole body before it reads (http.client does) would see the reset
  instead of the answer (nginx's lingering close and Go's ``closeWriteAndWait`` do the same).

A connection past its deadline is closed (408 first when a request has begun). At the cap a
new connection takes the place of another: the one that has waited longest without a
complete request (idle, in its headers, or lingering), else the body arriving slowest (of those arriving
for a second at least), which is answered 503 with Retry-After; only when every connection is
working (or just began its body) is the newcomer answered 503.
So slow clients, in their headers or their bodies, can fill the cap but never keep a normal
client out.

A request's head has limits (``limits``): a target over ``MAX_TARGET_BYTES`` is 414, a head
over ``MAX_HEAD_BYTES`` or with more than ``MAX_HEADER_FIELDS`` fields 431, and the connection
is closed. h11 refuses a head that grows past ``MAX_HEAD_BYTES`` without ending
(``send_400_response`` names which limit it passed); one that arrives whole is parsed, and
the application refuses it before anything else (``head_refused``). The same slowest-body rule frees bytes in flight (``limits.InFlight``); that
eviction answers 503 but keeps the connection (``otlp_http``), and ``wake`` tells its handler.
"""

from __future__ import annotations

import asyncio
import logging
import time
from http import HTTPStatus
from typing import Any, ClassVar, Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from .limits import (
    BODY_TIMEOUT_S,
    HEADER_TIMEOUT_S,
    IDLE_TIMEOUT_S,
    JUDGED_AFTER_S,
    MAX_CONNECTIONS,
    MAX_HEAD_BYTES,
    MAX_HEADER_FIELDS,
    MAX_TARGET_BYTES,
    RETRY_AFTER_S,
)

logger = logging.getLogger(__name__)

SWEEP_S: Final = 0.25
LINGER_S: Final = 5.0
"""A closing connection (phase ``linger``) is closed once its client sent nothing this long."""

IDLE, HEADERS, BODY, WORKING, LINGER = "idle", "headers", "body", "working", "linger"
CONNECTION_KEY: Final = "loopscope.connection"
"""Where a request's scope carries its connection, for eviction: ``extensions[CONNECTION_KEY]
["protocol"]`` (ASGI extensions hold a dict per extension)."""


def _answer(status: int, reason: str, text: str, extra: str = "") -> bytes:
    body = text.encode()
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n").encode() + body


_TOO_MANY: Final = _answer(503, "Service Unavailable", "too many connections, retry later",
                           f"Retry-After: {RETRY_AFTER_S}\r\n")
_EVICTED: Final = _answer(503, "Service Unavailable",
                          "evicted: this request's body arrived slowest while the collector "
                          "was full; retry later", f"Retry-After: {RETRY_AFTER_S}\r\n")
_TIMED_OUT: Final = _answer(408, "Request Timeout",
                            "the request's headers or body took too long to arrive")
_REASONS: Final = {414: HTTPStatus(414).phrase, 431: HTTPStatus(431).phrase}


def head_refused(target: int, head: int, fields: int) -> tuple[int, str] | None:
    """414 or 431 and why, for a request head over its limits (module docstring): a target
    of ``target`` bytes, a head of ``head`` bytes with ``fields`` header fields; None within
    them."""
    if target > MAX_TARGET_BYTES:
        return 414, f"the request target is {target} bytes, over the limit of {MAX_TARGET_BYTES}"
    if head > MAX_HEAD_BYTES:
        return 431, f"the request's head is {head} bytes, over the limit of {MAX_HEAD_BYTES}"
    if fields > MAX_HEADER_FIELDS:
        return 431, f"{fields} header fields, over the limit of {MAX_HEADER_FIELDS}"
    return None


class ConnectionWatch:
    """The HTTP server's open connections, their deadlines and the cap; event loop only
    (the counters are read by /metrics from any thread)."""

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
        self._open: dict[WatchedH11Protocol, None] = {}
        self._sweeping: asyncio.TimerHandle | None = None

    @property
    def connections(self) -> int:
        """Open connections."""
        return len(self._open)

    def enter(self, conn: WatchedH11Protocol) -> bool:
        """Count a new connection; at the cap, evict another (see the module docstring).
        False when every connection is working (the newcomer is refused)."""
        if self._sweeping is None:
            self._sweeping = conn.loop.call_later(SWEEP_S, self._sweep, conn.loop)
        if len(self._open) >= self.max_connections:
            victim = self._victim()
            if victim is None:
                self.refused += 1
                return False
            self.evicted += 1
            victim.end(_EVICTED)
            self._open.pop(victim, None)
        self._open[conn] = None
        return True

    def leave(self, conn: WatchedH11Protocol) -> None:
        self._open.pop(conn, None)

    def _victim(self) -> WatchedH11Protocol | None:
        """The connection waiting longest without a complete request (or lingering), else
        the body arriving slowest; None when every connection is working."""
        waiting = [c for c in self._open if c.phase in (IDLE, HEADERS, LINGER)]
        if waiting:
            return min(waiting, key=lambda c: c.since)
        now = time.monotonic()
        bodies = [c for c in self._open if c.phase == BODY and now - c.since >= JUDGED_AFTER_S]
        return min(bodies, key=lambda c: c.rate(now)) if bodies else None

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = time.monotonic()
        for conn in [c for c in self._open if c.deadline is not None and c.deadline < now]:
            if conn.phase != LINGER:  # (a lingering connection was answered: it just ends)
                self.timed_out += 1
            conn.end(_TIMED_OUT if conn.phase in (HEADERS, BODY) else None)
            self._open.pop(conn, None)
        self._sweeping = loop.call_later(SWEEP_S, self._sweep, loop)

    def stop(self) -> None:
        if self._sweeping is not None:
            self._sweeping.cancel()
            self._sweeping = None


class WatchedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the connection's phase followed (module docstring);
    ``with_watch`` makes the class for one server."""

    watch: ClassVar[ConnectionWatch]

    @classmethod
    def with_watch(cls, watch: ConnectionWatch) -> type[WatchedH11Protocol]:
        return type("WatchedH11Protocol", (cls,), {"watch": watch})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.phase = IDLE
        self.since = time.monotonic()
        self.deadline: float | None = None
        self.body_bytes = 0
        self._followed: RequestResponseCycle | None = None
        self._socket: asyncio.Transport | None = None
        """The transport itself; uvicorn holds a ``_Lingering`` one."""
        self._linger_until = 0.0
        self._lingers = True
        """Whether a close lingers: not once the connection is lost or the server stops."""

    # -- uvicorn's hooks ---------------------------------------------------------------------

    # asyncio.Protocol takes a BaseTransport; uvicorn's H11Protocol narrows it to Transport
    # (with the same ignore), and so does this override of it.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._socket = transport
        super().connection_made(_Lingering(transport, self))
        if not self.watch.enter(self):
            transport.write(_TOO_MANY)
            transport.close()
            return
        self._to(IDLE)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lingers = False
        self.watch.leave(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.phase == LINGER:  # dropped, never parsed
            self.deadline = min(time.monotonic() + LINGER_S, self._linger_until)
            return
        if self.phase == IDLE:
            self._to(HEADERS)
        elif self.phase == BODY:
            self.body_bytes += len(data)
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.SEND_BODY:  # answered early: the rest is drained
            self._to(BODY)
        else:
            self._to(IDLE)
        self._follow()

    def shutdown(self) -> None:
        """The server is stopping: a connection without a complete request is closed now
        (a slow body must not hold the shutdown); one being worked on gets its answer."""
        self._lingers = False
        if self.phase in (IDLE, HEADERS, BODY, LINGER):
            self.end(None)
        else:
            super().shutdown()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 cannot read: 414 or 431 for a head that grew past
        ``MAX_HEAD_BYTES`` without ending (h11's only such refusal), by whether its request
        line ended; 400 for any other."""
        buffered, _ = self.conn.trailing_data
        if len(buffered) <= MAX_HEAD_BYTES or (self.cycle is not None
                                                and not self.cycle.response_complete):
            super().send_400_response(msg)  # (not in a head: a chunk size line, say)
            return
        line = buffered.find(b"\n")
        if line < 0 or line > MAX_TARGET_BYTES:
            status, why = 414, f"the request line is over {MAX_TARGET_BYTES} bytes"
        else:
            status, why = 431, f"the request's head is over {MAX_HEAD_BYTES} bytes"
        self.transport.write(_answer(status, _REASONS[status], why))
        self.transport.close()

    def timeout_keep_alive_handler(self) -> None:
        """uvicorn's own keep-alive timer: the watch's idle deadline does this."""

    # -- the watch's side --------------------------------------------------------------------

    def _to(self, phase: str) -> None:
        self.phase = phase
        watch = self.watch
        timeout = {IDLE: watch.idle_timeout_s, HEADERS: watch.header_timeout_s,
                   BODY: watch.body_timeout_s, LINGER: LINGER_S}.get(phase)
        now = time.monotonic()
        if phase != HEADERS:  # a connection in its headers keeps its place in the order
            self.since = now
        if phase == BODY:
            self.body_bytes = 0
        if phase == LINGER:
            self._linger_until = now + watch.body_timeout_s
        self.deadline = None if timeout is None else now + timeout

    def close_after_answer(self) -> None:
        """uvicorn closes the connection (after an answer, or on a request it cannot frame):
        linger (module docstring), unless the connection is lost, the server stops, or the
        transport cannot shut only its sending side."""
        sock = self._socket
        if sock is None or sock.is_closing() or self.phase == LINGER:
            return
        if not self._lingers or not sock.can_write_eof():
            sock.close()
            return
        self._to(LINGER)
        sock.write_eof()  # FIN once the answer is written
        sock.resume_reading()  # (uvicorn may have paused it for a body it did not read)

    def _follow(self) -> None:
        """After uvicorn handled what arrived: a new request's headers complete (its scope
        learns its connection), a body complete, a drained body done."""
        cycle = self.cycle
        if self.phase == LINGER:
            return
        if cycle is not None and cycle is not self._followed and not cycle.response_complete:
            self._followed = cycle
            cycle.scope.setdefault("extensions", {})[CONNECTION_KEY] = {"protocol": self}
            self._to(BODY if cycle.more_body else WORKING)
        elif self.phase == BODY and cycle is not None and not cycle.response_complete:
            if not cycle.more_body:
                self._to(WORKING)
        elif self.phase == BODY and self.conn.their_state is not h11.SEND_BODY:
            self._to(IDLE)  # a drained body ended

    def rate(self, now: float) -> float:
        """Bytes per second of the body arriving."""
        return self.body_bytes / max(now - self.since, 1e-3)

    def wake(self) -> None:
        """Wake the request's handler if it waits for more of the body (it is handed an
        empty chunk): admission evicted its body and it has bytes to let go of."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.message_event.set()

    def end(self, answer: bytes | None) -> None:
        """Close the connection, with ``answer`` first when a request has begun and no
        answer to it was started."""
        self.deadline = None
        sock = self._socket
        if sock is None or sock.is_closing():
            return
        unanswered = self.phase == HEADERS or (
            self.phase == BODY and self.cycle is not None and not self.cycle.response_started)
        if answer is not None and unanswered:
            sock.write(answer)
        sock.close()


class _Lingering(asyncio.Transport):
    """A connection's transport as uvicorn holds it: the transport itself, except that
    ``close`` lingers (``WatchedH11Protocol.close_after_answer``) and a lingering connection
    is closing."""

    def __init__(self, transport: asyncio.Transport, protocol: WatchedH11Protocol) -> None:
        super().__init__()
        self._transport = transport
        self._protocol = protocol

    def close(self) -> None:
        self._protocol.close_after_answer()

    def is_closing(self) -> bool:
        return self._transport.is_closing() or self._protocol.phase == LINGER

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._transport.write(data)

    def abort(self) -> None:
        self._transport.abort()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()
