"""The collector's own counters in the Prometheus text exposition format (``GET /metrics``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..pipeline.jobs import AnswerTimes
from ..pipeline.thread import Pipeline
from ..receive.connections import ConnectionWatch
from ..receive.limits import InFlight
from ..receive.spool import Spool

logger = logging.getLogger(__name__)


def _quality(report: Callable[[], Mapping[str, Any]]) -> list[str]:
    """The store's stopped runs, false stops and their rate, and budget stops beside them
    (never in them: a budget is the user's cap, not a detector's verdict), as ``loopscope
    metrics`` counts them over the whole store."""
    try:
        m = report()
    except Exception as exc:  # a failing store: /healthz says why; the counters still render
        logger.debug("loopscope collector: /metrics could not read the store: %s", exc)
        return []
    fk = m["false_kill_rate"]
    value = fk["value"]
    lines = _renamed("loopscope_stopped_runs", "loopscope_killed_episodes", "gauge",
                     "Runs a detector stopped (blocked a call or stopped the run) or would "
                     "have in observe or warn mode (stored; those a label or the rule can "
                     "judge are the false-stop rate's n; budget stops are not in it).",
                     [({}, m["kills"])])
    lines += _renamed("loopscope_false_stopped_runs", "loopscope_false_killed_episodes",
                      "gauge", "Stopped runs that a label, the scenario or the rule says were "
                      "not looping: false stops (stored).", [({}, m["false_kills"])])
    lines += _renamed("loopscope_false_stop_rate", "loopscope_false_kill_rate", "gauge",
                      "False stops / judged stops over the store (NaN before any; "
                      "docs/metrics.md); budget stops are not in it.",
                      [({}, "NaN" if value is None else value)])
    lines += _renamed("loopscope_budget_stopped_runs", "loopscope_budget_stopped_episodes",
                      "gauge", "Runs stopped by a user's budget (stored): beside the "
                      "false-stop rate, never in it.", [({}, m["budget_stops"])])
    loss = m["spans_lost"]["by_service"]
    lines += _lines("loopscope_agent_spans_dropped_total", "counter",
                    "Spans the agents' SDKs dropped before they reached a collector, by "
                    "service and reason, as the SDKs report them (docs/agent-export.md).",
                    [({"service": str(r["service"]), "reason": reason}, n) for r in loss
                     for reason, n in r["by_reason"].items()])
    lines += _lines("loopscope_incomplete_runs", "gauge",
                    "Stored runs with spans lost on the way (a gap in the agent's call "
                    "numbers, or named by its SDK's export report).",
                    [({}, m["incomplete_episodes"])])
    return lines


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _lines(name: str, kind: str, help_text: str,
           samples: Iterable[tuple[dict[str, str], float | str]]) -> list[str]:
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        text = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
        out.append(f"{name}{{{text}}} {value}" if text else f"{name} {value}")
    return out


def _renamed(name: str, old: str, kind: str, help_text: str,
             samples: Iterable[tuple[dict[str, str], float | str]]) -> list[str]:
    """``name``, then the same samples under ``old``, the name it had before docs/glossary.md
    (served for one release, its HELP marked deprecated)."""
    kept = list(samples)
    return _lines(name, kind, help_text, kept) + _lines(
        old, kind, f"DEPRECATED: renamed {name}, which has the same value; this name goes in "
        "the next release (docs/glossary.md).", kept)


def _answer_lines(pipeline: Pipeline) -> list[str]:
    """How long exports wait for their answers: the histogram the receivers record, the wait
    the queue makes now, and the throughput that wait is estimated from."""
    rate = pipeline.throughput.spans_per_s
    lines = _lines("loopscope_pipeline_queue_wait_seconds", "gauge",
                   "How long the spans queued now take to store, as the pipeline measures "
                   "its batches (a request that would wait over "
                   f"{pipeline.max_queue_wait_s:g} s to be stored, its own spans included, is "
                   "told to retry later).", [({}, round(pipeline.queue_wait_s(), 3))])
    lines += _lines("loopscope_pipeline_spans_per_second", "gauge",
                    "Spans the pipeline stores per second of its work, over its recent "
                    "batches (NaN before any).", [({}, "NaN" if rate is None else round(rate))])
    lines += _histogram("loopscope_export_answer_seconds",
                        "Time from an export request (its head read, over HTTP) to its "
                        "answer, by outcome: stored (200: written to the spool, or committed "
                        "without one), throttled (retry later), refused.",
                        pipeline.answer_times)
    return lines + _histogram(
        "loopscope_store_wait_seconds",
        "Time from a request's spans being queued to their batch's commit (what a flag "
        "takes to reach the store once received), by outcome: stored.", pipeline.store_waits)


def _histogram(name: str, text: str, histogram: AnswerTimes) -> list[str]:
    out = [f"# HELP {name} {text}", f"# TYPE {name} histogram"]
    for outcome, (buckets, total, count) in histogram.snapshot().items():
        out += [f'{name}_bucket{{le="{le}",outcome="{outcome}"}} {n}' for le, n in buckets]
        out += [f'{name}_sum{{outcome="{outcome}"}} {round(total, 6)}',
                f'{name}_count{{outcome="{outcome}"}} {count}']
    return out


def render(pipeline: Pipeline, alerts: Iterable[tuple[str, str, int]] = (),
           firing: Iterable[tuple[str, int]] = (), alert_failures: int = 0, alert_steps: Iterable[tuple[str, int, int]] = (),
           inflight: InFlight | None = None,
           watch: ConnectionWatch | None = None,
           quality: Callable[[], Mapping[str, Any]] | None = None,
           spool: Spool | None = None) -> str:
    """All counters; ``alerts`` is (service, state, count) rows of the alerts raised since
    start, ``firing`` (service, 0 or 1) whether one fires now, ``alert_failures`` the alerts a sink (the webhook) failed to deliver,
    ``alert_steps`` (service, tool calls, no-progress calls) as the spike rules count them
    (what ``loopscope export --prometheus-rules`` judges), ``inflight``
    and ``watch`` the receivers' limits, ``quality`` the store's metrics report
    (``metrics.compute_metrics``; left out when it cannot be read), ``spool`` what is
    acknowledged and not yet stored."""
    s = pipeline.stats
    lines: list[str] = _quality(quality) if quality is not None else []
    lines += _lines("loopscope_spans_received_total", "counter",
                    "Spans received in export requests.", [({}, s.spans_received)])
    lines += _lines("loopscope_spans_stored_total", "counter",
                    "Spans stored (new, not retries).", [({}, s.spans_stored)])
    lines += _lines("loopscope_spans_duplicate_total", "counter",
                    "Spans received again (client retries), ignored.", [({}, s.spans_duplicate)])
    lines += _lines("loopscope_spans_rejected_total", "counter",
                    "Spans of export requests refused for their content (answered 400: a "
                    "value the store cannot hold, a bad id; a body that does not parse counts "
                    "none).",
                    [({}, s.spans_rejected)])
    lines += _lines("loopscope_spans_conflicting_total", "counter",
                    "Spans sent again under a stored span id with other content (first kept).",
                    [({}, s.spans_conflicting)])
    lines += _renamed("loopscope_runs_misrouted_total", "loopscope_episodes_misrouted_total",
                      "counter", "Runs sent here whose calls another collector instance "
                      "stored (one run routed to two collectors: route by trace id or "
                      "episode id).",
                    [({}, s.episodes_misrouted)])
    lines += _lines("loopscope_requests_rejected_total", "counter",
                    "Export requests refused for their content (malformed 400, too large 413, "
                    "unsupported 415, unstorable 400), by status code.",
                    [({"code": k}, v) for k, v in sorted(s.requests_rejected.items())])
    lines += _lines("loopscope_requests_overloaded_total", "counter",
                    "Export requests refused with 503 because the queue was full.",
                    [({}, s.requests_overloaded)])
    lines += _lines("loopscope_requests_lost_total", "counter",
                    "Export requests acknowledged (200, spooled) that the store then refused "
                    "for good (a value it cannot hold, too large for its memory): logged.",
                    [({}, s.requests_lost)])
    lines += _lines("loopscope_spans_lost_total", "counter",
                    "Spans of acknowledged requests the store then refused for good.",
                    [({}, s.spans_lost)])
    lines += _lines("loopscope_tool_calls_total", "counter", "Tool calls stored.",
                    [({}, s.tool_calls)])
    lines += _renamed("loopscope_no_progress_calls_total", "loopscope_no_progress_steps_total",
                      "counter", "Tool calls that made no progress (collector verdict).",
                    [({}, s.no_progress_steps)])
    lines += _lines("loopscope_detection_failures_total", "counter",
                    "Episodes of a batch whose detection failed (a fault of the detection "
                    "core, logged once per episode): their calls are stored without verdicts.",
                    [({}, s.detection_failures)])
    lines += _lines("loopscope_loops_total", "counter", "Loop flags raised, by kind.",
                    [({"kind": k}, v) for k, v in sorted(s.loops_by_kind.items())])
    lines += _lines("loopscope_guard_actions_total", "counter",
                    "Decisions reported by in-process guards, by action.",
                    [({"action": k}, v) for k, v in sorted(s.guard_actions.items())])
    lines += _lines("loopscope_alerts_total", "counter", "No-progress alerts, by service and state.",
                    [({"service": svc, "state": st}, n) for svc, st, n in alerts])
    lines += _lines("loopscope_alerts_firing", "gauge",
                    "1 while a no-progress alert of the service fires, else 0 (services that "
                    "alerted since the collector started).",
                    [({"service": svc}, on) for svc, on in firing])
    steps = list(alert_steps)
    lines += _lines("loopscope_service_tool_calls_total", "counter",
                    "Tool calls by service, as the no-progress spike alerts count them (each "
                    "call once, with its first verdict).",
                    [({"service": svc}, n) for svc, n, _ in steps])
    lines += _renamed("loopscope_service_no_progress_calls_total",
                      "loopscope_service_no_progress_steps_total", "counter",
                      "Tool calls that made no progress, by service, as the no-progress "
                      "spike alerts count them.",
                    [({"service": svc}, n) for svc, _, n in steps])
    lines += _lines("loopscope_alert_sink_failures_total", "counter",
                    "Alerts a sink failed to deliver (webhook errors, or dropped when behind).",
                    [({}, alert_failures)])
    lines += _lines("loopscope_queue_spans", "gauge", "Spans waiting for the pipeline.",
                    [({}, s.queue_spans)])
    lines += _renamed("loopscope_detection_active_runs", "loopscope_detection_active_episodes",
                      "gauge", "Runs with detection state in memory.",
                    [({}, pipeline.detector.active)])
    lines += _lines("loopscope_store_healthy", "gauge",
                    "1 while the store can be written, 0 while spans are refused (see /healthz).",
                    [({}, int(pipeline.health.ok))])
    housekeeping = pipeline.housekeeping
    if housekeeping is not None:  # a lake collector's own (storage.ducklake.housekeeping)
        lines += _lines("loopscope_lake_commit_conflicts_total", "counter",
                        "Batches stored again because their commit lost a race with another "
                        "collector's on the same lake (it merged the files they delete from).",
                        [({}, s.commit_conflicts)])
        lines += _lines("loopscope_lake_housekeeping_runs_total", "counter",
                        "Runs of the lake's housekeeping (merge small files, expire snapshots) "
                        "this collector finished (--lake-maintain-every).",
                        [({}, housekeeping.runs)])
        lines += _lines("loopscope_lake_housekeeping_failures_total", "counter",
                        "Runs of the lake's housekeeping that failed (the catalog down, or "
                        "another collector's commit came first): tried again next period, "
                        "ingest goes on.", [({}, housekeeping.failures)])
        lines += _lines("loopscope_lake_housekeeping_last_seconds", "gauge",
                        "How long the last finished housekeeping run took (the pipeline "
                        "stores no batch meanwhile).", [({}, round(housekeeping.last_s or 0.0, 3))])
    lines += _answer_lines(pipeline)
    if spool is not None:
        lines += _lines("loopscope_spool_requests", "gauge",
                        "Export requests acknowledged (in the spool) and not yet stored.",
                        [({}, spool.requests())])
        lines += _lines("loopscope_spool_bytes", "gauge",
                        "Bytes the spool's segment files hold on disk.", [({}, spool.size())])
    if inflight is not None:
        lines += _lines("loopscope_inflight_bytes", "gauge",
                        "Memory requests hold: bodies as they arrive, then decoded spans "
                        "until stored.", [({}, inflight.used)])
        lines += _lines("loopscope_requests_not_admitted_total", "counter",
                        "Requests refused with 503 because the bytes in flight were at the cap.",
                        [({}, inflight.refused)])
        lines += _lines("loopscope_inflight_bodies_evicted_total", "counter",
                        "Bodies arriving slowest, evicted (503, disconnected) to make room "
                        "for a faster request.", [({}, inflight.evicted)])
    if watch is not None:
        lines += _lines("loopscope_http_connections", "gauge", "Open HTTP connections.",
                        [({}, watch.connections)])
        lines += _lines("loopscope_http_connections_refused_total", "counter",
                        "Connections answered 503 because the connection cap was reached and "
                        "every connection was busy with a request.",
                        [({}, watch.refused)])
        lines += _lines("loopscope_http_connections_evicted_total", "counter",
                        "Connections closed at the cap to admit a new one: the one that had "
                        "waited longest without a complete request (idle, or slow headers), "
                        "else the body arriving slowest.",
                        [({}, watch.evicted)])
        lines += _lines("loopscope_http_connections_timed_out_total", "counter",
                        "Connections closed for taking too long (headers, body or idle).",
                        [({}, watch.timed_out)])
    return "\n".join(lines) + "\n"
