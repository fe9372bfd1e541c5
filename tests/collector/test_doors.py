"""The same spans give the same flags by every door (issue 10's done-means).

Every run of the scenario library, plus the issue's two cases, becomes loopscope-shaped spans
(``synthetic_spans``, as ``loopscope analyze --db`` and the dashboard's Import make them).
Those spans go through every door a user has:

- live OTLP/HTTP and live OTLP/gRPC: the OpenTelemetry SDK's own exporters, into a real
  ``loopscope collector`` process (one per door, for the whole module), read back from its
  ``episode_detections``;
- an OTLP JSON file, and the equivalent Episode JSONL, through ``loopscope analyze``;
- ``loopscope analyze --db`` (what it prints, which is what it stored);
- the dashboard's Import page (``uploads.analyse``, the function the page calls).

Each door must give the same (call, detector, action) list for each run. Every door runs
under one policy that declares ``request_id`` volatile for ``search``, which changes nothing
for the library (no ``search`` call carries a ``request_id``) and is the issue's volatile
case: six identical searches differing only in ``request_id`` get exact_repeat's ladder,
not just output_stagnation. The shadow case: each loopscope tool span of a spin has an
OpenLLMetry child reporting the same call, which counts once, as live.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from collector_process import CollectorProcess, eventually, start_collector
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from test_analyze_command import otlp_json_line

from loopscope import conventions as c
from loopscope.detect import Policy
from loopscope.detect.episode_records import parse_episode
from loopscope.detect.ladder import same_turn
from loopscope.offline import cli
from loopscope.offline.scenarios import generate
from loopscope_collector.normalize.spans import SpanRecord
from loopscope_collector.reads import snapshot
from loopscope_collector.runs.synthetic_spans import episode_spans
from loopscope_collector.storage import open_database
from loopscope_dashboard import replays, uploads

pytestmark = pytest.mark.timeout(300)

POLICY = {"volatile_args": {"search": ["request_id"]}}
BASE_NS = 1_700_000_000_000_000_000
Flags = list[tuple[int, str, str]]


def _volatile_episode() -> dict[str, Any]:
    """Six identical searches; only ``request_id`` (volatile under POLICY) differs."""
    return {"episode_id": "volatile-request-id", "task_type": "lookup", "steps": [
        {"type": "tool", "tool": "search", "kind": "read", "t": float(i),
         "args": {"q": "order 1234", "request_id": f"req-{i}"}, "output": "no results"}
        for i in range(6)]}


def _shadowed_episode() -> dict[str, Any]:
    """A spin whose every call is also reported by OpenLLMetry (the spans get a child)."""
    return {"episode_id": "shadowed-spin", "task_type": "lookup", "steps": [
        {"type": "tool", "tool": "lookup_order", "kind": "read", "t": float(i),
         "args": {"order": "A-1"}, "output": "order A-1: status unknown"}
        for i in range(5)]}


def _openllmetry_child(parent: SpanRecord, index: int) -> SpanRecord:
    tool = parent.attributes[c.GEN_AI_TOOL_NAME]
    return SpanRecord(
        parent.trace_id, f"{index + 1:016x}", parent.span_id, f"{tool}.tool",
        parent.start_ns + 10, parent.end_ns - 10, kind=1,
        attributes={"traceloop.span.kind": "tool", "traceloop.entity.name": tool,
                    "traceloop.entity.input": parent.attributes[c.GEN_AI_TOOL_CALL_ARGUMENTS],
                    "traceloop.entity.output": json.dumps(
                        parent.attributes.get(c.GEN_AI_TOOL_CALL_RESULT, ""))},
        resource=parent.resource, scope_name="opentelemetry.instrumentation.langchain")


CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "corpus.jsonl"
CORPUS_CLASSES = ("monologue", "message_loop", "normalised_output", "state_cycle",
                  "inferred_kind", "unknown_write", "duplicate_after_success", "poll_state",
                  "cursor_bounds", "transient_retry", "long_run")
"""The authored corpus's classes the doors are fed (a loop and a look-alike each): messages
(the user's turns, the assistant's replies) and every class detection v3 added; and a loop
and a look-alike with parallel tool calls (several calls issued at once)."""
CORPUS_EPISODES = ("corpus-duplicate-after-success-loop-browser-repost",
                   "corpus-duplicate-after-success-ok-browser-three-ads")
"""And these, named: a write known only by its outcome (a click that answered "Post
successful"), which every door must read from the call's output."""


def _parallel(record: dict[str, Any]) -> bool:
    times = [s.get("t") or 0.0 for s in record["steps"] if s["type"] == "tool"]
    return any(same_turn(a, b) for a, b in itertools.pairwise(times))


def _corpus_runs() -> list[dict[str, Any]]:
    picked: dict[tuple[str, bool], dict[str, Any]] = {}
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        key = (record["meta"]["corpus_class"], bool(record["label"]["loop"]))
        if key[0] in CORPUS_CLASSES:
            picked.setdefault(key, record)
        if record["episode_id"] in CORPUS_EPISODES:
            picked[(record["episode_id"], key[1])] = record
        if _parallel(record):
            picked.setdefault(("parallel", key[1]), record)
    assert {c for c, _ in picked} == {*CORPUS_CLASSES, *CORPUS_EPISODES, "parallel"}, (
        "a class or a named episode is gone")
    return list({r["episode_id"]: r for r in picked.values()}.values())


def _runs() -> list[tuple[str, list[SpanRecord]]]:
    """(episode id, its spans) of every run the doors are fed."""
    records = [*generate(seed=0, per_shape=1), _volatile_episode(), _shadowed_episode(),
               *_corpus_runs()]
    runs = []
    for ordinal, record in enumerate(records):
        episode = parse_episode(record)
        # no policy: the spans carry every argument, request_id included, as an SDK without
        # the collector's policy would send them
        spans = episode_spans(episode, service="doors", base_ns=BASE_NS + ordinal * 10**12)
        for span in spans[1:]:
            span.end_ns = span.start_ns + 1_000_000  # a tool call takes a millisecond
        if episode.episode_id == "shadowed-spin":
            spans += [_openllmetry_child(span, i) for i, span in enumerate(spans[1:])]
        runs.append((episode.episode_id, spans))
    return runs


RUNS = _runs()
EPISODE_IDS = [episode_id for episode_id, _ in RUNS]


def _equivalent_episode(episode_id: str, spans: list[SpanRecord]) -> dict[str, Any]:
    """The Episode JSONL record that says what the loopscope tool and message spans say."""
    root = spans[0].attributes
    tools = [s for s in spans if s.attributes.get(c.GEN_AI_OPERATION_NAME) == "execute_tool"]
    said = [s for s in spans if c.MESSAGE_ROLE in s.attributes]
    first_ns = min(s.start_ns for s in [*tools, *said])
    steps = []
    for span in sorted([*tools, *said], key=lambda s: s.start_ns):
        a = span.attributes
        if span in said:
            steps.append({"type": "message", "role": a[c.MESSAGE_ROLE],
                          "content": a[c.MESSAGE_CONTENT], "t": (span.start_ns - first_ns) / 1e9})
            continue
        step: dict[str, Any] = {
            "type": "tool", "tool": a[c.GEN_AI_TOOL_NAME],
            "args": json.loads(a[c.GEN_AI_TOOL_CALL_ARGUMENTS]),
            "output": a.get(c.GEN_AI_TOOL_CALL_RESULT), "status": a[c.STATUS],
            "t": (span.start_ns - first_ns) / 1e9,
            "duration_s": (span.end_ns - span.start_ns) / 1e9,
        }
        for key, name in ((c.TOOL_KIND, "kind"), (c.GEN_AI_TOOL_CALL_ID, "tool_call_id"),
                          (c.TURN, "turn"), (c.TOOL_INTENT, "intent"),
                          (c.TOOL_DEADLINE_S, "deadline_s"), (c.RECONCILE_KEY, "reconciles"),
                          (c.RECONCILE_FOUND, "found"), (c.IDEMPOTENCY_KEY, "idempotency_key")):
            if key in a:
                step[name] = a[key]
        steps.append(step)
    return {"episode_id": episode_id, "task_type": root.get(c.TASK_TYPE),
            "outcome": root.get(c.OUTCOME), "steps": steps}


def _readable(span: SpanRecord) -> ReadableSpan:
    """A decoded span as the OpenTelemetry SDK's own finished span."""
    def context(span_id: str) -> SpanContext:
        return SpanContext(int(span.trace_id, 16), int(span_id, 16), is_remote=False,
                           trace_flags=TraceFlags(TraceFlags.SAMPLED))

    code = StatusCode.ERROR if span.status_code == 2 else StatusCode.UNSET
    return ReadableSpan(
        name=span.name, context=context(span.span_id),
        parent=context(span.parent_span_id) if span.parent_span_id else None,
        resource=Resource(span.resource), attributes=span.attributes,
        events=[Event(e.name, e.attributes, e.time_ns) for e in span.events],
        kind=SpanKind(max(span.kind - 1, 0)),
        status=Status(code, span.status_message if code is StatusCode.ERROR else None),
        start_time=span.start_ns, end_time=span.end_ns,
        instrumentation_scope=InstrumentationScope(span.scope_name),
    )


# -- the doors -----------------------------------------------------------------------------


def _report_flags(document: dict[str, Any]) -> dict[str, Flags]:
    return {e["episode_id"]: [(f["call"], f["detector"], f["action"]) for f in e["flags"]]
            for e in document["episodes"]}


def _analyze(*args: str) -> dict[str, Flags]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["analyze", *args, "--json"])
    assert code == 0, err.getvalue()
    return _report_flags(json.loads(out.getvalue()))


