"""The Spans filter: its grammar (``reads.span_filter``), and the reads that evaluate it
(``span_list``, ``span_latency``, ``span_detail``) over a store the collector's pipeline
filled, each answer held to the same filter evaluated by hand over the spans sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from otlp_requests import _kv, request, tool_span

from loopscope_collector.pipeline.thread import Pipeline
from loopscope_collector.reads import read
from loopscope_collector.reads.params import BadValue, Param
from loopscope_collector.reads.span_filter import (
    Condition,
    SpanFilterError,
    checked,
    compile_filter,
    parse_filter,
)
from loopscope_collector.receive.decode import decode_request
from loopscope_collector.storage import Database, open_database

T0 = 1_700_000_000_000_000_000
TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")


def test_a_filter_parses_into_conditions() -> None:
    assert parse_filter('gen_ai.tool.name == "search" and duration > 200ms') == [
        Condition("gen_ai.tool.name", "==", text="search"),
        Condition("duration", ">", number=200.0)]
    assert parse_filter("loopscope.tool.signature = 'fa03' AND duration <= 1.5s") == [
        Condition("loopscope.tool.signature", "==", text="fa03"),
        Condition("duration", "<=", number=1500.0)]
    assert parse_filter('gen_ai.tool.call.result and loopscope.flags contains "exact"') == [
        Condition("gen_ai.tool.call.result", "exists"),
        Condition("loopscope.flags", "contains", text="exact")]
    assert parse_filter('status != "error" and x.y >= -2.5e1 and ok == true') == [
        Condition("status", "!=", text="error"), Condition("x.y", ">=", number=-25.0),
        Condition("ok", "==", text="true")]
    assert parse_filter(r'name == "say \"hi\""') == [Condition("name", "==", text='say "hi"')]
    assert parse_filter("   ") == [] and compile_filter("") is None


@pytest.mark.parametrize(("text", "message"), [
    ('gen_ai.tool.name == search', 'expected a value, found \'search\' (text goes in quotes: '
                                   '"search") (at character 21)'),
    ('a == "x" or b == "y"', "expected `and` before 'or': only `and` joins conditions "
                             "(at character 10)"),
    ("duration > 200 ms", "expected `and` before 'ms': write the unit next to the number "
                          "(200ms) (at character 16)"),
    ('x > "a"', "> compares numbers, and 'a' is text (at character 5)"),
    ('status == "broken"', "status is one of ok, error, unset, not 'broken' "
                           "(at character 11)"),
    ("a ==", "expected a value after == (at character 5)"),
    ("a == 1 and", "expected a condition after `and` (at character 11)"),
    ("x # 3", "unexpected '#' (at character 3)"),
    ("x == 2s", "a unit (s) goes with duration, not x (at character 6)"),
    ("duration", "every span has duration: compare it (e.g. duration == …) (at character 1)"),
    ("name == 3", "name is text: put 3 in quotes (at character 9)"),
    ('a "b"', "expected an operator (==, !=, >=, <=, >, <, contains) or `and` after 'a', "
              "found '\"b\"' (at character 3)"),
])
def test_a_bad_filter_says_what_is_wrong_and_where(text: str, message: str) -> None:
    with pytest.raises(SpanFilterError) as raised:
        parse_filter(text)
    assert str(raised.value) == message


def test_the_read_api_takes_only_conditions_a_filter_compiles_to() -> None:
    """A client's ``$where`` is checked before any SQL sees it: a field that would break out
    of the JSON path, an unknown operator, a value of the wrong type are refused, named."""
    where = Param.declared("where", "varchar", "span filter")
    good = compile_filter('gen_ai.tool.name == "search" and duration > 2')
    assert good is not None and where.convert(good) == good
    for bad, detail in [
        ("not json", "this is not JSON"),
        ('{"field": "a"}', "this is not a list of conditions"),
        ('[{"field": "a\\"]", "op": "exists"}]', "condition 1: 'a\"]' is not a field"),
        ('[{"field": "a", "op": "like", "text": "x"}]', "condition 1: 'like' is not an operator"),
        ('[{"field": "a", "op": ">", "text": "x"}]',
         "condition 1: > compares numbers, and 'x' is text"),
        ('[{"field": "a", "op": "==", "text": "x", "sql": "drop"}]',
         "condition 1 is not an object of field, op, text and number"),
        ('[{"field": "a", "op": "==", "number": true}]',
         "condition 1: number must be a finite number"),
    ]:
        with pytest.raises(BadValue) as raised:
            where.convert(bad)
        assert raised.value.detail == detail, bad
    assert checked(json.dumps([{"field": "a", "op": "exists"}])) == (
        '[{"field":"a","op":"exists","text":null,"number":null}]')


def _span(span_id: int, name: str, *, ms: float, attributes: dict[str, Any],
          error: bool = False) -> Span:
    start = T0 + span_id * 10**9
    return Span(trace_id=TRACE, span_id=span_id.to_bytes(8, "big"), name=name,
                kind=Span.SPAN_KIND_CLIENT, start_time_unix_nano=start,
                end_time_unix_nano=start + int(ms * 1e6),
                status=Status(code=Status.STATUS_CODE_ERROR if error else
                              Status.STATUS_CODE_UNSET, message="boom" if error else ""),
                attributes=[_kv(k, v) for k, v in attributes.items()],
                events=[Span.Event(time_unix_nano=start + 5, name="retry",
                                   attributes=[_kv("attempt", 2)])] if error else [])


SENT: list[tuple[int, str, float, dict[str, Any], bool]] = [
    (1, "invoke_agent bot", 900.0, {"gen_ai.operation.name": "invoke_agent",
                                    "loopscope.episode.id": "run-1"}, False),
    (2, "chat gpt-4o", 450.0, {"gen_ai.operation.name": "chat",
                               "gen_ai.usage.input_tokens": 812}, False),
    (3, "execute_tool search", 120.0, {"gen_ai.operation.name": "execute_tool",
                                       "gen_ai.tool.name": "search",
                                       "loopscope.tool.signature": "aaaa",
                                       "loopscope.episode.id": "run-1"}, False),
    (4, "execute_tool search", 250.0, {"gen_ai.operation.name": "execute_tool",
                                       "gen_ai.tool.name": "search",
                                       "loopscope.tool.signature": "aaaa",
                                       "loopscope.episode.id": "run-1"}, False),
    (5, "execute_tool fetch", 30.0, {"gen_ai.operation.name": "execute_tool",
                                     "gen_ai.tool.name": "fetch",
                                     "loopscope.tool.signature": "bbbb",
                                     "loopscope.episode.id": "run-1"}, True),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    """SENT, and one span of another service, through the collector's own pipeline."""
    spans = [_span(i, name, ms=ms, attributes=a, error=e) for i, name, ms, a, e in SENT]
    other = tool_span(bytes(16 * [7]), bytes(8 * [7]), tool="search", args="{}", result="r",
                      start_ns=T0)
    body = request(spans, service="svc").SerializeToString()
    body_other = request([other], service="elsewhere").SerializeToString()
    db = open_database(tmp_path_factory.mktemp("spans") / "spans.duckdb")
    pipeline = Pipeline(db).start()
    try:
        for raw in (body, body_other):
            records = decode_request(raw, content_type="application/x-protobuf",
                                     content_encoding=None, max_bytes=len(raw) + 1)
            pipeline.submit(records).wait(60)
    finally:
        pipeline.stop(60)
    yield db
    db.close()


