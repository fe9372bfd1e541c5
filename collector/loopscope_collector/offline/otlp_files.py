"""OTLP JSON files read after the fact, and the spans in them grouped into ``Episode`` objects.

The reading half of ``loopscope analyze`` over OTLP input, kept apart from ``analyze`` (the
command's plug-in) because it is a concept of its own: one ``ExportTraceServiceRequest`` per
line, as the OpenTelemetry Collector's ``file`` exporter writes it, or one whole JSON document.
Spans are decoded (``receive.decode``) and normalised (``normalize``) exactly as the live
collector does it, grouped into episodes the way its pipeline groups them (the rows' episode id, else a
conversation / session id seen in the trace, else the trace id), ordered by start time and
turned into ``Episode`` objects. The dashboard's Import page groups uploaded spans through
``episodes_from_spans`` the same way.

Nothing heavy is imported at import time: ``decode`` and ``normalize`` are imported when a file
is read, so ``loopscope --help`` does not pull the collector extra.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TextIO

from loopscope.detect.events import STATUSES, TOOL_KINDS
from loopscope.detect.policy import Policy
from loopscope.detect.replay import EpisodeRecord, EpisodeReport
from loopscope.offline.analysis import Problem, decoded_lines

from ..normalize import assembly
from ..normalize.assembly import Reading
from ..normalize.rows import EpisodeRow, MessageRow, ToolCallRow
from ..normalize.spans import SpanRecord
from ..normalize.steps import output_digest
from ..pipeline.detection import StreamingDetector, detected_report

if TYPE_CHECKING:
    from .store import Store

__all__ = ["OTLP_KEYS", "EpisodeGrouper", "Run", "detect_runs", "episodes_from_rows", "episodes_from_spans",
           "read_otlp_file", "runs_of"]

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
class Run:
    """One episode read after the fact: its calls in order, its messages, and its root, if
    one was read."""

    episode_id: str
    calls: list[ToolCallRow]
    root: EpisodeRow | None = None
    task: str = ""
    messages: list[MessageRow] = field(default_factory=list)

    @property
    def steps(self) -> list[ToolCallRow | MessageRow]:
        """Calls and messages in the order detection takes them (``assembly.sort_key``)."""
        return sorted([*self.calls, *self.messages], key=assembly.sort_key)

    @property
    def episode(self) -> EpisodeRecord:
        """The run as an ``Episode``: its tool calls and messages as steps (what reports
        name and count)."""
        return _episode(self)


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

    def episodes(self) -> list[EpisodeRecord]:
        return [run.episode for run in self.runs()]

    def reports(self, policy: Policy | None = None, *, mode: str = "enforce") -> list[
            EpisodeReport]:
        """Each run through the collector's streaming detection, as a live collector sees it."""
        return list(detect_runs(self.runs(), policy, mode=mode))


def detect_runs(runs: Iterable[Run], policy: Policy | None = None, *,
                mode: str = "enforce") -> Iterator[EpisodeReport]:
    """Each run through the collector's streaming detection, as a live collector sees it."""
    detector = StreamingDetector(policy)
    for run in runs:
        task_type = run.root.task_type if run.root is not None else None
        result = detector.add(run.episode_id, run.steps, task_type=task_type)
        monitor = detector.monitor(run.episode_id)
        assert monitor is not None  # just added
        yield detected_report(run.episode, monitor, mode=mode, verdicts=result.verdicts)
        detector.forget(run.episode_id)


def episodes_from_spans(spans: Iterable[SpanRecord]) -> list[EpisodeRecord]:
    """The episodes in ``spans``, as ``loopscope analyze`` reads them from OTLP JSON."""
    grouper = EpisodeGrouper()
    grouper.add(spans)
    return grouper.episodes()


def episodes_from_rows(rows: Sequence[ToolCallRow], roots: Sequence[EpisodeRow] = (),
                       messages: Sequence[MessageRow] = ()) -> list[EpisodeRecord]:
    """Stored tool calls (and roots, and messages) as ``Episode`` objects, grouped by the
    pipeline's rules."""
    return [run.episode for run in runs_of(list(rows), list(roots), {}, messages)]


