"""OTLP JSON files read after the fact, and the spans in them grouped into ``Episode`` objects.

The reading half of ``loopscope analyze`` over OTLP input, kept apart from ``offline`` (the
command's plug-in) because it is a concept of its own: one ``ExportTraceServiceRequest`` per
line, as the OpenTelemetry Collector's ``file`` exporter writes it, or one whole JSON document.
Spans are decoded (``decode``) and normalised (``normalize``) exactly as the live collector does
it, grouped into episodes the way its pipeline groups them (the rows' episode id, else a
conversation / session id seen in the trace, else the trace id), ordered by start time and
turned into ``Episode`` objects. The dashboard's Import page groups uploaded spans through
``episodes_from_spans`` the same way.

Nothing heavy is imported at import time: ``decode`` and ``normalize`` are imported when a file
is read, so ``loopscope --help`` does not pull the collector extra.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TextIO

from loopscope import conventions as c
from loopscope.analysis import Problem, decoded_lines
from loopscope.detect.replay import Episode

from .detection import KINDS, STATUSES, comparable, sort_key
from .spans import SpanRecord

if TYPE_CHECKING:
    from .offline_store import Store
    from .rows import EpisodeRow, ToolCallRow

__all__ = ["OTLP_KEYS", "EpisodeGrouper", "episodes_from_rows", "episodes_from_spans",
           "read_otlp_file"]

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
        from .decode import DecodeError, decode_request
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
class _Root:
    row: EpisodeRow
    task: str


@dataclass(slots=True)
class EpisodeGrouper:
    """Tool-call rows and episode roots of everything read, grouped as the pipeline does."""

    rows: list[ToolCallRow] = field(default_factory=list)
    roots: list[_Root] = field(default_factory=list)
    dedup: set[str] = field(default_factory=set)

    def add(self, spans: Iterable[SpanRecord]) -> None:
        from .normalize import normalize_span

        for span in spans:
            normalized = normalize_span(span)
            row = normalized.tool_call
            if row is not None:
                key = normalized.extra.get("dedup_key")
                if key is not None:  # one MCP call reported by client and server: keep one
                    if key in self.dedup:
                        continue
                    self.dedup.add(key)
                self.rows.append(row)
            if normalized.episode is not None:
                task = span.attributes.get(c.TASK)
                self.roots.append(_Root(normalized.episode, task if isinstance(task, str) else ""))

    def episodes(self) -> list[Episode]:
        return episodes_from_rows(self.rows, self.roots)


def episodes_from_spans(spans: Iterable[SpanRecord]) -> list[Episode]:
    """The episodes in ``spans``, as ``loopscope analyze`` reads them from OTLP JSON."""
    grouper = EpisodeGrouper()
    grouper.add(spans)
    return grouper.episodes()


def episodes_from_rows(rows: Sequence[ToolCallRow], roots: Sequence[_Root]) -> list[Episode]:
    """Group rows into episodes (the pipeline's rule), order them, build ``Episode`` objects.

    A row's episode id is its own (``loopscope.episode.id``, else a conversation or session
    id on the span), else the id any row or root of its trace carries, else the trace id.
    """

    by_trace: dict[str, str] = {}
    for item in (*rows, *(r.row for r in roots)):
        if item.episode_id:
            by_trace[item.trace_id] = item.episode_id
    calls: dict[str, list[ToolCallRow]] = {}
    for row in rows:
        calls.setdefault(row.episode_id or by_trace.get(row.trace_id, row.trace_id), []).append(
            row)
    heads: dict[str, _Root] = {}
    for root in roots:
        episode_id = root.row.episode_id or by_trace.get(root.row.trace_id, root.row.trace_id)
        heads.setdefault(episode_id, root)
    episodes: list[tuple[int, str, Episode]] = []
    for episode_id in calls.keys() | heads.keys():
        ordered = sorted(calls.get(episode_id, ()), key=sort_key)
        root = heads.get(episode_id)
        first_ns = ordered[0].start_ns if ordered else (root.row.start_ns if root else 0)
        episodes.append((first_ns, episode_id, _episode(episode_id, ordered, root, first_ns)))
    episodes.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in episodes]


def _episode(
    episode_id: str, rows: list[ToolCallRow], root: _Root | None, first_ns: int
) -> Episode:
    meta: dict[str, Any] = {"source": "otlp"}
    traces = sorted({r.trace_id for r in rows} | ({root.row.trace_id} if root else set()))
    meta["trace_ids"] = traces
    first = root.row if root is not None else (rows[0] if rows else None)
    if first is not None:
        meta["service"] = first.service
    if root is not None:
        for name in ("agent", "model", "stop_reason", "guard_mode", "cost_usd"):
            value = getattr(root.row, name)
            if value is not None:
                meta[name] = value
    return Episode(
        episode_id=episode_id,
        steps=tuple(_step(row, first_ns) for row in rows),
        task_type=root.row.task_type if root is not None else None,
        outcome=root.row.outcome if root is not None else None,
        meta=meta,
        task=root.task if root is not None else "",
    )


def _step(row: ToolCallRow, first_ns: int) -> dict[str, Any]:
    """One tool-call row as an Episode tool step (what the collector's detection is fed)."""
    args, signature, digest = comparable(row)
    step: dict[str, Any] = {
        "type": "tool",
        "tool": row.tool,
        "tool_call_id": row.call_id,
        "kind": row.kind if row.kind in KINDS else None,
        "args": args,
        "output": row.output_text,
        "status": row.status if row.status in STATUSES else "ok",
        "t": max(row.start_ns - first_ns, 0) / 1e9,
        "signature": signature,
        "output_hash": digest,
        "span_id": row.span_id,
    }
    for name in ("idempotency_key", "intent", "deadline_s", "turn", "reconciles", "found"):
        if getattr(row, name) is not None and getattr(row, name) != "":
            step[name] = getattr(row, name)
    if row.tokens_in or row.tokens_out:
        step["tokens_in"], step["tokens_out"] = row.tokens_in, row.tokens_out
    return step
