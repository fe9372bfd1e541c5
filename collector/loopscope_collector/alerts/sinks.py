"""Where alerts go: the log, webhooks (Slack-compatible JSON), or several sinks at once.

``AlertManager`` (``manager``) decides when a service's no-progress spike fires or resolves;
this module delivers the alert once it has. Kept apart from ``manager`` because delivery
(threads, queues, HTTP) is a concept of its own, separate from the pure spike detection.
``send`` runs on the pipeline thread, so every sink returns quickly and never raises.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .alert import Alert

logger = logging.getLogger("loopscope_collector.alerts")
"""The alerts module's logger, as before the sinks moved here: log filters keep working."""


class AlertSink(Protocol):
    """Somewhere an alert goes.

    ``send`` runs on the pipeline thread: return quickly, and never raise.
    """

    def send(self, alert: Alert) -> None:
        """Deliver ``alert`` (firing or resolved)."""


def destinations(sink: object) -> list[str]:
    """Where ``sink`` delivers, as the Alerts page names it: ``log``, ``webhook HOST`` (never
    the URL's path or query, which often hold a token); a ``FanOutSink``'s, in order."""
    inner = getattr(sink, "sinks", None)
    if inner is not None:
        return [name for child in inner for name in destinations(child)]
    name = getattr(sink, "destination", None)
    return [name] if isinstance(name, str) else [type(sink).__name__]


class LogSink:
    """Logs each alert at WARNING on the ``loopscope_collector.alerts`` logger."""

    destination = "log"

    def send(self, alert: Alert) -> None:
        """Log ``alert``; called on the pipeline thread."""
        logger.warning("loopscope alert %s [%s]: %s%s", alert.id, alert.state, alert.message,
                       f" (because {alert.resolved_because})" if alert.resolved_because else "")


class WebhookSink:
    """POSTs each alert as JSON with a Slack-compatible ``text`` and the fields under ``alert``.

    Posting happens on a background thread fed by a bounded queue, so a slow or dead endpoint
    never holds up the pipeline; an alert that finds the queue full is dropped and counted.
    """

    def __init__(self, url: str, *, timeout_s: float = 3.0, max_queue: int = 100) -> None:
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        if scheme not in ("http", "https") or not url.split("://", 1)[1].strip("/"):
            raise ValueError(f"webhook must be an http:// or https:// URL, not {url!r}")
        self.url = url
        self.destination = f"webhook {urllib.parse.urlsplit(url).hostname or url}"
        self.timeout_s = timeout_s
        self.sent = 0
        self.failures = 0
        self._queue: queue.Queue[Alert | None] = queue.Queue(max_queue)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def send(self, alert: Alert) -> None:
        """Queue ``alert`` for posting; called on the pipeline thread, returns at once.

        A full queue drops the alert, logs it and counts it in ``failures``; never raises.
        """
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, daemon=True,
                                                name="loopscope-webhook")
                self._thread.start()
        try:
            self._queue.put_nowait(alert)
        except queue.Full:
            self.failures += 1
            logger.warning("webhook %s is behind; alert %s dropped", self.url, alert.id)

    def close(self, timeout: float = 5.0) -> None:
        """Post what is queued (for up to ``timeout`` seconds), then stop the worker."""
        if self._thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _work(self) -> None:
        while (alert := self._queue.get()) is not None:
            try:
                self._post(alert)
                self.sent += 1
            except Exception as exc:
                self.failures += 1
                logger.warning("webhook %s failed for alert %s: %s", self.url, alert.id, exc)

    def _post(self, alert: Alert) -> None:
        body = json.dumps({"text": slack_text(alert), "alert": alert.to_json()}).encode()
        request = urllib.request.Request(self.url, data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            response.read()


def slack_text(alert: Alert) -> str:
    """A one-paragraph summary that reads well in Slack (mrkdwn) and anywhere else."""
    head = ":rotating_light: *FIRING*" if alert.state == "firing" else ":white_check_mark: *RESOLVED*"
    because = f" because {alert.resolved_because}" if alert.resolved_because else ""
    return f"{head} loopscope `{alert.service}`: {alert.message}{because} (alert {alert.id})"


@dataclass(frozen=True)
class FanOutSink:
    """Sends each alert to every sink; one broken sink cannot silence the others."""

    sinks: tuple[AlertSink, ...]

    def send(self, alert: Alert) -> None:
        """Send ``alert`` to each sink in turn, logging (not raising) a sink's failure."""
        for sink in self.sinks:
            try:
                sink.send(alert)
            except Exception:
                logger.exception("alert sink %s failed; the other sinks still ran",
                                 type(sink).__name__)

    def close(self) -> None:
        """Close the sinks that have a ``close``."""
        for sink in self.sinks:
            close = getattr(sink, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    logger.exception("alert sink %s failed to close", type(sink).__name__)



def build_sink(webhooks: Iterable[str], *, log: bool = True) -> FanOutSink:
    """The collector's sinks: the log (unless ``log`` is False) and one ``WebhookSink`` per
    URL. Raises ``ValueError`` for a URL that is not http(s)."""
    sinks: list[AlertSink] = [LogSink()] if log else []
    sinks += [WebhookSink(url) for url in webhooks]
    return FanOutSink(tuple(sinks))
