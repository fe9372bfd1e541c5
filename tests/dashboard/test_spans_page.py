"""The Spans page and the span inspector on the demo's store: a filter over any attribute,
a bad filter's error, chosen columns, latency percentiles, and a span's attributes, input,
output, events and ids; every view opened from its URL. Expectations come from the SDK spans
the store was built from (``demo_sdk_spans``), not from the store itself."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from app_pages import APP, episode_page
from streamlit.testing.v1 import AppTest

from loopscope_dashboard import inspector

pytestmark = pytest.mark.timeout(180)


def _spans_page(store: Path, monkeypatch: pytest.MonkeyPatch, **params: str) -> AppTest:
    """The Spans page reading ``store``, opened from a URL with ``params``."""
    monkeypatch.setenv("LOOPSCOPE_DB_SNAPSHOT", str(store))
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page("views/spans.py").run()
    assert not at.exception, at.exception
    return at


def _cards(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _busiest_signature(spans: list[Any]) -> tuple[str, int]:
    counted = Counter(s.attributes.get("loopscope.tool.signature") for s in spans)
    counted.pop(None, None)
    return counted.most_common(1)[0]


def test_a_filter_over_an_attribute_lists_exactly_its_spans_and_a_bad_one_is_named(
        demo_store_path: Path, demo_sdk_spans: list[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    signature, calls = _busiest_signature(demo_sdk_spans)
    at = _spans_page(demo_store_path, monkeypatch)
    assert _cards(at)["Spans matching"] == f"{len(demo_sdk_spans):,}"
    assert len(at.dataframe[0].value) == 200  # the newest 200, said so
    assert "The newest 200 of" in at.caption[0].value

    at.text_input(key="where").set_value(f'loopscope.tool.signature == "{signature}"').run()
    assert not at.exception and not at.error
    assert _cards(at)["Spans matching"] == str(calls)
    shown = at.dataframe[0].value
    wanted = {s.context.span_id.to_bytes(8, "big").hex() for s in demo_sdk_spans
              if s.attributes.get("loopscope.tool.signature") == signature}
    assert set(shown["span_id"]) == wanted
    tool = shown["tool"].iloc[0]
    latency = next(d.value for d in at.dataframe if "p99_ms" in d.value.columns)
    assert latency[["tool", "spans"]].values.tolist() == [[tool, calls]]

    at.text_input(key="where").set_value(f'loopscope.tool.signature == {signature}').run()
    assert not at.exception
    [error] = at.error
    assert error.value.startswith("This filter does not parse: expected a value, found ")
    assert "(text goes in quotes:" in error.value and "(at character 29)" in error.value
    assert not at.dataframe  # no table from a filter that did not parse


def test_the_url_holds_the_filter_the_columns_and_the_span_inspected(
        demo_store_path: Path, demo_sdk_spans: list[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Opened from ``/spans?where=...&cols=...&span=...&trace=...``: the same filter, the
    chosen attribute as a column, and the inspector on that span: its ids to copy, its input
    and output, its attributes as a table and as JSON, its events."""
    flagged = next(s for s in demo_sdk_spans if s.events
                   and "gen_ai.tool.call.result" in s.attributes)
    span_id = flagged.context.span_id.to_bytes(8, "big").hex()
    trace_id = flagged.context.trace_id.to_bytes(16, "big").hex()
    tool = flagged.attributes["gen_ai.tool.name"]
    at = _spans_page(demo_store_path, monkeypatch, where=f'gen_ai.tool.name == "{tool}"',
                     cols="loopscope.tool.signature", span=span_id, trace=trace_id)
    assert at.text_input(key="where").value == f'gen_ai.tool.name == "{tool}"'
    table = at.dataframe[0]
    assert list(table.proto.column_order) == ["loopscope.tool.signature"]
    assert set(table.value["tool"]) == {tool}
    assert (table.value.set_index("span_id").loc[span_id, "loopscope.tool.signature"]
            == flagged.attributes["loopscope.tool.signature"])

    assert next(s.value for s in at.subheader) == f"Span: {flagged.name}"
    codes = [c.value for c in at.code]
    assert codes[:2] == [trace_id, span_id]  # st.code: each with a copy button
    assert json.loads(codes[3]) == json.loads(flagged.attributes["gen_ai.tool.call.arguments"])
    assert json.loads(codes[4]) == json.loads(flagged.attributes["gen_ai.tool.call.result"])
    attributes = next(d.value for d in at.dataframe if list(d.value.columns) == [
        "key", "value", "type"] and "gen_ai.tool.name" in set(d.value["key"]))
    assert dict(zip(attributes["key"], attributes["value"], strict=True)) == {
        k: v if isinstance(v, str) else json.dumps(list(v) if isinstance(v, tuple) else v)
        for k, v in flagged.attributes.items()}
    [raw] = at.json
    assert json.loads(raw.value)["attributes"]["gen_ai.tool.name"] == tool
    events = next(d.value for d in at.dataframe if "at_ms" in d.value.columns)
    assert list(events["name"]) == [e.name for e in flagged.events]
    explained = json.loads(events["attributes"].iloc[0])
    assert explained["gen_ai.evaluation.explanation"] == flagged.events[0].attributes[
        "gen_ai.evaluation.explanation"]


def test_the_episode_page_inspects_the_span_its_url_names(
        demo_store_path: Path, demo_sdk_spans: list[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = next(s for s in demo_sdk_spans if s.parent is None
                and "loopscope.task" in s.attributes)
    episode = root.attributes["loopscope.episode.id"]
    at = episode_page(demo_store_path, episode, monkeypatch)
    assert not [s for s in at.subheader if s.value.startswith("Span:")]  # none picked yet
    at.query_params["span"] = root.context.span_id.to_bytes(8, "big").hex()
    at.run()
    assert not at.exception
    assert f"Span: {root.name}" in [s.value for s in at.subheader]
    assert root.attributes["loopscope.task"] in [c.value for c in at.code]  # its input
    at.query_params["span"] = "0" * 16
    at.run()
    assert any("This store has no span '0000000000000000'" in w.value for w in at.warning)


def test_the_inspectors_pieces_read_stored_json() -> None:
    rows = inspector.attribute_rows({"b": [1, 2], "a": "x", "c": True, "d": 2.5})
    assert rows.values.tolist() == [["a", "x", "string"], ["b", "[1, 2]", "list"],
                                    ["c", "true", "bool"], ["d", "2.5", "double"]]
    events = inspector.event_rows([{"name": "late", "time_ns": 3_000_000},
                                   {"name": "early", "time_ns": 1_500_000}], 1_000_000)
    assert events[["at_ms", "name"]].values.tolist() == [[0.5, "early"], [2.0, "late"]]
    assert inspector.content({"input.value": '{"q": 1}'}, inspector.INPUTS) == (
        "input.value", '{\n  "q": 1\n}')
    assert inspector.content({"gen_ai.tool.call.result": "plain"}, inspector.OUTPUTS) == (
        "gen_ai.tool.call.result", "plain")
    assert inspector.content({"gen_ai.tool.call.arguments": ""}, inspector.INPUTS) is None
    assert isinstance(inspector.attribute_rows({}), pd.DataFrame)
