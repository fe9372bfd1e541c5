"""Admission: what one collector process lets in at once, counted in bytes.

A request's spans are in memory from the moment its body arrives until its batch commits, and
decoding multiplies that: a 30 MiB protobuf body of small spans becomes several hundred MiB of
span records. So every receiver charges what a request holds against one budget
(``InFlight``): the body's bytes as they arrive (HTTP) or the message at once (gRPC), then,
once decoded, what the decoded spans take (``decoded_size``). Past the budget a client is told
503 with Retry-After, which every OTLP exporter honours.

Bytes are charged as they arrive, never for what a header declares: a client that declares
24 MiB and sends a byte a second holds a byte a second. When a request needs bytes the
budget does not have, the body that is arriving slowest is evicted first (answered 503 and
disconnected; its bytes freed), as long as it is slower than the request asking and has been
arriving for a second at least: slow bodies cannot hold the budget against fast ones. Requests that are fully received (being decoded or
stored) are never evicted; when they alone fill the budget, the newcomer waits (503).

A request is always admitted when nothing else is in flight, so one request up to the request
size limit never waits for ever. The two limits agree: a request under the request size limit
is never refused as too large for the budget. One that alone takes more than the whole budget
once decoded (a 30 MiB body of minimal spans takes about 600 MiB) is admitted only alone (503
while others hold bytes), so the memory held is at most the budget or that one request,
whichever is more.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from ..normalize.spans import SpanRecord
from .errors import AdmissionError

# The admission limits' defaults, each stated here once: the receivers and the collector's
# flags (``loopscope collector --max-*``, ``--*-timeout``) read them from this module, which
# imports nothing heavy, so ``loopscope --help`` builds without the collector's dependencies.
MAX_BODY_BYTES: Final = 32 * 1024 * 1024
"""Largest request accepted, HTTP or gRPC, compressed or not (after decompression too)."""
MAX_INFLIGHT_BYTES: Final = 192 * 1024 * 1024
"""Default cap on the memory requests hold at once: bodies as they arrive, then their
decoded spans (``decoded_size``), until their batch commits; a request that alone takes more
is admitted alone (module docstring)."""
MAX_CONNECTIONS: Final = 256
"""Default cap on open HTTP connections (well below the usual 1,024 file descriptors)."""
HEADER_TIMEOUT_S: Final = 10.0
"""Time from a request's first byte to the end of its headers."""
BODY_TIMEOUT_S: Final = 60.0
"""Time to receive a request's body once its headers are read."""
IDLE_TIMEOUT_S: Final = 30.0
"""Time a connection may wait for its (next) request."""
MAX_TARGET_BYTES: Final = 8 * 1024
"""Longest HTTP request target (path and query) read; longer is 414."""
MAX_HEAD_BYTES: Final = 16 * 1024
"""Largest HTTP request head (request line and header fields) read; larger is 431."""
MAX_HEADER_FIELDS: Final = 100
"""Most header fields an HTTP request may have; more is 431."""
RETRY_AFTER_S: Final = "2"
"""The ``Retry-After`` (seconds) of every retryable refusal, HTTP's and the connections'."""
JUDGED_AFTER_S: Final = 1.0
"""A body is judged slow only once it has been arriving this long: fast requests that
happen to start together never evict one another."""


class Busy(AdmissionError):
    """Not admitted now: the bytes in flight are at the cap (503 Retry-After)."""


