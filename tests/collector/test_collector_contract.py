"""The collector's HTTP contract at its edges: typed read parameters, required ones, methods,
labels that cannot be read, and a span id sent again with other content."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from collector_process import CollectorProcess, start_collector
from otlp_requests import request, tool_span

pytestmark = pytest.mark.timeout(120)

START = 1_700_000_000_000_000_000


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    proc = start_collector(tmp_path_factory.mktemp("contract") / "store.duckdb", grpc=False)
    yield proc
    proc.stop()


def _call(collector: CollectorProcess, method: str, path: str,
          body: bytes | None = None) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(collector.url + path, data=body, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def _episode(collector: CollectorProcess, episode_id: str) -> None:
    span = tool_span(os.urandom(16), os.urandom(8), tool="search", args="{}", result="r",
                     start_ns=START)
    span.attributes.add(key="loopscope.episode.id").value.string_value = episode_id
    assert collector.post(request([span]).SerializeToString())[0] == 200


def test_read_parameters_take_their_declared_type(collector: CollectorProcess) -> None:
    """``episode_id=007`` is the text '007' (not 7); a number-looking id of another episode
    is text too; ``limit=abc`` is a 400 naming the parameter and its type."""
    _episode(collector, "007")
    _episode(collector, "7")
    assert [r["episode_id"] for r in collector.read("episode", episode_id="007")] == ["007"]
    assert collector.read("episode", episode_id="12345") == []
    status, _, answer = _call(collector, "GET", "/v1/reads/episodes?limit=abc")
    assert status == 400
    assert "parameter limit of read 'episodes' must be an integer, not 'abc'" in answer
    assert len(collector.read("episodes", limit=1)) == 1
    # a Spans filter goes as the conditions it compiles to, checked before the read runs
    where = '[{"field":"loopscope.episode.id","op":"==","text":"007","number":null}]'
    assert [r["episode_id"] for r in collector.read("span_list", where=quote(where))] == ["007"]
    unsafe = json.dumps([{"field": "a') or 1=1 --", "op": "exists"}])  # never reaches SQL
    status, _, answer = _call(collector, "GET", "/v1/reads/span_list?where=" + quote(unsafe))
    assert status == 400
    error = json.loads(answer)["error"]
    assert error.startswith("parameter where of read 'span_list' must be a span filter's "
                            "conditions")
    assert error.endswith("condition 1: \"a') or 1=1 --\" is not a field")


def test_a_missing_required_parameter_is_a_400(collector: CollectorProcess) -> None:
    status, _, answer = _call(collector, "GET", "/v1/reads/episode_tool_calls")
    assert status == 400 and "requires episode_id" in answer
    listing = collector.get("/v1/reads")["reads"]["episode"]
    assert listing["required"] == ["episode_id"] and listing["types"] == {
        "episode_id": "varchar", "stale_s": "bigint"}  # stale_s: optional


def test_wrong_methods_get_405_with_allow(collector: CollectorProcess) -> None:
    status, headers, _ = _call(collector, "GET", "/v1/traces")
    assert status == 405 and headers["Allow"] == "POST"
    status, headers, _ = _call(collector, "POST", "/healthz", b"{}")
    assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_a_label_nested_too_deeply_is_a_400_not_a_dropped_connection(
    collector: CollectorProcess,
) -> None:
    body = b'{"episode_id": "e", "label": "no_loop", "note": ' + b"[" * 30_000 + b"]" * 30_000
    status, _, answer = _call(collector, "POST", "/v1/labels", body + b"}")
    assert status == 400 and "nested too deeply" in answer


def test_a_span_id_sent_again_with_other_content_is_counted_and_logged(tmp_path: Path) -> None:
    """The first version is kept (ingest is idempotent by trace and span id), the conflict is
    counted on /metrics and logged; an identical resend is a plain duplicate."""
    collector = start_collector(tmp_path / "store.duckdb", grpc=False)
    try:
        trace, span_id = os.urandom(16), os.urandom(8)
        first = request([tool_span(trace, span_id, tool="search", args="{}", result="one",
                                   start_ns=START)]).SerializeToString()
        other = request([tool_span(trace, span_id, tool="search", args="{}", result="two",
                                   start_ns=START)]).SerializeToString()
        for body in (first, first, other):
            assert collector.post(body)[0] == 200
        metrics = collector.get("/metrics")
        assert "loopscope_spans_conflicting_total 1" in metrics
        assert "loopscope_spans_duplicate_total 2" in metrics
    finally:
        log = collector.stop()
    assert "sent again with different content" in log and span_id.hex() in log
