"""OTLP JSON files read after the fact, and the spans in them grouped into runs.

The reading half of ``loopscope analyze`` over OTLP input, kept apart from ``analyze`` (the
command's plug-in) because it is a concept of its own: one ``ExportTraceServiceRequest`` per
line, as the OpenTelemetry Collector's ``file`` exporter writes it, or one whole JSON document.
Spans are decoded (``receive.decode``) and normalised (``normalize``) exactly as the live
collector does it, grouped into runs the way its pipeline groups them (the rows' episode id,
else a conversation / session id seen in the trace, else the trace id), ordered by start time
(``EpisodeGrouper``) and judged by the collector's streaming detection (``detect_runs``), fed
their rows as the core's steps. The dashboard's Import page reads uploaded spans the same way.

Nothing heavy is imported at import time: ``decode`` and ``normalize`` are imported when a file
is read, so ``loopscope --help`` does not pull the collector extra.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TextIO

from loopscope.detect.policy import Policy
from loopscope.detect.replay import EpisodeReport
from loopscope.offline.analysis import Problem, decoded_lines

from ..normalize import assembly
from ..normalize.assembly import Reading
from ..normalize.spans import SpanRecord
from ..pipeline.detection import StreamingDetector, detected_report
from ..runs.episodes import Run, runs_of

if TYPE_CHECKING:
    from .store import Store

__all__ = ["OTLP_KEYS", "EpisodeGrouper", "detect_runs", "read_otlp_file"]

OTLP_KEYS: Final = ('"resourceSpans"', '"resource_spans"')
_OTHER_SIGNALS: Final = tuple(
    f'"{key}"' for name in ("Logs", "Metrics", "Profiles")
    for key in (f"resource{name}", f"resource_{name.lower()}")
)


# -- reading -------------------------------------------------------------------------------


def read_otlp_file(
    path: str,
    lines: list[str] | None,
    grouper: EpisodeGrouper,
    store: Store | None,
    progress: TextIO | None,
) -> Iterator[Problem]:
    """Decode one OTLP JSON file into ``grouper`` (and ``store``); yields its problems."""
    try:
        from ..receive.decode import DecodeError, decode_request
    except ImportError as exc:
        yield Problem(path, 0, f"reading OTLP needs the collector extra ({exc.name} is "
                      "missing): pip install 'loopscope[collector]'")
        return

    def decode(number: int, text: str) -> Problem | None:
        if not any(key in text for key in OTLP_KEYS):
            if any(key in text for key in _OTHER_SIGNALS):
                return None  # logs or metrics written to the same file: not ours to read
            hint = " (this looks like Episode JSONL)" if '"episode_id"' in text else ""
            return Problem(path, number, f"not an OTLP trace export: no resourceSpans{hint}")
        body = text.encode("utf-8", "surrogatepass")
        try:
            spans = decode_request(body, content_type="application/json",
                                   content_encoding=None, max_bytes=len(body) + 1)
        except DecodeError as exc:
            message = re.sub(r" at line 1 column (\d+)", r" (column \1)", str(exc))
            return Problem(path, number, f"OTLP JSON: {message}")
        grouper.add(spans)
        if store is not None:
            store.submit(spans)
        counter[1] += len(spans)
        return None

    counter = [0, 0]  # lines, spans
    bad: list[Problem] = []
    try:
        yield from _otlp_lines(path, decoded_lines(path, bad) if lines is None else lines,
                               decode, counter, progress)
    except OSError as exc:
        yield Problem(path, 0, f"cannot read: {exc.strerror or exc}")
    yield from bad
    if progress is not None and counter[0] >= _PROGRESS_LINES:
        progress.write(f"\rread {counter[0]} lines, {counter[1]} spans from {path}.\n")
        progress.flush()


_PROGRESS_LINES: Final = 200


def _otlp_lines(
    path: str,
    lines: Iterable[str],
    decode: Callable[[int, str], Problem | None],
    counter: list[int],
    progress: TextIO | None,
) -> Iterator[Problem]:
    """One export per line; a first line that is not JSON may open one whole document."""
    stream = iter(lines)
    first_seen = False
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        counter[0] += 1
        if not first_seen:
            first_seen = True
            if not _is_json(line):
                rest = [line, *stream]
                document = "".join(rest)
                if _is_json(document):  # one (pretty-printed) document: line numbers are moot
                    if (problem := decode(number, document)) is not None:
                        yield problem
                    return
                yield Problem(path, number, _json_problem(line))
                for later, text in enumerate(rest[1:], start=number + 1):
                    if text.strip():
                        counter[0] += 1
                        if (problem := decode(later, text)) is not None:
                            yield problem
                return
        if (problem := decode(number, line)) is not None:
            yield problem
        if progress is not None and counter[0] % _PROGRESS_LINES == 0:
            progress.write(f"\rread {counter[0]} lines, {counter[1]} spans from {path}…")
            progress.flush()


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _json_problem(line: str) -> str:
    try:
        json.loads(line)
    except json.JSONDecodeError as exc:
        return f"OTLP JSON: not valid JSON: {exc.msg} (column {exc.colno})"
    return "OTLP JSON: not valid JSON"


# -- spans to episodes ---------------------------------------------------------------------


@dataclass(slots=True)
class EpisodeGrouper:
    """Everything read, assembled into episodes by the live pipeline's rules (``assembly``):
    a span read twice counts once, an MCP call once, a shadow of a loopscope call not at all.
    """

    reading: Reading = field(default_factory=Reading)
    _spans: set[tuple[str, str]] = field(default_factory=set)
    _keys: set[str] = field(default_factory=set)

    def add(self, spans: Iterable[SpanRecord]) -> None:
        unique, _ = assembly.unique_spans(spans)
        fresh = [span for key, span in unique.items() if key not in self._spans]
        self._spans.update(unique)
        read = assembly.read_spans(fresh, lambda keys: self._keys)
        self._keys.update(read.dedup_keys.values())
        self.reading.calls += read.calls
        self.reading.messages += read.messages
        self.reading.roots += read.roots
        self.reading.tasks.update(read.tasks)

    def runs(self) -> list[Run]:
        """The episodes read, in order of their first call (or root)."""
        calls = self.reading.calls
        dropped = {r.span_id for r in assembly.shadowed(calls, assembly.windows(calls))}
        return runs_of([r for r in calls if r.span_id not in dropped], self.reading.roots,
                       self.reading.tasks, self.reading.messages)

    def reports(self, policy: Policy | None = None, *, mode: str = "enforce") -> list[
            EpisodeReport]:
        """Each run through the collector's streaming detection, as a live collector sees it."""
        return list(detect_runs(self.runs(), policy, mode=mode))


def detect_runs(runs: Iterable[Run], policy: Policy | None = None, *,
                mode: str = "enforce") -> Iterator[EpisodeReport]:
    """Each run through the collector's streaming detection, as a live collector sees it."""
    detector = StreamingDetector(policy)
    for run in runs:
        record, rows = run.record, run.steps
        result = detector.add(run.episode_id, rows, task_type=record.task_type)
        monitor = detector.monitor(run.episode_id)
        assert monitor is not None  # just added
        yield detected_report(record, monitor, mode=mode, verdicts=result.verdicts,
                              steps=run.core_steps(), numbers=run.numbers)
        detector.forget(run.episode_id)


