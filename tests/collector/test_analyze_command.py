"""`loopscope analyze` after the fact: OTLP JSON files (as the OTel Collector's file exporter
writes them) through the same analyze/replay path, and `--db` into a DuckDB store through the
collector's real pipeline."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import loopscope
from loopscope.detect import Policy
from loopscope.detect.episode_records import parse_episode, parse_episode_line
from loopscope.detect.replay import replay
from loopscope.offline import cli
from loopscope.offline.analysis import analyze
from loopscope.testing import capture_spans
from loopscope_collector.reads import read
from loopscope_collector.runs.synthetic_spans import episode_spans
from loopscope_collector.storage import open_database

pytestmark = pytest.mark.timeout(120)

SPIN_FROM = 2
"""Steps 0 and 1 differ; from step 2 on the spinning agent repeats one call."""
FIRST_FLAG = SPIN_FROM + Policy().repeat_threshold - 1
"""The call that makes the identical calls reach the policy's threshold."""


def _hex_ids(node: Any) -> Any:
    """protobuf's JSON mapping writes bytes as base64; OTLP JSON wants ids in hex."""
    if isinstance(node, dict):
        return {
            key: base64.b64decode(value).hex()
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str)
            else _hex_ids(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(item) for item in node]
    return node


def otlp_json_line(spans: Sequence[Any]) -> str:
    """One ExportTraceServiceRequest as the OpenTelemetry Collector's file exporter writes it."""
    return json.dumps(_hex_ids(MessageToDict(encode_spans(spans))), separators=(",", ":"))


def _run_agents(**settings: Any) -> tuple[list[Any], list[dict[str, Any]]]:
    """A spinning agent and a healthy one, through the real SDK with content captured."""

    @loopscope.tool(kind="read")
    def search(query: str) -> str:
        return f"no results for {query}"

    with capture_spans(mode="observe", **settings) as captured:
        with loopscope.episode(task="find the order", task_type="lookup",
                               episode_id="spinner") as ep:
            search("order 1")
            search("order 2")
            for _ in range(6):
                search("order 3")
            ep.set_outcome("failure")
        with loopscope.episode(task="find two orders", episode_id="healthy") as ep:
            search("order 10")
            search("order 11")
            ep.set_outcome("success")
        return list(captured.spans()), captured.tool_spans()


@pytest.fixture
def otlp_file(tmp_path: Path) -> Path:
    """Two export lines, as a batch processor would have sent them: the spans split."""
    spans, _ = _run_agents(capture_content=True)
    path = tmp_path / "traces.jsonl"
    half = len(spans) // 2
    path.write_text(otlp_json_line(spans[:half]) + "\n" + otlp_json_line(spans[half:]) + "\n",
                    encoding="utf-8")
    return path


