"""One HTTP request and its answer, as the collector's ASGI routes see them (``Exchange``).

The plumbing the OTLP/HTTP route (``otlp_http``) and the serving routes (``serve``) share:
the request's headers, the limits on its head (``connections``), reading a small body or
draining one the answer will not use, and answering in JSON every client parses.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import json
import math
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any, Final, TypeVar

from .connections import CONNECTION_KEY, WatchedH11Protocol, head_refused
from .decode import PayloadTooLarge

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]
T = TypeVar("T")

JSON: Final = b"application/json"
UNFRAMED: Final = ("Length Required: send the body with a Content-Length or chunked "
                   "Transfer-Encoding (a POST framed by neither has no body)")


class Gone(Exception):
    """The client disconnected (or was disconnected) before its request was read."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity as null: JSON has no such numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def dump_json(data: Any) -> bytes:
    """JSON as every client parses it: a number that is not finite is null, never a bare
    ``NaN`` (which is not JSON)."""
    try:
        text = json.dumps(data, default=_jsonable, ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(data), default=_jsonable, ensure_ascii=False,
                          allow_nan=False)
    return text.encode()


async def on_thread(pool: Executor, work: Callable[[], T]) -> T:
    """``work()`` on one of ``pool``'s threads, awaited without holding the event loop."""
    return await asyncio.get_running_loop().run_in_executor(pool, work)


class Exchange:
    """One request and its answer."""

    __slots__ = ("headers", "receive", "scope", "send", "started", "status")

    def __init__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.started = False
        self.status = 0
        """The answer's status, once it is sent."""
        self.headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            self.headers.setdefault(name, value)

    def header(self, name: bytes) -> str | None:
        value = self.headers.get(name)
        return None if value is None else value.decode("latin-1")

    def head_refused(self) -> tuple[int, str] | None:
        """414 or 431 and why, for a head over its limits (``connections``)."""
        scope = self.scope
        target = len(scope["raw_path"]) + (len(scope["query_string"]) + 1
                                           if scope["query_string"] else 0)
        fields = scope["headers"]
        head = (len(scope["method"]) + target + 11  # "GET /x HTTP/1.1\r\n"
                + sum(len(name) + len(value) + 4 for name, value in fields))
        return head_refused(target, head, len(fields))

    @property
    def framed(self) -> bool:
        """Whether the request's body is framed: by Content-Length, or chunked (h11 refuses
        any other Transfer-Encoding). Without either, HTTP/1.1 gives a request no body."""
        return b"content-length" in self.headers or b"transfer-encoding" in self.headers

    @property
    def connection(self) -> WatchedH11Protocol | None:
        conn = self.scope.get("extensions", {}).get(CONNECTION_KEY, {}).get("protocol")
        return conn if isinstance(conn, WatchedH11Protocol) else None

    async def answer(self, status: int, body: bytes, content_type: bytes,
                     headers: dict[str, str] | None = None, *, close: bool = False) -> None:
        raw = [(b"Content-Type", content_type), (b"Content-Length", str(len(body)).encode())]
        raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
        if close:
            raw.append((b"Connection", b"close"))
        self.started, self.status = True, status
        await self.send({"type": "http.response.start", "status": status, "headers": raw})
        await self.send({"type": "http.response.body", "body": body, "more_body": False})

    async def json(self, status: int, data: Any, headers: dict[str, str] | None = None,
                   *, close: bool = False) -> None:
        await self.answer(status, dump_json(data), JSON, headers, close=close)

    async def drain(self, limit: int) -> bool:
        """Read and drop what is left of a body the answer will not use, up to ``limit``
        bytes, so that a client still sending it reads the answer instead of a reset. False
        when the body is not drained (too large, or the client waits for ``100 Continue``):
        the answer then closes the connection."""
        if self.started:
            return True
        if self.headers.get(b"expect", b"").lower() == b"100-continue":
            return False
        declared = self.header(b"content-length")
        if declared is not None and int(declared) > limit:
            return False
        if declared in (None, "0") and b"transfer-encoding" not in self.headers:
            return True
        drained = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise Gone
            drained += len(message.get("body", b""))
            if drained > limit:
                return False
            if not message.get("more_body"):
                return True

    async def small_body(self, limit: int) -> bytes:
        """The whole body, of at most ``limit`` bytes (else ``PayloadTooLarge``)."""
        declared = self.header(b"content-length")
        if declared is not None and int(declared) > limit:
            raise PayloadTooLarge(f"over {limit} bytes")
        chunks, size = [], 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise Gone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"over {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)
