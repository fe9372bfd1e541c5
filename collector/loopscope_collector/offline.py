"""After the fact: ``loopscope analyze`` over OTLP JSON files, and ``--db`` into a DuckDB store.

Registered through the ``loopscope.commands`` entry point (``analyze-otlp``), so the
agent-side package never imports the collector. ``register`` extends the existing
``analyze`` subcommand instead of adding one:

- ``--format otlp`` (and ``auto``, per file) reads OTLP JSON: one ``ExportTraceServiceRequest``
  per line, as the OpenTelemetry Collector's ``file`` exporter writes it, or one whole JSON
  document. Spans are decoded (``decode``) and normalised (``normalize``) exactly as the live
  collector does it, grouped into episodes the way its pipeline groups them (the rows'
  episode id, else a conversation / session id seen in the trace, else the trace id), ordered
  by start time and turned into ``Episode`` objects, so the one ``analyze`` / ``replay`` path
  reports them with the same ``--json`` shape. A malformed line is a ``FILE:LINE`` problem,
  skipped, and the exit status is 1, as for Episode JSONL.
- ``--db FILE`` also stores everything through the collector's real ``Pipeline`` (so the
  store holds what a running collector would have stored: spans, tool calls, episodes,
  detections). OTLP spans are stored as they are; an Episode JSONL run becomes synthetic
  spans shaped like loopscope's own ``invoke_agent`` / ``execute_tool`` spans, with trace
  and span ids derived from the episode id and step index, so re-running stores nothing
  twice. A store locked by a running collector is refused with a clear message.

Nothing heavy is imported at registration: the plain ``analyze`` keeps working over Episode
JSONL when the collector extra (duckdb, protobuf) is not installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from loopscope import conventions as c
from loopscope.analysis import Problem, analyze, as_json, as_text, read_episodes
from loopscope.detect.fingerprint import call_signature, canonical_json, output_hash, output_text
from loopscope.detect.policy import Policy
from loopscope.detect.replay import Episode, EpisodeFormatError, parse_episode_line

from .detection import KINDS, STATUSES, comparable, sort_key
from .spans import SpanRecord

if TYPE_CHECKING:
    from .pipeline import Job, Pipeline
    from .rows import EpisodeRow, ToolCallRow
    from .storage import Database

__all__ = ["episode_spans", "episodes_from_spans", "read_inputs", "register"]

EXIT_OK, EXIT_BAD_INPUT, EXIT_USAGE = 0, 1, 2
FORMATS: Final = ("auto", "episodes", "otlp")
SCOPE: Final = "loopscope.offline"
CHUNK_SPANS: Final = 5_000
"""Spans per pipeline job: well under the pipeline's queue limit."""
IN_FLIGHT_SPANS: Final = 40_000
"""Spans submitted but not yet committed before the reader waits for the pipeline."""
STORE_TIMEOUT_S: Final = 600.0
_SNIFF_CHARS: Final = 65_536
_OTLP_KEYS: Final = ('"resourceSpans"', '"resource_spans"')
_OTHER_SIGNALS: Final = tuple(
    f'"{key}"' for name in ("Logs", "Metrics", "Profiles")
    for key in (f"resource{name}", f"resource_{name.lower()}")
)
_OTLP_IN_EPISODES: Final = ("this is an OTLP JSON line in a file read as Episode JSONL "
                            "(its first line decided); read OTLP files on their own")

HELP_OTLP = """\
OTLP JSON is read too (--format otlp, or detected per file by auto): one
ExportTraceServiceRequest per line, as the OpenTelemetry Collector's file exporter writes it,
or one whole JSON document. Tool-call spans are grouped into episodes as the collector groups
them (episode id, else conversation / session id, else trace id) and reported the same way.

--db FILE also stores the runs in a loopscope DuckDB store (created if missing) through the
collector's pipeline, for the dashboard: OTLP spans as they are, Episode JSONL runs as
synthetic loopscope spans with ids derived from the episode id, so re-running stores nothing
twice. A store locked by a running collector is refused.

"""
EXAMPLE_OTLP = "  loopscope analyze otel-traces.jsonl --db runs.duckdb\n"