def _analyze(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = cli.main(["analyze", *args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _flags(document: dict[str, Any], episode_id: str) -> list[dict[str, Any]]:
    return next(e for e in document["episodes"] if e["episode_id"] == episode_id)["flags"]


def test_otlp_json_lines_report_the_spin_at_the_step_the_sdk_flagged(
    otlp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The SDK's own guard flagged the spin on a span; analyze over the exported file flags
    the same step, and the healthy run not at all, in the --json shape of Episode JSONL."""
    code, document, err = _analyze(capsys, str(otlp_file), "--format", "otlp")
    assert code == 0, err
    assert set(document) == {"episodes", "summary"}
    assert [e["episode_id"] for e in document["episodes"]] == ["spinner", "healthy"]
    assert _flags(document, "healthy") == []
    flags = _flags(document, "spinner")
    assert flags, document
    first = flags[0]
    assert first["step"] == FIRST_FLAG
    assert first["kind"] == "exact_repeat"
    assert set(first) == {"step", "call", "detector", "kind", "severity", "action"}
    assert document["summary"]["episodes"] == 2
    assert document["summary"]["flagged"] == 1
    assert document["summary"]["malformed_lines"] == 0


def test_the_flagged_step_matches_the_guard_on_the_span(
    otlp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same core, same policy: the first flagged step is the span whose guard flagged."""
    _, tool_spans = _run_agents(capture_content=True)
    guarded = [s["attributes"]["loopscope.step"] for s in tool_spans
               if s["attributes"]["loopscope.episode.id"] == "spinner"
               and s["attributes"].get("loopscope.flags")]
    _, document, _ = _analyze(capsys, str(otlp_file))
    assert guarded[0] == _flags(document, "spinner")[0]["step"]


def test_auto_detects_otlp_and_a_whole_file_document(
    otlp_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--format auto (the default) reads OTLP lines, and a pretty-printed single document."""
    _, explicit, _ = _analyze(capsys, str(otlp_file), "--format", "otlp")
    code, auto, err = _analyze(capsys, str(otlp_file))
    assert code == 0, err
    assert auto == explicit
    spans, _ = _run_agents(capture_content=True)
    whole = tmp_path / "export.json"
    whole.write_text(json.dumps(json.loads(otlp_json_line(spans)), indent=2), encoding="utf-8")
    code, document, err = _analyze(capsys, str(whole))
    assert code == 0, err
    assert document["episodes"] == explicit["episodes"]


def test_content_less_spans_still_compare_by_signature_and_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without captured content the spans carry only signature and output hash; the spin is
    still found, at the same step."""
    spans, _ = _run_agents(capture_content=False)
    path = tmp_path / "hashes.jsonl"
    path.write_text(otlp_json_line(spans) + "\n", encoding="utf-8")
    code, document, err = _analyze(capsys, str(path))
    assert code == 0, err
    assert _flags(document, "spinner")[0]["step"] == FIRST_FLAG
    assert _flags(document, "healthy") == []


def test_a_broken_line_is_reported_as_file_line_and_skipped(
    otlp_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A truncated line and a line that is no trace export: FILE:LINE, skipped, exit 1."""
    good = otlp_file.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join([good[0], good[1][: len(good[1]) // 2], "", '{"hello": 1}',
                               good[1]]) + "\n", encoding="utf-8")
    code, document, err = _analyze(capsys, str(path), "--format", "otlp")
    assert code == 1
    assert f"{path}:2:" in err and f"{path}:4:" in err
    assert document["summary"]["malformed_lines"] == 2
    assert _flags(document, "spinner")  # the good lines were still read
    code, _, err = _analyze(capsys, str(path))  # auto: the first line decides the format
    assert code == 1 and f"{path}:2:" in err


def test_base64_ids_are_read_and_bad_ids_name_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """protobuf's JSON mapping (base64 ids) is read as OTLP JSON; an id that is neither hex
    nor base64 is refused with its line and field."""
    spans, _ = _run_agents(capture_content=True)
    path = tmp_path / "base64.jsonl"
    mapped = MessageToDict(encode_spans(spans))
    path.write_text(json.dumps(mapped) + "\n", encoding="utf-8")
    code, document, err = _analyze(capsys, str(path), "--format", "otlp")
    assert code == 0, err
    assert _flags(document, "spinner") and {e["episode_id"] for e in document["episodes"]} == {
        "spinner", "healthy"}
    mapped["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "not-an-id"
    path.write_text(json.dumps(mapped) + "\n", encoding="utf-8")
    code, document, err = _analyze(capsys, str(path), "--format", "otlp")
    assert code == 1
    assert f"{path}:1:" in err and "traceId" in err and "hex" in err


def test_db_stores_tool_calls_episodes_and_detections(
    otlp_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--db writes through the collector's pipeline; running it twice stores nothing twice."""
    store = tmp_path / "out.duckdb"
    code, document, err = _analyze(capsys, str(otlp_file), "--db", str(store))
    assert code == 0, err
    assert str(store) in err and "2 episodes" in err
    code, again, err = _analyze(capsys, str(otlp_file), "--db", str(store))
    assert code == 0 and again == document
    assert "0 new spans" in err
    db = open_database(store, read_only=True)
    try:
        calls = read(db, "episode_tool_calls", {"episode_id": "spinner"})
        assert len(calls) == 8
        assert [c["step"] for c in calls] == list(range(8))
        assert all(c["content_captured"] for c in calls)
        assert len(read(db, "episode_tool_calls", {"episode_id": "healthy"})) == 2
        episodes = {e["episode_id"]: e for e in read(db, "episodes", {})}
        assert set(episodes) == {"spinner", "healthy"}
        assert episodes["spinner"]["outcome"] == "failure"
        detections = read(db, "episode_detections", {"episode_id": "spinner"})
        by_span = {c["span_id"]: c["step"] for c in calls}
        stored = sorted((by_span[d["span_id"]], d["detector"], d["kind"]) for d in detections)
        reported = sorted((f["step"], f["detector"], f["kind"])
                          for f in _flags(document, "spinner"))
        assert stored == reported
        assert read(db, "summary")[0]["tool_calls"] == 10
    finally:
        db.close()


def test_db_locked_by_a_running_collector_is_refused(
    otlp_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store held by another process gets a clear message, not a traceback."""
    import subprocess
    import sys

    store = tmp_path / "busy.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
         "print('ready', flush=True); sys.stdin.read()", str(store)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        code = cli.main(["analyze", str(otlp_file), "--db", str(store)])
        _, err = capsys.readouterr()
        assert code == 2
        assert "locked" in err and "collector" in err and "Traceback" not in err
    finally:
        holder.communicate("", timeout=30)


@pytest.mark.parametrize("knob", [{"max_queue_wait_s": 0.0}, {"max_queue_spans": 1}],
                         ids=["queue-would-wait-too-long", "queue-full"])
def test_db_waits_for_a_busy_pipeline_instead_of_being_refused(
        tmp_path: Path, knob: dict[str, Any]) -> None:
    """``analyze --db`` feeds the collector's pipeline as fast as it reads; where the live
    admission answers a client 503 (any wait too long, or a queue of one span, while a batch
    is held by the pipeline's after-batch hook), the offline store waits for room and stores
    everything: it was refused with ``Overloaded`` on a loaded machine."""
    import threading

    from loopscope_collector.pipeline.thread import Pipeline
    from loopscope_collector.runs.store import Store

    holding, released = threading.Event(), threading.Event()

    def hold(pipeline: object, results: object) -> None:
        if holding.is_set():
            released.wait(60)

    db = open_database(tmp_path / "offline.duckdb")
    pipeline = Pipeline(db, on_batch=hold, **knob).start()
    store = Store(db, pipeline, Policy())
    episodes = [parse_episode({"episode_id": f"run-{n}", "steps": [
        {"type": "tool", "tool": "search", "args": {"q": f"order {n} {i}"}}
        for i in range(3)]}) for n in range(3)]
    spans = [episode_spans(e, service="offline", base_ns=10**18 + n * 10**12)
             for n, e in enumerate(episodes)]
    try:
        pipeline.submit(spans[0]).wait(60)  # one batch measured: the wait rule has a rate
        holding.set()
        errors: list[BaseException] = []

        def feed() -> None:
            try:
                store.submit(spans[1])  # taken, and held after its commit
                store.submit(spans[2])  # waits for room (was: Overloaded)
            except BaseException as exc:
                errors.append(exc)

        feeder = threading.Thread(target=feed)
        feeder.start()
        while not pipeline.stats.requests_overloaded and feeder.is_alive():
            feeder.join(0.05)
        released.set()
        feeder.join(60)
        assert not errors, errors
        counts = store.finish(e.episode_id for e in episodes)
    finally:
        released.set()
        store.close()
    assert pipeline.stats.requests_overloaded  # the live rule did refuse; the store waited
    assert counts.episodes == 3 and counts.tool_calls == 9
    assert counts.spans_new == sum(len(s) for s in spans)


def test_episode_jsonl_into_the_store_prints_what_it_stored(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Real ReAct runs (some flagged) become synthetic loopscope spans; --db prints the flags
    the collector's detection stored, at the agent's steps, and a re-run stores nothing new.
    (That every door gives the same flags is test_doors.py.)"""
    lines = (shared_data / "react_hotpotqa_text-davinci-003.jsonl").read_text(
        encoding="utf-8").splitlines()
    reports, _ = analyze(parse_episode_line(line) for line in lines[30:45])
    assert sum(bool(r.flags) for r in reports) >= 2  # the slice has loops in it
    runs = tmp_path / "react.jsonl"
    runs.write_text("\n".join(lines[30:45]) + "\n", encoding="utf-8")
    store = tmp_path / "react.duckdb"
    code, document, err = _analyze(capsys, str(runs), "--db", str(store))
    assert code == 0, err
    assert "15 episodes" in err
    code, again, err = _analyze(capsys, str(runs), "--db", str(store))
    assert again == document and "0 new spans" in err
    db = open_database(store, read_only=True)
    try:
        assert read(db, "summary")[0]["episodes"] == 15
        for episode in document["episodes"]:
            eid = episode["episode_id"]
            calls = read(db, "episode_tool_calls", {"episode_id": eid})
            by_span = {c["span_id"]: c["step"] for c in calls}
            stored = sorted((by_span[d["span_id"]], d["detector"], d["kind"], d["severity"])
                            for d in read(db, "episode_detections", {"episode_id": eid}))
            reported = sorted((f["step"], f["detector"], f["kind"], f["severity"])
                              for f in episode["flags"])
            assert stored == reported, eid
    finally:
        db.close()


def test_synthetic_spans_are_deterministic_and_shaped_like_the_sdks() -> None:
    """Same episode, same ids; the collector reads them as loopscope messages and tool
    calls."""
    from loopscope_collector.normalize.dispatch import normalize_span

    line = json.dumps({"episode_id": "e-1", "outcome": "success", "steps": [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "tool", "tool": "search", "args": {"q": "x"}, "output": "none", "t": 1.5},
        {"type": "tool", "tool": "buy", "kind": "write", "args": {}, "status": "timeout"},
    ]})
    first = episode_spans(parse_episode_line(line), service="runs", base_ns=10**18)
    second = episode_spans(parse_episode_line(line), service="runs", base_ns=2 * 10**18)
    assert [(s.trace_id, s.span_id) for s in first] == [(s.trace_id, s.span_id) for s in second]
    root, hello, search, buy = (normalize_span(s) for s in first)
    assert root.episode is not None and root.episode.episode_id == "e-1"
    assert hello.message is not None
    assert (hello.message.role, hello.message.content, hello.message.step) == ("user", "hi", 0)
    assert search.tool_call is not None and buy.tool_call is not None
    assert (search.tool_call.tool, search.tool_call.step, search.tool_call.output_text) == (
        "search", 1, "none")
    assert search.tool_call.start_ns == 10**18 + 1_500_000_000
    assert buy.tool_call.status == "timeout" and buy.tool_call.kind == "write"
    assert buy.tool_call.start_ns > search.tool_call.start_ns


def test_plain_episode_jsonl_is_unchanged(
    shared_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """auto over Episode JSONL gives exactly what --format episodes (the core path) gives."""
    path = str(shared_data / "react_hotpotqa_text-davinci-003.jsonl")
    _, auto, _ = _analyze(capsys, path)
    _, episodes, _ = _analyze(capsys, path, "--format", "episodes")
    assert auto == episodes


def test_an_enforce_mode_trace_with_blocked_calls_is_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An enforce-mode guard blocked the repeats and stopped the run: the blocked calls come
    back as status "blocked" steps and the first flag is where the guard first acted."""

    @loopscope.tool(kind="read")
    def search(query: str) -> str:
        return f"no results for {query}"

    with capture_spans(mode="enforce", capture_content=True) as captured:
        with pytest.raises(loopscope.LoopDetected), loopscope.episode(episode_id="stopped"):
            for _ in range(12):
                search("order 3")
        spans = list(captured.spans())
        tools = captured.tool_spans()
    statuses = [s["attributes"]["loopscope.status"] for s in tools]
    assert "blocked" in statuses
    acted = next(s["attributes"]["loopscope.step"] for s in tools
                 if s["attributes"].get("loopscope.flags"))
    path = tmp_path / "enforce.jsonl"
    path.write_text(otlp_json_line(spans) + "\n", encoding="utf-8")
    code, document, err = _analyze(capsys, str(path))
    assert code == 0, err
    flags = _flags(document, "stopped")
    assert flags[0]["step"] == acted
    assert any(f["severity"] == "kill" for f in flags)


def test_recorded_signature_and_hash_steps_replay_without_content() -> None:
    """The core honours the optional step fields `signature` and `output_hash`."""
    step = {"type": "tool", "tool": "search", "args": None, "output": None,
            "signature": "abc", "output_hash": "def"}
    other = {**step, "signature": "xyz"}
    same = replay(parse_episode(
        {"episode_id": "s", "steps": [dict(step) for _ in range(4)]}))
    different = replay(parse_episode(
        {"episode_id": "d", "steps": [dict(step), dict(other)] * 2}))
    assert same.flags and same.flags[0].kind == "exact_repeat"
    assert not [f for f in different.flags if f.kind == "exact_repeat"]


def _scenario_runs(path: Path) -> None:
    from loopscope.offline.scenarios import SHAPES, generate, write_jsonl

    write_jsonl(str(path), generate(seed=3, per_shape=2, faults=False, shapes=list(SHAPES)))


def _corpus_runs(path: Path) -> None:
    corpus = Path(__file__).parents[1] / "corpus" / "corpus.jsonl"
    path.write_text(corpus.read_text(encoding="utf-8"), encoding="utf-8")


@pytest.mark.parametrize("write_runs", [_scenario_runs, _corpus_runs],
                         ids=["scenario-library", "authored-corpus"])
def test_labelled_runs_into_the_store_give_the_rates_eval_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], write_runs: Any
) -> None:
    """The labels of the scenario library and of the authored corpus travel into the store
    with `analyze --db`; the collector's loop-detection and false-kill rates over them
    (scenario label source) are the ones `loopscope eval` reports for loopscope over the same
    runs, monologues and message loops included (their flags fall on message spans)."""
    from loopscope.offline.evaluation import evaluate
    from loopscope_collector.metrics.compute import compute_metrics

    runs = tmp_path / "runs.jsonl"
    write_runs(runs)
    episodes = [parse_episode_line(line) for line in runs.read_text().splitlines()]
    assert {e.loop_label for e in episodes} == {True, False}
    reports, _ = analyze(episodes)
    expected = evaluate(reports)["systems"][0]["labelled"]
    store = tmp_path / "runs.duckdb"
    code, _, err = _analyze(capsys, str(runs), "--db", str(store))
    assert code == 0, err
    db = open_database(store, read_only=True)
    try:
        m = compute_metrics(db)
    finally:
        db.close()
    assert m["labels"]["by_source"] == {"human": 0, "scenario": len(episodes)}
    detection = m["loop_detection_rate"]
    assert detection["label_source"] == "scenario"
    assert (detection["count"], detection["n"]) == (
        expected["loop_detection_rate"]["count"], expected["loop_detection_rate"]["n"])
    assert 0 < detection["count"] < detection["n"] or detection["count"] == detection["n"] > 0
    false_kill = m["false_kill_rate"]["by_label_source"]["scenario"]
    assert (false_kill["count"], false_kill["n"]) == (
        expected["false_kill_rate"]["count"], expected["false_kill_rate"]["n"])


def test_a_label_of_the_wrong_type_is_reported_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "bad-label.jsonl"
    good = {"episode_id": "ok", "label": {"loop": False}, "steps": []}
    bad = {"episode_id": "bad", "label": {"loop": "yes"}, "steps": []}
    runs.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    code, document, err = _analyze(capsys, str(runs))
    assert code != 0
    assert f"{runs}:2" in err and "label.loop" in err
    assert [e["episode_id"] for e in document["episodes"]] == ["ok"]


def test_a_line_that_is_not_utf8_costs_that_line_only(
    otlp_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One bad byte is reported as FILE:LINE; the lines around it are still read, in both
    formats, and a byte-order mark at the start of a file is no problem."""
    runs = tmp_path / "runs.jsonl"
    lines = [json.dumps({"episode_id": name, "steps": []}).encode() for name in "abcd"]
    lines[2] = lines[2].replace(b'"c"', b'"c\xff"')
    runs.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")
    code, document, err = _analyze(capsys, str(runs))
    assert code == 1 and f"{runs}:3: not UTF-8" in err
    assert [e["episode_id"] for e in document["episodes"]] == ["a", "b", "d"]
    otlp_lines = otlp_file.read_bytes().splitlines()
    broken = tmp_path / "broken-otlp.jsonl"
    broken.write_bytes(b"\n".join([otlp_lines[0], b'{"resourceSpans": ["\xff"]}',
                                    *otlp_lines[1:], b""]))
    code, document, err = _analyze(capsys, str(broken))
    _, whole, _ = _analyze(capsys, str(otlp_file))
    assert code == 1 and f"{broken}:2: not UTF-8" in err
    assert document["episodes"] == whole["episodes"]


def test_a_scripted_run_on_its_own_clock_replays_to_what_its_guard_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scripted agent drives the guard on the script's clock (calls seconds apart) while it
    runs in milliseconds. Its spans carry the clock's times, so the replay over the exported
    file counts the model turns the guard counted: with ``ignored_calls`` 2 the guard stops
    the failing booking at call 11 (two unheeded turns; a call after the warning that brings
    nothing new is among those that ignored it), and so does the replay."""
    from loopscope.offline.demo import drive
    from loopscope.offline.scenarios import generate

    policy = {"ignored_calls": 2}
    script = generate(seed=0, per_shape=1, shapes=("repeat_same_error",), faults=False)[0]
    with capture_spans(capture_content=True, policy=policy) as captured:
        drive(script, mode="observe", service="doors")
        spans = list(captured.spans())
        tool_spans = captured.tool_spans()
    order = sorted(tool_spans, key=lambda s: s["attributes"]["loopscope.step"])
    guard = next(n for n, s in enumerate(order, start=1)
                 if s["attributes"].get("loopscope.guard.decision") == "stop")
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_json_line(spans) + "\n", encoding="utf-8")
    (tmp_path / "policy.json").write_text(json.dumps(policy), encoding="utf-8")
    _, document, _ = _analyze(capsys, str(path), "--policy", str(tmp_path / "policy.json"))
    (episode,) = document["episodes"]
    replayed = min(f["call"] for f in episode["flags"] if f["action"] == "stop")
    assert (guard, replayed) == (11, 11)
