"""Analyse an uploaded file in place, and turn its runs into OTLP JSON for a collector.

The Import page's one door to the collector's offline code: an Episode JSONL or OTLP JSON
file is read and judged by ``loopscope_collector.runs.inputs.analyze_inputs``, exactly as
``loopscope analyze`` does it (problems reported the same ``FILE:LINE`` way; OTLP spans
assembled and detected as a live collector would), off the store: nothing is written
anywhere until the user asks to send the runs to a live collector. Then an OTLP file's own export requests are posted as they are,
and an Episode JSONL run becomes the spans ``loopscope analyze --db`` would store
(``synthetic_spans.episode_spans``), encoded as OTLP JSON.
"""

from __future__ import annotations

import base64
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pandas as pd

from loopscope.detect import Policy
from loopscope.detect.events import MODES as GUARD_MODES
from loopscope.detect.replay import EpisodeReport
from loopscope.offline.analysis import Problem, summarize
from loopscope_collector.normalize.spans import SpanRecord
from loopscope_collector.runs.inputs import analyze_inputs
from loopscope_collector.runs.synthetic_spans import episode_spans

MODES: Final = ("enforce", *(mode for mode in GUARD_MODES if mode != "enforce"))
"""The guard modes the Import page offers, enforce first (its default)."""
EPISODES_PER_REQUEST: Final = 50
Progress = Callable[[int, int], None]
"""``progress(done, total)``, called after each replayed run."""