def _listed(db: Database, text: str, **params: Any) -> list[int]:
    rows = read(db, "span_list", {"where": compile_filter(text), "service": "svc", **params})
    assert all(r["total"] == len(rows) for r in rows)
    return sorted(int(r["span_id"], 16) for r in rows)


@pytest.mark.parametrize(("text", "holds"), [
    ("", lambda i, ms, a, e: True),
    ('gen_ai.tool.name == "search"', lambda i, ms, a, e: a.get("gen_ai.tool.name") == "search"),
    ('loopscope.tool.signature == "aaaa" and duration > 200ms',
     lambda i, ms, a, e: a.get("loopscope.tool.signature") == "aaaa" and ms > 200),
    ("duration >= 0.45s", lambda i, ms, a, e: ms >= 450),
    ("gen_ai.usage.input_tokens > 800", lambda i, ms, a, e: a.get(
        "gen_ai.usage.input_tokens", 0) > 800),
    ('gen_ai.tool.name != "search"', lambda i, ms, a, e: a.get("gen_ai.tool.name") != "search"),
    ("loopscope.tool.signature", lambda i, ms, a, e: "loopscope.tool.signature" in a),
    ('status == "error"', lambda i, ms, a, e: e),
    ('tool == "fetch" and kind == "client"', lambda i, ms, a, e: a.get(
        "gen_ai.tool.name") == "fetch"),
    ('name contains "tool" and duration < 100', lambda i, ms, a, e: i == 5),
])
def test_span_list_holds_exactly_the_spans_the_filter_describes(
        store: Database, text: str, holds: Any) -> None:
    assert _listed(store, text) == [i for i, _, ms, a, e in SENT if holds(i, ms, a, e)]