class InFlight:
    """The bytes requests hold across all receivers, and who to evict; thread-safe."""

    def __init__(self, max_bytes: int = MAX_INFLIGHT_BYTES) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self.refused = 0
        """Requests refused (503) because the bytes did not fit."""
        self.evicted = 0
        """Slow bodies evicted to make room for a faster request."""
        self._receiving: set[Hold] = set()
        self._lock = threading.Lock()

    def hold(self, size: int = 0, *, evict: Callable[[], object] | None = None) -> Hold:
        """A hold of ``size`` bytes (use it as a context manager: released on exit).

        ``evict``: the request's body is still arriving, and this is how to end it (answer it
        503 and disconnect; any thread may call it) when a faster request needs its bytes;
        ``Hold.received`` says the body is complete. Without it the hold is never evicted.

        Raises:
            Busy: ``size`` does not fit, even after evicting slower bodies.
        """
        held = Hold(self, evict)
        if evict is not None:
            with self._lock:
                self._receiving.add(held)
        try:
            held.grow(size)
        except Busy:
            held.release()
            raise
        return held

    def _take(self, hold: Hold, size: int) -> None:
        victims: list[Hold] = []
        try:
            with self._lock:
                if hold.evicted:
                    raise Busy("evicted: a faster request needed the bytes this slow body "
                               "held")
                while self.used > hold.size and self.used + size > self.max_bytes:
                    victim = self._slowest_other(hold, size)
                    if victim is None:
                        self.refused += 1
                        raise Busy(f"{self.used} bytes of requests in flight, the limit is "
                                   f"{self.max_bytes}")
                    self._receiving.discard(victim)
                    self.used -= victim.size
                    victim.size, victim.evicted = 0, True
                    self.evicted += 1
                    victims.append(victim)
                self.used += size
                hold.size += size
                if hold.receiving:
                    hold.arrived += size
        finally:
            for victim in victims:
                if victim.evict is not None:
                    victim.evict()

    def _slowest_other(self, hold: Hold, size: int) -> Hold | None:
        """The body arriving slowest, if it is slower than ``hold`` with the ``size`` bytes
        it asks for (a request that is not arriving, such as a gRPC message or a body being
        decoded, is faster than any)."""
        now = time.monotonic()
        limit = (hold.rate(now, size) if hold in self._receiving else float("inf"))
        slowest, rate = None, limit
        for other in self._receiving:
            if (other is not hold and other.size and now - other.started >= JUDGED_AFTER_S
                    and (r := other.rate(now)) < rate):
                slowest, rate = other, r
        return slowest

    def _received(self, hold: Hold) -> None:
        with self._lock:
            self._receiving.discard(hold)
            hold.receiving = False

    def _shrink(self, hold: Hold, size: int) -> None:
        with self._lock:
            size = min(size, hold.size)
            self.used -= size
            hold.size -= size

    def _release(self, hold: Hold) -> None:
        with self._lock:
            self._receiving.discard(hold)
            self.used -= hold.size
            hold.size = 0


class Hold:
    """The bytes one request holds; ``grow`` as its body arrives or once it is decoded."""

    def __init__(self, owner: InFlight, evict: Callable[[], object] | None) -> None:
        self.owner = owner
        self.evict = evict
        self.size = 0
        self.arrived = 0
        self.started = time.monotonic()
        self.receiving = evict is not None
        self.evicted = False
        self.kept = False

    def grow(self, size: int) -> None:
        """Hold ``size`` more bytes; ``Busy`` when they do not fit, or this hold was evicted."""
        if size > 0 or self.evicted:
            self.owner._take(self, max(size, 0))

    def resize(self, size: int) -> None:
        """Hold exactly ``size`` bytes: more (``Busy`` when they do not fit) or fewer."""
        if size >= self.size:
            self.grow(size - self.size)
        else:
            self.owner._shrink(self, self.size - size)

    def received(self) -> None:
        """The body is complete: from now on this hold is never evicted."""
        if self.receiving:
            self.owner._received(self)

    def rate(self, now: float, more: int = 0) -> float:
        """Bytes per second since the request's headers (how fast its body arrives), with
        ``more`` bytes that have just arrived."""
        return (self.arrived + more) / max(now - self.started, 1e-3)

    def release(self) -> None:
        """Give the bytes back (idempotent)."""
        self.owner._release(self)

    def keep(self) -> Callable[[], None]:
        """Keep the bytes past the ``with`` block, for a request answered before the pipeline
        is done with its spans (its acknowledgement timed out): they are still in memory, and
        a retry must not be admitted beside them. Returns what releases them."""
        self.kept = True
        return self.release

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.kept:
            self.release()


PARSE_FACTOR: Final = 4
"""Parsing a body takes up to this many times its bytes before a span can be counted: the
protobuf message of minimal spans is 4.2 times their wire size (content spans far less:
their strings point into the body), OTLP JSON as Python objects 2.5 to 3 times its text."""
PARSED_SPAN_BYTES: Final = 200
"""What a parsed span takes while its record is built (the protobuf message of a span)."""