def runs_of(calls: list[ToolCallRow], roots: list[EpisodeRow],
            tasks: Mapping[str, str], messages: Sequence[MessageRow] = ()) -> list[Run]:
    """Calls, messages and roots grouped into runs (``assembly``: episode ids, call order)."""
    assembly.resolve_episodes(calls, roots)
    groups = assembly.by_episode(calls)
    said: dict[str, list[MessageRow]] = {}
    for message in messages:
        said.setdefault(message.episode_id, []).append(message)
    heads: dict[str, EpisodeRow] = {}
    for root in roots:
        heads.setdefault(root.episode_id, root)
    runs = []
    for episode_id in groups.keys() | heads.keys() | said.keys():
        head = heads.get(episode_id)
        runs.append(Run(episode_id, groups.get(episode_id, []), head,
                        tasks.get(head.span_id, "") if head is not None else "",
                        said.get(episode_id, [])))

    def first_ns(run: Run) -> int:
        if run.calls or run.messages:
            return run.steps[0].start_ns
        return run.root.start_ns if run.root is not None else 0

    runs.sort(key=lambda run: (first_ns(run), run.episode_id))
    return runs


def _episode(run: Run) -> EpisodeRecord:
    rows, root, steps = run.calls, run.root, run.steps
    first_ns = steps[0].start_ns if steps else (root.start_ns if root is not None else 0)
    meta: dict[str, Any] = {"source": "otlp"}
    traces = sorted({r.trace_id for r in rows} | ({root.trace_id} if root else set()))
    meta["trace_ids"] = traces
    first = root if root is not None else (rows[0] if rows else None)
    if first is not None:
        meta["service"] = first.service
    if root is not None:
        for name in ("agent", "model", "stop_reason", "guard_mode", "cost_usd"):
            value = getattr(root, name)
            if value is not None:
                meta[name] = value
    return EpisodeRecord(
        episode_id=run.episode_id,
        steps=tuple(_step(row, first_ns) if isinstance(row, ToolCallRow)
                    else _message_step(row, first_ns) for row in steps),
        task_type=root.task_type if root is not None else None,
        outcome=root.outcome if root is not None else None,
        meta=meta,
        task=run.task,
    )


def _message_step(row: MessageRow, first_ns: int) -> dict[str, Any]:
    """One message row as an Episode message step."""
    step: dict[str, Any] = {"type": "message", "role": row.role, "content": row.content or "",
                            "t": max(row.start_ns - first_ns, 0) / 1e9, "span_id": row.span_id}
    if row.tokens:
        step["tokens_out"] = row.tokens
    return step


def _step(row: ToolCallRow, first_ns: int) -> dict[str, Any]:
    """One tool-call row as an Episode tool step, for reports and replays under another
    policy: what the span recorded of the call, which the core identifies as the collector
    does (``steps.recorded_call``): decoded arguments, else the argument text the span cut
    short and its signature, else the signature alone (or a call like no other).
    """
    step: dict[str, Any] = {
        "type": "tool",
        "tool": row.tool,
        "tool_call_id": row.call_id,
        "kind": row.kind if row.kind in TOOL_KINDS else None,
        "output": row.output_text,
        "status": row.status if row.status in STATUSES else "ok",
        "t": max(row.start_ns - first_ns, 0) / 1e9,
        "output_hash": output_digest(row),
        **({"duration_s": (row.end_ns - row.start_ns) / 1e9} if row.end_ns > row.start_ns
           else {}),
        "span_id": row.span_id,
    }
    if row.args_text is None:
        step["signature"] = row.signature or f"nosig:{row.span_id}"
    else:
        try:
            step["args"] = json.loads(row.args_text)
        except ValueError:
            step["args_text"] = row.args_text
        if row.signature:
            step["signature"] = row.signature
    for name in ("idempotency_key", "intent", "deadline_s", "deadline_stated", "turn",
                 "reconciles", "found"):
        if getattr(row, name) is not None and getattr(row, name) != "":
            step[name] = getattr(row, name)
    if row.tokens_in or row.tokens_out:
        step["tokens_in"], step["tokens_out"] = row.tokens_in, row.tokens_out
    return step
