"""An overloaded collector answers 503 with Retry-After, and recovers once it drains."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from pathlib import Path

from otlp_requests import episode_request

from loopscope_collector.pipeline.thread import Pipeline
from loopscope_collector.reads import read
from loopscope_collector.serve.http_server import CollectorHTTPServer
from loopscope_collector.storage import open_database


def _post(url: str, body: bytes) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url + "/v1/traces", data=body, method="POST",
                                     headers={"Content-Type": "application/x-protobuf"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def test_full_queue_gives_503_with_retry_after_then_recovers(tmp_path: Path) -> None:
    """With the pipeline not yet draining and its queue holding spans, a new request is refused
    with 503 and a Retry-After of 1-5 s (clients retry 503); once the pipeline runs, the
    queued request is acknowledged and a retry succeeds."""
    db = open_database(tmp_path / "x.duckdb")
    pipeline = Pipeline(db, max_queue_spans=10)  # not started yet: nothing drains
    server = CollectorHTTPServer(("127.0.0.1", 0), pipeline=pipeline, db=db)
    server.serve_in_thread()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        first, _ = episode_request(8)
        answers: list[int] = []
        waiting = threading.Thread(target=lambda: answers.append(
            _post(url, first.SerializeToString())[0]))
        waiting.start()
        while pipeline.stats.queue_spans < 8:  # the first request is queued, unacknowledged
            waiting.join(0.01)
        second, _ = episode_request(5)
        status, headers = _post(url, second.SerializeToString())
        assert status == 503
        assert 1 <= int(headers["Retry-After"]) <= 5
        assert pipeline.stats.requests_overloaded == 1

        pipeline.start()
        waiting.join(30)
        assert answers == [200]
        assert _post(url, second.SerializeToString())[0] == 200
        assert read(db, "summary")[0]["tool_calls"] == 13
    finally:
        server.shutdown()
        server.server_close()
        pipeline.stop()
        db.close()
