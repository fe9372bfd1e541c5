"""HttpSource against a real collector process: reads, metrics, sending runs, labels."""

from __future__ import annotations

import datetime
import json
import math
import time
import urllib.request
from pathlib import Path

import pytest
from collector_process import eventually, start_collector
from fixture_store import scenario_bodies
from streamlit.testing.v1 import AppTest

import loopscope_dashboard
from loopscope.offline.scenarios import generate
from loopscope_collector.metrics.compute import collect
from loopscope_collector.reads import READS
from loopscope_collector.reads.wire import ARROW_STREAM, prefers_arrow
from loopscope_dashboard.queries import FileSource, HttpSource, SourceError

pytestmark = pytest.mark.timeout(120)
APP = str(Path(loopscope_dashboard.__file__).parent / "app.py")


@pytest.fixture
def collector(tmp_path: Path):
    process = start_collector(tmp_path / "live.duckdb", token="s3cret", grpc=False)
    yield process
    process.stop()


def test_reads_sending_and_labels_round_trip(collector) -> None:
    source = HttpSource(collector.url, "s3cret")
    assert source.rows("summary", {"service": None})[0]["episodes"] == 0

    for body in scenario_bodies(("read_spin", "healthy_lookup"), service="imported"):
        source.send_traces(body)
    listed = eventually(lambda: source.rows("episode_list", {"service": "imported"}))
    ids = {row["episode_id"] for row in listed}
    assert ids == {"scn-read_spin-0-s0", "scn-healthy_lookup-0-s0"}
    flagged = source.rows("episode_list", {"flagged": True})
    assert [row["episode_id"] for row in flagged] == ["scn-read_spin-0-s0"]

    stored = source.save_label({"episode_id": "scn-read_spin-0-s0", "span_id": "",
                                "label": "true_loop", "note": "spins on search"})
    assert stored["label"] == "true_loop"
    [label] = eventually(lambda: source.rows("label_list", {}))
    assert (label["episode_id"], label["note"]) == ("scn-read_spin-0-s0", "spins on search")
    report = collect(source.rows, {"service": "imported"})
    assert report["loop_detection_rate"]["count"] == 1
    assert report["loop_detection_rate"]["n"] == 1


def test_every_read_arrives_as_arrow_with_the_values_a_file_gives(tmp_path: Path) -> None:
    """The dashboard takes a read's rows as Arrow (``reads.wire``), and they are the rows the
    same read gives over the file (a timestamp a datetime, a map a dict); a client that
    accepts only JSON still gets JSON."""
    db = tmp_path / "wire.duckdb"
    process = start_collector(db, grpc=False)
    try:
        source = HttpSource(process.url)
        for body in scenario_bodies(("read_spin", "oscillation", "healthy_lookup"),
                                    service="imported"):
            source.send_traces(body)
        eventually(lambda: len(source.rows("episode_list", {"flagged": True})) == 2)
        source.save_label({"episode_id": "scn-read_spin-0-s0", "span_id": "",
                           "label": "true_loop", "note": "spins"})
        eventually(lambda: source.rows("label_list", {}))
        span = source.rows("episode_spans", {"episode_id": "scn-read_spin-0-s0"})[0]
        params = {"episode_id": "scn-read_spin-0-s0", "span_id": span["span_id"]}
        asked = {name: {p: params[p] for p in read.required} for name, read in READS.items()}
        def every_read() -> dict[str, list[dict[str, object]]]:
            return {name: source.rows(name, given) for name, given in asked.items()}

        # the same answers twice in a row: the collector has stored and judged everything
        over_http, before = every_read(), {}
        while not _same(over_http, before):
            time.sleep(0.2)
            over_http, before = every_read(), over_http
        with urllib.request.urlopen(f"{process.url}/v1/reads/episode?episode_id="
                                    "scn-read_spin-0-s0") as answer:
            assert answer.headers.get_content_type() == "application/json"
            assert json.loads(answer.read())["rows"][0]["episode_id"] == "scn-read_spin-0-s0"
    finally:
        process.stop()
    over_file = FileSource(str(db))
    for name, given in asked.items():
        assert _same(over_http[name], over_file.rows(name, given)), name
    assert isinstance(over_http["episode"][0]["calls_by_tool"], dict)
    assert isinstance(over_http["label_list"][0]["labelled_at"], datetime.datetime)
    assert sum(map(len, over_http.values())) > 100


