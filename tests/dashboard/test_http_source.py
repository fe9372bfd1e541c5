"""HttpSource against a real collector process: reads, metrics, sending runs, labels."""

from __future__ import annotations

from pathlib import Path

import pytest
from collector_process import eventually, start_collector
from streamlit.testing.v1 import AppTest

import loopscope_dashboard
from loopscope.offline.scenarios import generate
from loopscope_collector.metrics.compute import collect
from loopscope_dashboard import uploads
from loopscope_dashboard.queries import HttpSource, SourceError

pytestmark = pytest.mark.timeout(120)
APP = str(Path(loopscope_dashboard.__file__).parent / "app.py")


def _jsonl(shapes: tuple[str, ...]) -> bytes:
    import json

    episodes = generate(seed=0, per_shape=1, shapes=shapes, faults=False)
    return "".join(json.dumps(e) + "\n" for e in episodes).encode()


@pytest.fixture
def collector(tmp_path: Path):
    process = start_collector(tmp_path / "live.duckdb", token="s3cret", grpc=False)
    yield process
    process.stop()


def test_reads_sending_and_labels_round_trip(collector) -> None:
    source = HttpSource(collector.url, "s3cret")
    assert source.rows("summary", {"service": None})[0]["episodes"] == 0

    analysis = uploads.analyse("runs.jsonl", _jsonl(("read_spin", "healthy_lookup")))
    for body in uploads.otlp_bodies(analysis, service="imported"):
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
    for body in uploads.otlp_bodies(uploads.analyse("a.jsonl", _jsonl(shapes))):
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