def _live(collector: CollectorProcess, exporter: Any, spans: list[ReadableSpan]
          ) -> dict[str, Flags]:
    for start in range(0, len(spans), 200):
        assert exporter.export(spans[start:start + 200]) is SpanExportResult.SUCCESS
    exporter.shutdown()
    eventually(lambda: collector.read("summary")[0]["episodes"] == len(RUNS))
    flags = {}
    for episode_id in EPISODE_IDS:
        rows = collector.read("episode_detections", episode_id=episode_id)
        flags[episode_id] = [(r["ordinal"] + 1, r["detector"], r["action"]) for r in rows]
    return flags


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("doors")


@pytest.fixture(scope="module")
def doors(folder: Path) -> Iterator[dict[str, dict[str, Flags]]]:
    policy = folder / "policy.json"
    policy.write_text(json.dumps(POLICY), encoding="utf-8")
    spans = [_readable(s) for _, run in RUNS for s in run]
    otlp = folder / "traces.jsonl"
    otlp.write_text("".join(otlp_json_line(spans[i:i + 150]) + "\n"
                            for i in range(0, len(spans), 150)), encoding="utf-8")
    episodes = folder / "episodes.jsonl"
    episodes.write_text("".join(json.dumps(_equivalent_episode(eid, run)) + "\n"
                                for eid, run in RUNS), encoding="utf-8")
    found: dict[str, dict[str, Flags]] = {
        "otlp-file": _analyze(str(otlp), "--policy", str(policy)),
        "episode-jsonl": _analyze(str(episodes), "--policy", str(policy)),
        "analyze-db": _analyze(str(otlp), "--policy", str(policy), "--db",
                               str(folder / "offline.duckdb")),
    }
    imported = uploads.analyse("traces.jsonl", otlp.read_bytes(),
                               policy=Policy.from_mapping(POLICY))
    found["dashboard-import"] = {
        r.episode.episode_id: [(r.call_at(f.step), f.detector,
                                f.action if f.severity == "kill" else "warn")
                               for f in r.flags] for r in imported.reports}
    for door, exporter in (("live-http", lambda col: HttpExporter(f"{col.url}/v1/traces")),
                           ("live-grpc", lambda col: GrpcExporter(
                               f"127.0.0.1:{col.grpc_port}", insecure=True))):
        collector = start_collector(folder / f"{door}.duckdb",
                                    extra=["--policy", str(policy)])
        try:
            found[door] = _live(collector, exporter(collector), spans)
        finally:
            collector.stop()
    yield found