# -- registration --------------------------------------------------------------------------


def register(sub: Any) -> None:
    """Extend ``loopscope analyze`` with OTLP JSON input and ``--db`` (see the module doc)."""
    parser = getattr(sub, "choices", {}).get("analyze")
    if parser is None or getattr(parser.get_default("func"), "offline", False):
        return
    for action in parser._actions:
        if action.dest == "format":
            action.choices = FORMATS
            action.help = ("input format: episodes (Episode JSONL), otlp (OTLP JSON lines) "
                           "or auto, detected per file (default: auto)")
        elif action.dest == "files":
            action.help = "Episode JSONL or OTLP JSON file(s); - for stdin"
    for choice in getattr(sub, "_choices_actions", ()):
        if choice.dest == "analyze":
            choice.help = "report loops in recorded runs (Episode JSONL or OTLP JSON)"
    description = parser.description or ""
    head, marker, examples = description.partition("Example:\n")
    parser.description = (head + HELP_OTLP + marker + examples + EXAMPLE_OTLP if marker
                          else description + "\n" + HELP_OTLP)
    parser.add_argument(
        "--db", metavar="FILE",
        help="also store the runs in this loopscope DuckDB file (for the dashboard)",
    )
    original = parser.get_default("func")

    def run(args: argparse.Namespace) -> int:
        return cmd_analyze(args, original=original)

    run.offline = True  # type: ignore[attr-defined]
    parser.set_defaults(func=run)