@dataclass
class Analysis:
    """One uploaded file, analysed: its runs, the core's reports and the unreadable lines."""

    name: str
    fmt: str
    """``otlp`` or ``episodes``."""
    reports: list[EpisodeReport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    otlp_lines: list[bytes] = field(default_factory=list)
    """For an OTLP file: its export requests, to post to a collector as they are."""

    @property
    def summary(self) -> dict[str, Any]:
        """Counts as ``loopscope analyze --json`` reports them."""
        return summarize(self.reports, self.problems)


def unreadable(analysis: Analysis) -> str | None:
    """Why nothing in the file could be read, naming the first bad line and its problem, or
    None when it held at least one run (or nothing at all)."""
    if analysis.reports or not analysis.problems:
        return None
    first = analysis.problems[0]
    more = len(analysis.problems) - 1
    return (f"{analysis.name} is neither OTLP JSON nor Episode JSONL: line {first.line}: "
            f"{first.message}" + (f" (and {more} more unreadable line(s))" if more else "")
            + ". Nothing was read from it.")


def _sniff(data: bytes) -> str:
    head = data[:65536]
    return "otlp" if b'"resourceSpans"' in head or b'"resource_spans"' in head else "episodes"


def analyse(name: str, data: bytes, *, mode: str = "enforce", policy: Policy | None = None,
            progress: Progress | None = None) -> Analysis:
    """Read ``data`` (the file called ``name``) and judge every run in ``mode`` under
    ``policy`` (default: the core's defaults).

    Called on the Streamlit script thread; ``progress`` is told after each run. A malformed
    line becomes a ``Problem`` and is skipped, as in ``loopscope analyze``.
    """
    fmt = _sniff(data)
    suffix = ".json" if name.endswith(".json") else ".jsonl"
    with tempfile.TemporaryDirectory(prefix="loopscope-import-") as folder:
        path = Path(folder) / (Path(name).stem + suffix)
        path.write_bytes(data)
        reports, problems, _ = analyze_inputs(
            [str(path)], fmt=fmt, mode=mode, policy=policy,
            on_report=progress)
    analysis = Analysis(name, fmt, reports=reports)
    analysis.problems = [Problem(name, p.line, p.message) for p in problems]
    if fmt == "otlp":
        analysis.otlp_lines = _export_requests(data)
    return analysis


def _export_requests(data: bytes) -> list[bytes]:
    lines = [line for line in data.splitlines() if line.strip()]
    if all(line.lstrip().startswith(b"{") and line.rstrip().endswith(b"}") for line in lines):
        return lines  # one export per line, as the OTel Collector's file exporter writes
    return [data]  # one (pretty-printed) document


def episodes_frame(analysis: Analysis) -> pd.DataFrame:
    """One row per run: outcome, calls, flags, first flag and where the guard would stop."""
    rows = []
    for report in analysis.reports:
        episode = report.episode
        first = report.first_flag
        rows.append({
            "episode_id": episode.episode_id,
            "outcome": episode.outcome,
            "tool_calls": report.tool_calls,
            "flags": len(report.flags),
            "kinds": ", ".join(dict.fromkeys(f.kind for f in report.flags)),
            "first_flag_call": None if first is None else report.call_at(first.step),
            "would_stop": None if report.stop is None else report.stop.stop_reason,
            "would_stop_at_call": (None if report.stop is None
                                   else report.call_at(report.stop.step)),
            "label_loop": episode.loop_label,
        })
    return pd.DataFrame(rows)


def flags_frame(analysis: Analysis) -> pd.DataFrame:
    """One row per flag, in run and call order: ``call`` is the number of the flagged call
    (``EpisodeReport.call_at``: 1 for the run's first tool call, or the agent's own number;
    for a flag on a message, the call that would follow it), ``action`` what the replayed
    mode's guard does there (warn, block, stop)."""
    rows = []
    for report in analysis.reports:
        rows += [{"episode_id": report.episode.episode_id,
                  "call": report.call_at(f.step),
                  "action": f.action if f.severity == "kill" else "warn",
                  "detector": f.detector, "kind": f.kind, "message": f.message}
                 for f in report.flags]
    return pd.DataFrame(rows)


def problems_frame(analysis: Analysis) -> pd.DataFrame:
    """The lines that could not be read."""
    return pd.DataFrame([{"line": p.line, "problem": p.message} for p in analysis.problems])


def otlp_bodies(analysis: Analysis, *, service: str | None = None) -> list[bytes]:
    """The runs as OTLP JSON export requests for ``POST /v1/traces``.

    An OTLP file's requests are sent as they are. Episode JSONL runs become loopscope-shaped
    spans (ids derived from the episode id, so sending twice stores nothing twice) under
    ``service`` (default: the file's name), ``EPISODES_PER_REQUEST`` runs per request.
    """
    if analysis.fmt == "otlp":
        return list(analysis.otlp_lines)
    service = service or Path(analysis.name).stem or "import"
    base_ns = time.time_ns()
    bodies: list[bytes] = []
    reports = analysis.reports
    for start in range(0, len(reports), EPISODES_PER_REQUEST):
        spans: list[SpanRecord] = []
        for offset, report in enumerate(reports[start:start + EPISODES_PER_REQUEST]):
            spans += episode_spans(report.episode, service=service,
                                   base_ns=base_ns + (start + offset) * 1_000_000)
        bodies.append(otlp_json(spans))
    return bodies


# -- SpanRecord -> OTLP JSON ------------------------------------------------------------------


def otlp_json(spans: list[SpanRecord]) -> bytes:
    """An ``ExportTraceServiceRequest`` in OTLP/JSON (ids as hex) holding ``spans``."""
    by_resource: dict[str, tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]] = {}
    for span in spans:
        key = json.dumps(span.resource, sort_keys=True, default=str)
        _, scopes = by_resource.setdefault(key, (span.resource, {}))
        scopes.setdefault(span.scope_name, []).append(_span(span))
    doc = {"resourceSpans": [
        {"resource": {"attributes": _attributes(resource)},
         "scopeSpans": [{"scope": {"name": scope}, "spans": items}
                        for scope, items in scopes.items()]}
        for resource, scopes in by_resource.values()
    ]}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def _span(span: SpanRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": span.trace_id, "spanId": span.span_id, "name": span.name,
        "kind": span.kind, "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns), "attributes": _attributes(span.attributes),
        "status": {"code": span.status_code, "message": span.status_message},
    }
    if span.parent_span_id:
        out["parentSpanId"] = span.parent_span_id
    if span.events:
        out["events"] = [{"name": e.name, "timeUnixNano": str(e.time_ns),
                          "attributes": _attributes(e.attributes)} for e in span.events]
    return out


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in values.items()]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": _attributes(value)}}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode()}
    return {"stringValue": str(value)}


def iter_chunks(items: list[bytes], size: int) -> Iterator[list[bytes]]:
    """``items`` in lists of ``size`` (for sending with a progress bar)."""
    for start in range(0, len(items), size):
        yield items[start:start + size]