@pytest.fixture(scope="module")
def policy_replay(doors: dict[str, dict[str, Flags]], folder: Path) -> dict[str, Any]:
    """The Policy page's replay (``replays.replay_all``, the function the page calls) of the
    runs ``analyze --db`` stored, under the doors' policy: one verdict per run."""
    db = open_database(folder / "offline.duckdb", read_only=True)
    try:
        with snapshot(db) as read:
            episodes, calls = read("replay_episodes", {}), read("replay_calls", {})
    finally:
        db.close()
    runs = replays.stored_runs(pd.DataFrame(episodes), calls)
    return {v.episode_id: v for v in replays.replay_all(runs, Policy.from_mapping(POLICY),
                                                        workers=1)}


def test_every_door_reads_every_run(doors: dict[str, dict[str, Flags]]) -> None:
    for door, flags in doors.items():
        assert set(flags) >= set(EPISODE_IDS), door


@pytest.mark.parametrize("episode_id", EPISODE_IDS)
def test_the_same_spans_give_the_same_flags_by_every_door(
    doors: dict[str, dict[str, Flags]], episode_id: str
) -> None:
    expected = sorted(doors["episode-jsonl"][episode_id])
    for door, flags in doors.items():  # the store keeps no order among one call's flags
        assert sorted(flags[episode_id]) == expected, door