def cmd_analyze(
    args: argparse.Namespace, *, original: Callable[[argparse.Namespace], int] | None = None
) -> int:
    """``loopscope analyze`` with OTLP input and ``--db``; plain Episode JSONL is unchanged."""
    if args.format == "episodes" and not args.db and original is not None:
        return int(original(args))
    from .cli import read_policy

    policy = read_policy(args.policy)
    tty = sys.stderr.isatty()
    store: Store | None = None
    if args.db:
        try:
            store = Store.open(args.db, policy=policy)
        except StoreError as exc:
            print(f"loopscope analyze: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    try:
        items = read_inputs(args.files, fmt=args.format, store=store,
                            progress=sys.stderr if tty else None)
        reports, problems = analyze(items, policy=policy, mode=args.mode,
                                    progress=sys.stderr if tty and not args.json else None)
        counts = (store.finish(r.episode.episode_id for r in reports)
                  if store is not None else None)
    except StoreError as exc:
        print(f"loopscope analyze: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if store is not None:
            store.close()
    for problem in problems:
        print(f"loopscope analyze: {problem}", file=sys.stderr)
    render = as_json if args.json else as_text
    print(render(reports, problems, mode=args.mode))
    if counts is not None:
        print(f"loopscope analyze: {counts}", file=sys.stderr if args.json else sys.stdout)
    return EXIT_BAD_INPUT if problems else EXIT_OK


# -- reading -------------------------------------------------------------------------------


def read_inputs(
    paths: Sequence[str],
    *,
    fmt: str = "auto",
    store: Store | None = None,
    progress: TextIO | None = None,
) -> Iterator[Episode | Problem]:
    """Every episode of every file (Episode JSONL or OTLP JSON), or a ``Problem`` per bad line.

    Episode JSONL episodes come in file order; the episodes of all OTLP input come after them
    once every file is read (a trace may span files, as the collector's file exporter rotates
    them). With ``store``, everything read is also stored.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    grouper: _Grouper | None = None
    for path in paths:
        lines: list[str] | None = None
        kind = fmt
        if path == "-":
            lines = list(sys.stdin)
        if fmt == "auto":
            kind = _sniff(path, lines)
        if kind == "otlp":
            grouper = grouper or _Grouper()
            yield from _read_otlp(path, lines, grouper, store, progress)
            continue
        source = _episode_lines(path, lines) if lines is not None else read_episodes(
            [path], fmt="episodes")
        service = "stdin" if path == "-" else Path(path).stem
        for ordinal, item in enumerate(source):
            if (fmt == "auto" and isinstance(item, Problem)
                    and item.message.startswith("this is an OTLP JSON line")):
                item = Problem(item.path, item.line, _OTLP_IN_EPISODES)
            if store is not None and isinstance(item, Episode):
                store.submit(episode_spans(item, service=service, policy=store.policy,
                                           base_ns=store.started_ns + ordinal * 1_000_000))
            yield item
    if grouper is not None:
        yield from grouper.episodes()


def _sniff(path: str, lines: list[str] | None) -> str:
    """``otlp`` when the file's first line is an OTLP export (or it is one JSON document)."""
    if lines is not None:
        head = "".join(lines)[:_SNIFF_CHARS]
    else:
        try:
            with Path(path).open(encoding="utf-8") as handle:
                head = handle.read(_SNIFF_CHARS)
        except (OSError, UnicodeDecodeError):
            return "episodes"  # read_episodes reports it as FILE:0
    first = next((line for line in head.splitlines() if line.strip()), "")
    try:
        doc = json.loads(first)
    except ValueError:  # a pretty-printed document, or a broken / truncated line
        return "otlp" if any(key in head for key in _OTLP_KEYS) else "episodes"
    if isinstance(doc, dict) and ("resourceSpans" in doc or "resource_spans" in doc):
        return "otlp"
    return "episodes"


def _episode_lines(path: str, lines: Iterable[str]) -> Iterator[Episode | Problem]:
    """Episode JSONL from lines already read (standard input), as ``read_episodes`` does."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield parse_episode_line(line)
        except EpisodeFormatError as exc:
            message = str(exc)
            if any(key in line[:200] for key in _OTLP_KEYS):
                message = _OTLP_IN_EPISODES
            yield Problem(path, number, message)


def _read_otlp(
    path: str,
    lines: list[str] | None,
    grouper: _Grouper,
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
        if not any(key in text for key in _OTLP_KEYS):
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
    try:
        if lines is None:
            with Path(path).open(encoding="utf-8") as handle:
                yield from _otlp_lines(path, handle, decode, counter, progress)
        else:
            yield from _otlp_lines(path, lines, decode, counter, progress)
    except OSError as exc:
        yield Problem(path, 0, f"cannot read: {exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        yield Problem(path, 0, f"not UTF-8 text: {exc.reason}")
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
class _Grouper:
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
    grouper = _Grouper()
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
    for name in ("idempotency_key", "intent"):
        if getattr(row, name):
            step[name] = getattr(row, name)
    if row.tokens_in or row.tokens_out:
        step["tokens_in"], step["tokens_out"] = row.tokens_in, row.tokens_out
    return step


# -- episodes to spans ---------------------------------------------------------------------


def _hex(*parts: object, size: int) -> str:
    text = "\x00".join(str(p) for p in (SCOPE, *parts))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[: 2 * size]
    return digest if digest.strip("0") else "1".rjust(2 * size, "0")


def episode_spans(
    episode: Episode, *, service: str, policy: Policy | None = None, base_ns: int = 0
) -> list[SpanRecord]:
    """An Episode as spans shaped like loopscope's own: one ``invoke_agent`` root and one
    ``execute_tool`` span per tool step, with the attributes the collector reads.

    Trace and span ids are derived from the episode id and the step index, so storing the
    same episode again stores nothing new. Step ``t`` (seconds) is added to ``base_ns``, or
    used as it is when it already looks like a Unix time; start times strictly increase, so
    the collector orders the calls as the episode lists them.
    """
    policy = policy or Policy()
    trace_id = _hex(episode.episode_id, size=16)
    root_id = _hex(episode.episode_id, "root", size=8)
    resource = {"service.name": service, "telemetry.sdk.name": SCOPE}
    spans: list[SpanRecord] = []
    clock: int | None = None
    tokens_in = tokens_out = turns = 0
    for index, step in enumerate(episode.steps):
        t = step.get("t")
        at = base_ns if clock is None else clock + 1
        if isinstance(t, int | float) and not isinstance(t, bool):
            at = int(t * 1e9) if t > 1e9 else base_ns + int(t * 1e9)
        clock = at if clock is None else max(clock + 1, at)
        tokens_in += _int(step.get("tokens_in"))
        tokens_out += _int(step.get("tokens_out"))
        if step.get("type") != "tool":
            turns += step.get("role") == "assistant"
            continue
        spans.append(_tool_span(episode, step, index, policy, trace_id, root_id, clock,
                                resource))
    attributes: dict[str, Any] = {
        c.GEN_AI_OPERATION_NAME: c.OP_INVOKE_AGENT,
        c.EPISODE_ID: episode.episode_id,
        c.OUTCOME: episode.outcome or "unknown",
        c.TOOL_CALLS: len(spans),
        c.MODEL_TURNS: turns,
        c.GEN_AI_USAGE_INPUT_TOKENS: tokens_in,
        c.GEN_AI_USAGE_OUTPUT_TOKENS: tokens_out,
    }
    if episode.task_type:
        attributes[c.TASK_TYPE] = episode.task_type
    if episode.task:
        attributes[c.TASK] = episode.task[:4000]
    if episode.cost_usd is not None:
        attributes[c.COST_USD] = episode.cost_usd
    model = episode.meta.get("model")
    if isinstance(model, str) and model:
        attributes[c.GEN_AI_REQUEST_MODEL] = model
    start = min(s.start_ns for s in spans) if spans else base_ns
    end = (clock if clock is not None else base_ns) + 1
    spans.insert(0, SpanRecord(trace_id, root_id, "", c.OP_INVOKE_AGENT, start, end,
                               kind=1, attributes=attributes, resource=resource,
                               scope_name=SCOPE))
    return spans


def _tool_span(
    episode: Episode, step: Any, index: int, policy: Policy, trace_id: str, root_id: str,
    start_ns: int, resource: dict[str, Any],
) -> SpanRecord:
    tool = str(step["tool"])
    args = step.get("args")
    args_text = canonical_json({} if args is None else args, exclude=policy.volatile_for(tool))
    signature = step.get("signature") if isinstance(step.get("signature"), str) else ""
    output = step.get("output")
    shown = None if output is None else output_text(output)
    recorded = step.get("output_hash") if isinstance(step.get("output_hash"), str) else ""
    status = step.get("status") or "ok"
    attributes: dict[str, Any] = {
        c.GEN_AI_OPERATION_NAME: c.OP_EXECUTE_TOOL,
        c.GEN_AI_TOOL_NAME: tool,
        c.GEN_AI_TOOL_TYPE: "function",
        c.EPISODE_ID: episode.episode_id,
        c.STEP: index,
        c.SIGNATURE: signature or call_signature(tool, args_text),
        c.ARGS_SIZE: len(args_text),
        c.CONTENT_CAPTURED: True,
        c.GEN_AI_TOOL_CALL_ARGUMENTS: args_text,
        c.STATUS: status,
        c.OUTPUT_HASH: recorded or output_hash(shown or ""),
        c.OUTPUT_SIZE: len(shown or ""),
    }
    if step.get("tool_call_id"):
        attributes[c.GEN_AI_TOOL_CALL_ID] = str(step["tool_call_id"])
    if step.get("kind"):
        attributes[c.TOOL_KIND] = step["kind"]
    if isinstance(step.get("idempotency_key"), str) and step["idempotency_key"]:
        attributes[c.IDEMPOTENCY_KEY] = step["idempotency_key"]
    if shown is not None:
        attributes[c.GEN_AI_TOOL_CALL_RESULT] = shown
    for key, name in (("tokens_in", c.GEN_AI_USAGE_INPUT_TOKENS),
                      ("tokens_out", c.GEN_AI_USAGE_OUTPUT_TOKENS)):
        if _int(step.get(key)):
            attributes[name] = _int(step.get(key))
    failed = status in ("error", "timeout")
    return SpanRecord(
        trace_id, _hex(episode.episode_id, index, size=8), root_id,
        f"{c.OP_EXECUTE_TOOL} {tool}", start_ns, start_ns, kind=1,
        status_code=2 if failed else 0,
        status_message=(shown or status)[:200] if failed else "",
        attributes=attributes, resource=resource, scope_name=SCOPE,
    )


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


# -- the store -----------------------------------------------------------------------------


class StoreError(RuntimeError):
    """The DuckDB store cannot be opened or written; the message says why."""


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """What one run stored, and what the store holds for the episodes it read."""

    path: str
    spans_new: int
    spans_duplicate: int
    episodes: int
    tool_calls: int
    detections: int

    def __str__(self) -> str:
        return (f"stored in {self.path}: {self.episodes} episodes, {self.tool_calls} tool "
                f"calls, {self.detections} detections ({self.spans_new} new spans, "
                f"{self.spans_duplicate} already stored)")


class Store:
    """A DuckDB store written through the collector's ``Pipeline``, as a collector would."""

    def __init__(self, db: Database, pipeline: Pipeline, policy: Policy) -> None:
        self.db = db
        self.pipeline = pipeline
        self.policy = policy
        self.started_ns = time.time_ns()
        self._jobs: deque[Job] = deque()
        self._in_flight = 0
        self._closed = False

    @classmethod
    def open(cls, path: str, *, policy: Policy | None = None) -> Store:
        """Open (creating and migrating) ``path`` and start a pipeline on it.

        Raises:
            StoreError: the collector extra is missing, the file is locked by a running
                collector, or it is not a loopscope store this version can write.
        """
        try:
            import duckdb

            from .pipeline import Pipeline
            from .storage import SchemaError, open_database
        except ImportError as exc:
            raise StoreError(f"--db needs the collector extra ({exc.name} is missing): "
                             "pip install 'loopscope[collector]'") from None
        try:
            db = open_database(path)
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise StoreError(
                    f"{path} is locked by another process (a running `loopscope collector`?). "
                    "Stop it first, or write to another file and browse that one"
                ) from None
            raise StoreError(f"cannot open {path}: {exc}") from None
        except (duckdb.Error, SchemaError) as exc:
            raise StoreError(f"cannot use {path} as a loopscope store: {exc}") from None
        policy = policy or Policy()
        return cls(db, Pipeline(db, policy=policy).start(), policy)

    def submit(self, spans: Sequence[SpanRecord]) -> None:
        """Queue spans for storing; waits when too many are still being stored."""
        for start in range(0, len(spans), CHUNK_SPANS):
            chunk = list(spans[start:start + CHUNK_SPANS])
            self._jobs.append(self.pipeline.submit(chunk))
            self._in_flight += len(chunk)
            while self._in_flight > IN_FLIGHT_SPANS:
                self._wait_oldest()

    def _wait_oldest(self) -> None:
        job = self._jobs.popleft()
        self._in_flight -= len(job.spans)
        try:
            job.wait(STORE_TIMEOUT_S)
        except Exception as exc:
            raise StoreError(f"storing into {self.db.path} failed: {exc}") from exc

    def finish(self, episode_ids: Iterable[str] = ()) -> StoreCounts:
        """Wait until everything submitted is committed; count what the store holds for
        ``episode_ids`` (the episodes the run read)."""
        import pyarrow as pa

        while self._jobs:
            self._wait_oldest()
        self.pipeline.stop(STORE_TIMEOUT_S)
        self._closed = True
        stats = self.pipeline.stats
        cur = self.db.cursor()
        cur.register("offline_episodes", pa.table({"episode_id": sorted(set(episode_ids))}))
        try:
            counts = [cur.execute(f"select count(*) from {table} join offline_episodes "
                                  "using (episode_id)").fetchall()[0][0]
                      for table in ("episodes", "tool_calls", "detections")]
        finally:
            cur.unregister("offline_episodes")
            cur.close()
        return StoreCounts(self.db.path, stats.spans_stored, stats.spans_duplicate, *counts)

    def close(self) -> None:
        """Stop the pipeline (if still running) and close the file."""
        if not self._closed:
            self.pipeline.stop(STORE_TIMEOUT_S)
            self._closed = True
        self.db.close()