def test_span_list_counts_every_match_and_shows_the_newest_from_the_offset(
        store: Database) -> None:
    """More matches than shown: ``total`` counts them all, the rows are the newest from the
    offset, each with its attributes, events and tool call (fetched for the shown rows)."""
    rows = read(store, "span_list", {"service": "svc", "limit": 2, "offset": 1, "where":
                                     compile_filter('gen_ai.operation.name == "execute_tool"')})
    assert [(int(r["span_id"], 16), r["total"]) for r in rows] == [(4, 3), (3, 3)]
    assert [(r["tool"], r["episode_id"], r["events"]) for r in rows] == [("search", "run-1", 0)] * 2
    assert json.loads(rows[0]["attributes"])["loopscope.tool.signature"] == "aaaa"
    # the sidebar's tool, then a condition on the tool, each over both services
    [newest] = read(store, "span_list", {"tool": "search", "limit": 1})
    assert (int(newest["span_id"], 16), newest["total"], newest["duration_ms"]) == (4, 3, 250.0)
    [error] = read(store, "span_list", {"where": compile_filter('tool != "search"'), "limit": 1})
    assert (int(error["span_id"], 16), error["total"], error["events"], error["status"]) == (
        5, 3, 1, "error")


def test_span_latency_gives_percentiles_per_tool_and_over_every_span(store: Database) -> None:
    rows = read(store, "span_latency", {"service": "svc"})
    every = next(r for r in rows if r["every_span"])
    assert every["spans"] == 5 and every["max_ms"] == pytest.approx(900.0)
    assert every["p50_ms"] == pytest.approx(250.0)  # 30, 120, 250, 450, 900
    search = next(r for r in rows if r["tool"] == "search")
    assert search["spans"] == 2 and search["p50_ms"] == pytest.approx(185.0)
    assert search["p90_ms"] == pytest.approx(120 + 0.9 * 130)
    assert search["p99_ms"] == pytest.approx(120 + 0.99 * 130)
    narrowed = read(store, "span_latency", {"service": "svc",
                                           "where": compile_filter('tool == "fetch"')})
    assert [(r["tool"], r["spans"]) for r in narrowed] == [(None, 1), ("fetch", 1)]


def test_span_detail_gives_the_span_as_stored(store: Database) -> None:
    [row] = read(store, "span_detail", {"span_id": (5).to_bytes(8, "big").hex(),
                                        "trace_id": TRACE.hex()})
    assert (row["name"], row["status"], row["status_message"], row["kind"]) == (
        "execute_tool fetch", "error", "boom", "client")
    assert json.loads(row["attributes"])["loopscope.tool.signature"] == "bbbb"
    assert json.loads(row["events"]) == [{"name": "retry", "time_ns": T0 + 5 * 10**9 + 5,
                                          "attributes": {"attempt": 2}}]
    assert (row["episode_id"], row["tool"], row["call_ordinal"]) == ("run-1", "fetch", None)
    assert row["duration_ms"] == pytest.approx(30.0)
    assert read(store, "span_detail", {"span_id": "0" * 16}) == []
