"""The collector's log of refused requests, rate-limited.

A request refused for its content (a 4xx: malformed, too large, a value the store cannot
hold) is logged as one WARNING that says which receiver refused it, how many spans it held
and why, the why naming the field path (``resourceSpans[0].scopeSpans[0].spans[2].kind: 200
is out of range (-128 to 127)``). A client that sends bad data keeps sending it, so the log is
rate-limited: a refusal is logged at once when none was logged in the last ``interval_s``
(60 s); the ones after it are counted, and at the end of that interval one summary line gives
their number, their spans and the latest one's reason, and starts the next interval. A flood of
bad requests thus costs one line a minute. The counters on ``/metrics``
(``loopscope_requests_rejected_total``, ``loopscope_spans_rejected_total``) count every one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

INTERVAL_S: Final = 60.0


def _timer(delay: float, call: Callable[[], None]) -> None:
    timer = threading.Timer(delay, call)
    timer.daemon = True
    timer.name = "loopscope-refusal-log"
    timer.start()


class RefusalLog:
    """Logs refusals to ``logger``: the first at once, the rest as one summary per interval.

    ``clock`` and ``schedule`` (call a function after a delay, on a timer thread by default)
    are for tests. Thread-safe: every receiver thread calls ``refused``.
    """

    def __init__(self, logger: logging.Logger, interval_s: float = INTERVAL_S, *,
                 clock: Callable[[], float] = time.monotonic,
                 schedule: Callable[[float, Callable[[], None]], None] = _timer,
                 verb: str = "refused", items: str = "request(s)") -> None:
        """``verb`` and ``items`` word the lines: the same limit serves other events that a
        client causes over and over (an episode routed to two collectors: ``thread``)."""
        self.logger = logger
        self.verb = verb
        self.items = items
        self.interval_s = interval_s
        self._clock = clock
        self._schedule = schedule
        self._lock = threading.Lock()
        self._quiet_until = float("-inf")
        self._held_requests = 0
        self._held_spans = 0
        self._latest = ""
        self._summary_due = False

    def refused(self, what: str, spans: int = 0) -> None:
        """A request of ``spans`` spans was refused; ``what`` says by whom and why."""
        with self._lock:
            now = self._clock()
            if now >= self._quiet_until:
                self._quiet_until = now + self.interval_s
                log_now = True
            else:
                log_now = False
                self._held_requests += 1
                self._held_spans += spans
                self._latest = what
                if not self._summary_due:
                    self._summary_due = True
                    self._schedule(self._quiet_until - now, self.summarise)
        if log_now:
            self.logger.warning("loopscope collector: %s %s", self.verb, what)

    def summarise(self) -> None:
        """Log the refusals held since the last line, if any (the timer calls this at the end
        of the interval; the pipeline calls it when the collector stops)."""
        with self._lock:
            self._summary_due = False
            requests, spans, latest = self._held_requests, self._held_spans, self._latest
            self._held_requests = self._held_spans = 0
            if requests:
                self._quiet_until = self._clock() + self.interval_s
        if requests:
            self.logger.warning(
                "loopscope collector: %s %d more %s (%d span(s)) since the line before, not "
                "logged one by one (one line per %.0f s at most); the latest: %s",
                self.verb, requests, self.items, spans, self.interval_s, latest)