def charge_parsing(hold: Hold, data: int) -> None:
    """Before parsing a body of ``data`` bytes: hold what parsing it may take (``Busy``)."""
    hold.grow(PARSE_FACTOR * data)


def charge_counted(hold: Hold, spans: int, data: int) -> None:
    """Once the body is parsed and its ``spans`` counted, before their records are built:
    hold what the body, the parsed message and the records will take together
    (``charge_decoded``)."""
    charge_decoded(hold, estimate_decoded(spans, data) + spans * PARSED_SPAN_BYTES + data)


def estimate_decoded(spans: int, data: int, attributes: int | None = None) -> int:
    """About what the records of ``spans`` spans decoded from ``data`` bytes (protobuf or
    JSON, uncompressed) take in memory: a fixed cost per span (the record, its ids, dicts
    and events), one per attribute (its key, value and dict entry; ``attributes`` counts
    them, the resource's too, as each record holds its own copy; before the records exist,
    two per span), and the text, about 1.1 times its bytes on the wire. Measured with
    ``tracemalloc``: minimal spans take 482 bytes each (estimated 556), the benchmark's tool
    spans 1,485 (1,617), the tests' short tool spans 1,387 (1,511), spans with 1 kB of text
    2,492 (2,779): it errs high by a little (tests/collector/test_chaos_memory.py). Cheap:
    counting span by span (``decoded_size``) costs a fifth of the decoding."""
    if attributes is None:
        attributes = 2 * spans
    return spans * _SPAN_RECORD_BYTES + attributes * _VALUE_BYTES + data * 11 // 10


def attribute_count(spans: Sequence[SpanRecord]) -> int:
    """The attributes ``estimate_decoded`` counts: each record's own and its resource's."""
    return sum(len(span.attributes) + len(span.resource) for span in spans)


def charge_decoded(hold: Hold, size: int, *, shrink: bool = True) -> None:
    """Make ``hold`` ``size`` bytes, what a request's decoded spans take. A request that
    alone takes more than the whole budget is held all the same when nothing else is in
    flight (``InFlight``): under the request size limit, no request is too large for the
    budget, it only waits its turn.

    Raises:
        Busy: it does not fit now (503); for a request over the whole budget, the message
            says it is admitted alone.
    """
    try:
        if shrink:
            hold.resize(size)
        else:
            hold.grow(size - hold.size)
    except Busy:
        budget = hold.owner.max_bytes
        if size <= budget:
            raise
        raise Busy(f"this request takes about {size // 2**20} MiB once decoded, more than the "
                   f"{budget // 2**20} MiB the collector holds at once (--max-inflight-bytes): "
                   "it is admitted when no other request is in flight") from None


def decoded_size(spans: Sequence[SpanRecord]) -> int:
    """What decoded span records take in memory, in bytes, counted span by span: a fixed
    cost per span (the record, its ids, dicts and events) and per attribute, plus their
    text; within a few percent of ``tracemalloc``'s count. Too slow for every request (a
    fifth of the decoding): the receivers charge ``estimate_decoded``; this checks it."""
    total = 0
    for span in spans:
        total += _SPAN_RECORD_BYTES + len(span.name) + 2 * len(span.status_message)
        total += _attributes_bytes(span.attributes) + _attributes_bytes(span.resource)
        for event in span.events:
            total += _EVENT_BYTES + len(event.name) + _attributes_bytes(event.attributes)
    return total


_SPAN_RECORD_BYTES: Final = 500
_EVENT_BYTES: Final = 250
_VALUE_BYTES: Final = 150


def _attributes_bytes(attributes: dict[str, Any]) -> int:
    total = 0
    for key, value in attributes.items():
        total += _VALUE_BYTES + len(key)
        if isinstance(value, str | bytes):
            total += len(value)
        elif isinstance(value, dict):
            total += _attributes_bytes(value)
        elif isinstance(value, list):
            total += sum(_VALUE_BYTES + (len(v) if isinstance(v, str | bytes) else 0)
                         for v in value)
    return total