@pytest.mark.parametrize(("accept", "arrow"), [
    (None, False), ("", False), ("*/*", False), ("application/json", False),
    (ARROW_STREAM, True), (f"{ARROW_STREAM}, application/json;q=0.5", True),
    (f"application/json, {ARROW_STREAM};q=0.5", False), (f"{ARROW_STREAM};q=0", False),
    (f"{ARROW_STREAM};q=x", False), (f"*/*, {ARROW_STREAM.upper()}", True),
])
def test_the_read_api_sends_arrow_only_to_a_client_that_prefers_it(accept: str | None,
                                                                   arrow: bool) -> None:
    assert prefers_arrow(accept) is arrow


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def test_errors_say_what_went_wrong(collector) -> None:
    with pytest.raises(SourceError, match="401"):
        HttpSource(collector.url).rows("summary", {})
    source = HttpSource(collector.url, "s3cret")
    with pytest.raises(SourceError, match="no read named"):
        source.rows("drop_tables", {})
    with pytest.raises(SourceError, match="label: must be one of"):
        source.save_label({"episode_id": "x", "label": "maybe"})
    with pytest.raises(SourceError, match="cannot reach the collector"):
        HttpSource("http://127.0.0.1:9", timeout_s=2).rows("summary", {})


def test_the_labels_page_saves_through_a_live_collector(collector, monkeypatch) -> None:
    """The labelling queue: unlabelled runs first, each shown by its task, agent and verdict;
    no verdict is chosen for the labeller (saving without one says so and saves nothing);
    false stop is offered on a run enforce would stop; a saved label marks its run and moves the picker to the next unlabelled one; undo puts
    the run back as it was, in the collector too."""
    source = HttpSource(collector.url, "s3cret")
    shapes = ("read_spin", "oscillation", "healthy_lookup")
    for body in scenario_bodies(shapes):
        source.send_traces(body)
    eventually(lambda: len(source.rows("episode_list", {"flagged": True})) == 2)
    monkeypatch.delenv("LOOPSCOPE_DB_SNAPSHOT")
    monkeypatch.setenv("LOOPSCOPE_COLLECTOR_URL", collector.url)
    monkeypatch.setenv("LOOPSCOPE_AUTH_TOKEN", "s3cret")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    at.switch_page("views/labels.py").run()
    assert not at.exception
    assert not at.warning
    run = at.selectbox(key="label_episode")
    assert set(run.options) == {run.format_func(e) for e in (
        "scn-read_spin-0-s0", "scn-oscillation-0-s0")}
    shown = run.format_func(run.value)
    assert shown.startswith("○ unlabelled · ") and " · agent " in shown
    first = run.value
    task = next(e for e in generate(seed=0, per_shape=1, shapes=shapes, faults=False)
            if e["episode_id"] == first)["task"]
    assert shown.startswith("○ unlabelled · " + (task if len(task) <= 60 else task[:57] + "…")
                            + " · agent ")
    flag = at.selectbox(key="label_flag")
    assert flag.options[0] == "the whole run" and len(flag.options) > 1
    span_ids = [row["span_id"] for row in source.rows("episode_detections",
                                                      {"episode_id": first})]
    flag.set_value(span_ids[0])
    assert at.radio[0].value is None  # nothing chosen for the labeller
    assert "False stop — " in str(at.radio[0].options)
    at.button[0].click().run()
    assert "Pick a verdict first" in at.error[0].value
    assert source.rows("label_list", {}) == []
    at.radio[0].set_value("false_kill")
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert f"of {first} as false stop" in at.success[0].value
    [label] = source.rows("label_list", {})
    assert (label["label"], label["span_id"]) == ("false_kill", span_ids[0])
    # the labelled run is marked and goes after the unlabelled one, which the picker shows
    run = at.selectbox(key="label_episode")
    second = ({"scn-read_spin-0-s0", "scn-oscillation-0-s0"} - {first}).pop()
    assert run.value == second
    assert run.format_func(run.value).startswith("○ unlabelled")
    assert [run.format_func(e)[:2] for e in (second, first)] == ["○ ", "✓ "]
    assert run.format_func(first).startswith("✓ false stop · ")
    queue = next(d.value for d in at.dataframe if "label" in d.value.columns
                 and "task" in d.value.columns)
    assert list(queue["label"].fillna("")) == ["", "false stop"]
    # undo: the call's label is gone from the collector, the run unlabelled again
    at.button(key="label_undo_button").click().run()
    assert not at.exception, at.exception
    assert source.rows("label_list", {}) == []
    assert f"Undone: {first} is unlabelled again." in at.success[0].value
    assert at.selectbox(key="label_episode").value == first
    with pytest.raises(SourceError, match="null to remove"):
        source.save_label({"episode_id": "x", "label": "maybe"})