def test_the_policy_replay_flags_where_every_door_does(
    doors: dict[str, dict[str, Flags]], policy_replay: dict[str, Any],
) -> None:
    """The Policy page replays the stored rows through the same adapter as the collector's
    detection: its first flag and first block or stop are at the calls every door flags."""
    assert set(policy_replay) >= set(EPISODE_IDS)
    for episode_id in EPISODE_IDS:
        flags = sorted(doors["episode-jsonl"][episode_id])
        verdict = policy_replay[episode_id]
        first = min((call for call, _, _ in flags), default=None)
        kill = min((call for call, _, action in flags if action != "warn"), default=None)
        assert (verdict.first_flag_call, verdict.first_kill_call) == (first, kill), (
            episode_id, flags, verdict)


def test_volatile_arguments_are_left_out_by_every_door(
    doors: dict[str, dict[str, Flags]],
) -> None:
    """Six searches differing only in a volatile request_id are one repeated call."""
    for door, flags in doors.items():
        detectors = [(call, detector, action) for call, detector, action
                     in flags["volatile-request-id"] if detector == "exact_repeat"]
        assert [action for _, _, action in detectors][:2] == ["warn", "block"], (door, flags[
            "volatile-request-id"])


def test_a_framework_span_inside_a_loopscope_call_is_one_step_by_every_door(
    doors: dict[str, dict[str, Flags]],
) -> None:
    """The shadowed spin is flagged at the calls the spin alone gives (five, not ten)."""
    flags = doors["otlp-file"]["shadowed-spin"]
    assert flags and max(call for call, _, _ in flags) <= 5
    for door in doors:
        assert sorted(doors[door]["shadowed-spin"]) == sorted(flags), door


def test_a_monologue_is_flagged_by_every_door(doors: dict[str, dict[str, Flags]]) -> None:
    """The assistant's replies reach every door (issue 16: ``analyze --db`` and the live
    collector saw tool calls only), and the user's turns with them."""
    looping = [eid for eid in EPISODE_IDS if eid.startswith("corpus-monologue-loop-")]
    assert looping
    for door, flags in doors.items():
        for episode_id in looping:
            assert any(detector == "monologue" for _, detector, _ in flags[episode_id]), (
                door, episode_id, flags[episode_id])


def test_a_write_known_by_its_outcome_is_flagged_by_every_door(
    doors: dict[str, dict[str, Flags]],
) -> None:
    """A click that answered "Post successful" was a write: the same click after the same
    steps is warned, then blocked, by every door (each reads the call's output); three
    different ads through the same button raise nothing."""
    for door, flags in doors.items():
        actions = [action for _, detector, action
                   in sorted(flags["corpus-duplicate-after-success-loop-browser-repost"])
                   if detector == "write_duplicate"]
        assert actions[:2] == ["warn", "block"], (door, flags)
        assert not flags["corpus-duplicate-after-success-ok-browser-three-ads"], door
