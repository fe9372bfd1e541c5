"""HttpSource against a real collector process: reads, metrics, sending runs, labels."""

from __future__ import annotations

from pathlib import Path

import pytest
from collector_process import eventually, start_collector
from streamlit.testing.v1 import AppTest

import loopscope_dashboard
from loopscope.scenarios import generate
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
    source = HttpSource(collector.url, "s3cret")
    for body in uploads.otlp_bodies(uploads.analyse("a.jsonl", _jsonl(("read_spin",)))):
        source.send_traces(body)
    monkeypatch.delenv("LOOPSCOPE_DB_SNAPSHOT")
    monkeypatch.setenv("LOOPSCOPE_COLLECTOR_URL", collector.url)
    monkeypatch.setenv("LOOPSCOPE_AUTH_TOKEN", "s3cret")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    at.switch_page("views/labels.py").run()
    assert not at.exception
    assert not at.warning
    flag = at.selectbox(key="label_flag")
    assert flag.options[0] == "the whole episode" and len(flag.options) > 1
    span_ids = [row["span_id"] for row in source.rows(
        "episode_detections", {"episode_id": "scn-read_spin-0-s0"})]
    flag.set_value(span_ids[0])
    at.radio[0].set_value("false_kill")
    at.button[0].click().run()
    assert not at.exception
    assert "of scn-read_spin-0-s0 as false_kill" in at.success[0].value
    [label] = source.rows("label_list", {})
    assert (label["label"], label["span_id"]) == ("false_kill", span_ids[0])
