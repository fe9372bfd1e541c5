"""The decode-and-drop ceiling: the collector's own HTTP server and decoder, storing nothing.

Same server class, same request handling, same ``decode_request``; the pipeline is replaced by
one that acknowledges at once. Whatever the real collector achieves is measured against this.
Usage: python benchmarks/_drop_receiver.py PORT
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from loopscope_collector.pipeline.jobs import AnswerTimes, Job, Stats
from loopscope_collector.serve.http_server import CollectorHTTPServer
from loopscope_collector.storage import open_database
from loopscope_collector.storage.health import StoreHealth


class DropPipeline:
    """Counts spans and acknowledges immediately."""

    def __init__(self) -> None:
        self.stats = Stats()
        self.health = StoreHealth()
        self.answer_times = AnswerTimes()
        self._lock = threading.Lock()

    def count_rejected(self, status: int) -> None:
        with self._lock:
            self.stats.requests_rejected[str(status)] += 1

    def refuse(self, status: int, receiver: str, reason: str, spans: int = 0) -> None:
        with self._lock:
            self.stats.requests_rejected[str(status)] += 1
            self.stats.spans_rejected += spans

    def admit(self, count: int) -> None:
        """Room for every request (nothing is queued)."""

    def slow(self) -> None:
        """Never keeps a client waiting (``/healthz``)."""

    def submit(self, spans: list[Any]) -> Job:
        with self._lock:
            self.stats.spans_received += len(spans)
        job = Job(spans)
        job.finish()
        return job


if __name__ == "__main__":
    pipeline = DropPipeline()
    server = CollectorHTTPServer(
        ("127.0.0.1", int(sys.argv[1])), pipeline=pipeline,  # type: ignore[arg-type]
        db=open_database(":memory:"),
        prometheus=lambda: f"loopscope_spans_received_total {pipeline.stats.spans_received}\n",
    )
    server.serve_in_thread().join()  # with its connection watch, as the collector serves
