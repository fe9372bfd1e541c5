"""After the fact: ``loopscope analyze`` over OTLP JSON files, and ``--db`` into a DuckDB store.

The collector's part of ``loopscope analyze``, given to the SDK's command through the
``loopscope.analyze`` entry point (``ANALYZE``, an ``AnalyzeInputs``), so the agent-side
package owns the command and never imports the collector:

- ``--format otlp`` (and ``auto``, per file) reads OTLP JSON: one ``ExportTraceServiceRequest``
  per line, as the OpenTelemetry Collector's ``file`` exporter writes it, or one whole JSON
  document. Spans are decoded (``decode``) and assembled into episodes by the live
  pipeline's own rules (``assembly``), and each episode goes through the collector's
  streaming detection (``pipeline.detection``): after the fact is judged as live. Reports have the
  ``--json`` shape of Episode JSONL. A malformed line is a ``FILE:LINE`` problem, skipped,
  and the exit status is 1, as for Episode JSONL.
- ``--db FILE`` stores everything through the collector's real ``Pipeline`` (so the store
  holds what a running collector would have stored: spans, tool calls, episodes,
  detections, messages), and the report printed is what the store's detection found: it
  runs once, in the pipeline (a run the store already held keeps its stored flags; the
  report re-judges it under ``--policy``). OTLP spans are stored as they are; an Episode JSONL run becomes synthetic spans
  shaped like loopscope's own ``invoke_agent`` / ``execute_tool`` spans, with trace and span
  ids derived from the episode id and step index, so re-running stores nothing twice. A
  store locked by a running collector is refused with a clear message.

Nothing heavy is imported at import time: the plain ``analyze`` keeps working over Episode
JSONL when the collector extra (duckdb, protobuf) is not installed.

This module is the command's half (the hook, which reader each file gets). The OTLP reading
and grouping live in ``otlp_files``, the Episode-to-spans conversion in ``synthetic_spans``
and the ``--db`` store in ``offline.store``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final, TextIO

from loopscope.detect.policy import Policy
from loopscope.detect.replay import (
    EpisodeFormatError,
    EpisodeRecord,
    EpisodeReport,
    parse_episode_line,
)
from loopscope.exit_codes import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE
from loopscope.offline.analysis import (
    AnalyzeInputs,
    Problem,
    analyze,
    as_json,
    as_text,
    read_episodes,
)

from .otlp_files import OTLP_KEYS, EpisodeGrouper, detect_runs, read_otlp_file
from .store import Store, StoreCounts, StoreError
from .synthetic_spans import episode_spans

__all__ = ["ANALYZE", "analyze_inputs", "read_inputs"]

FORMATS: Final = ("auto", "episodes", "otlp")
_SNIFF_CHARS: Final = 65_536
_OTLP_IN_EPISODES: Final = ("this is an OTLP JSON line in a file read as Episode JSONL "
                            "(its first line decided); read OTLP files on their own")

HELP_OTLP = """\
OTLP JSON is read too (--format otlp, or detected per file by auto): one
ExportTraceServiceRequest per line, as the OpenTelemetry Collector's file exporter writes it,
or one whole JSON document. Spans become tool calls and episodes by the live collector's
rules (episode id, else conversation / session id, else trace id; a span sent twice, an MCP
call reported by client and server, a framework's span inside a loopscope tool span count
once) and are judged by its streaming detection, so a file gives the flags a running
collector would have stored. A span's arguments are compared under --policy (volatile
arguments left out), as live.

--db FILE also stores the runs in a loopscope DuckDB store (created if missing) through the
collector's pipeline, for the dashboard: OTLP spans as they are, Episode JSONL runs as
synthetic loopscope spans with ids derived from the episode id, so re-running stores nothing
twice. Detection then runs once, in the store's pipeline, and the report is what it finds:
messages included, the same flags as without --db. A run the store already held is not
stored again: it keeps the flags stored the first time, and the report re-judges it under
--policy. A store locked by a running collector is refused.

"""
EXAMPLE_OTLP = "  loopscope analyze otel-traces.jsonl --db runs.duckdb\n"


# -- the analyze hook ----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--db``: the option the collector adds to ``loopscope analyze``."""
    parser.add_argument(
        "--db", metavar="FILE",
        help="also store the runs in this loopscope DuckDB file (created if missing; for "
             "loopscope dashboard --db); the report is what the store's detection finds in "
             "them under --policy",
    )


def cmd_analyze(args: argparse.Namespace) -> int:
    """``loopscope analyze`` over Episode JSONL and OTLP JSON, with ``--db``."""
    from loopscope.policy_file import load_policy

    policy = load_policy(args.policy) if args.policy else None
    tty = sys.stderr.isatty()
    store: Store | None = None
    if args.db:
        try:
            store = Store.open(args.db, policy=policy)
        except StoreError as exc:
            print(f"loopscope analyze: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    try:
        reports, problems, counts = analyze_inputs(
            args.files, fmt=args.format, policy=policy, mode=args.mode, store=store,
            progress=sys.stderr if tty and not args.json else None)
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


ANALYZE: Final = AnalyzeInputs(
    formats=("otlp",),
    format_help=("input format: episodes (Episode JSONL), otlp (OTLP JSON lines) or auto, "
                 "detected per file (default: auto)"),
    files_help="Episode JSONL or OTLP JSON file(s); - for stdin",
    command_help="report loops in recorded runs (Episode JSONL or OTLP JSON)",
    description=HELP_OTLP,
    example=EXAMPLE_OTLP,
    add_arguments=add_arguments,
    run=cmd_analyze,
)
"""What the collector adds to ``loopscope analyze`` (the ``loopscope.analyze`` entry point)."""


def analyze_inputs(
    paths: Sequence[str],
    *,
    fmt: str = "auto",
    policy: Policy | None = None,
    mode: str = "enforce",
    store: Store | None = None,
    progress: TextIO | None = None,
    on_report: Callable[[int, int], None] | None = None,
) -> tuple[list[EpisodeReport], list[Problem], StoreCounts | None]:
    """Read every file and report each run, the way ``loopscope analyze`` does.

    Episode JSONL runs are replayed through the core (messages included) and OTLP runs go
    through the collector's streaming detection, as a live collector judges them. With
    ``store``, everything read is stored through the collector's pipeline, detection runs
    there once, and the reports are what its detection found. ``on_report(done, total)`` is
    called after each run reported.
    """
    grouper = EpisodeGrouper()
    episodes: list[EpisodeRecord] = []
    problems: list[Problem] = []
    for item in read_inputs(paths, fmt=fmt, store=store, progress=progress, grouper=grouper):
        if isinstance(item, Problem):
            problems.append(item)
        else:
            episodes.append(item)
    runs = grouper.runs()
    total = len(episodes) + len(runs)

    def done(count: int) -> None:
        if on_report is not None:
            on_report(count, total)

    if store is not None:
        stored = [*episodes, *(run.episode for run in runs)]
        counts = store.finish(e.episode_id for e in stored)
        reports = []
        for episode in stored:
            reports.append(store.report(episode, mode=mode))
            done(len(reports))
        return reports, problems, counts
    reports, _ = analyze(episodes, policy=policy, mode=mode, progress=progress, on_report=done)
    for report in detect_runs(runs, policy, mode=mode):
        reports.append(report)
        done(len(reports))
    return reports, problems, None


# -- reading -------------------------------------------------------------------------------


def read_inputs(
    paths: Sequence[str],
    *,
    fmt: str = "auto",
    store: Store | None = None,
    progress: TextIO | None = None,
    grouper: EpisodeGrouper | None = None,
) -> Iterator[EpisodeRecord | Problem]:
    """Every Episode JSONL episode of every file, or a ``Problem`` per bad line; OTLP JSON
    spans go into ``grouper`` (a trace may span files, as the collector's file exporter
    rotates them; its episodes are complete once every file is read). Without a grouper,
    the OTLP episodes come last. With ``store``, everything read is also stored.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    own = grouper is None
    grouper = grouper or EpisodeGrouper()
    for path in paths:
        lines: list[str] | None = None
        kind = fmt
        if path == "-":
            lines = list(sys.stdin)
        if fmt == "auto":
            kind = _sniff(path, lines)
        if kind == "otlp":
            yield from read_otlp_file(path, lines, grouper, store, progress)
            continue
        source = _episode_lines(path, lines) if lines is not None else read_episodes(
            [path], fmt="episodes")
        service = "stdin" if path == "-" else Path(path).stem
        for ordinal, item in enumerate(source):
            if (fmt == "auto" and isinstance(item, Problem)
                    and item.message.startswith("this is an OTLP JSON line")):
                item = Problem(item.path, item.line, _OTLP_IN_EPISODES)
            if store is not None and isinstance(item, EpisodeRecord):
                store.submit(episode_spans(item, service=service, policy=store.policy,
                                           base_ns=store.started_ns + ordinal * 1_000_000))
            yield item
    if own:
        yield from grouper.episodes()


def _sniff(path: str, lines: list[str] | None) -> str:
    """``otlp`` when the file's first line is an OTLP export (or it is one JSON document)."""
    if lines is not None:
        head = "".join(lines)[:_SNIFF_CHARS]
    else:
        try:
            with Path(path).open(encoding="utf-8-sig", errors="replace") as handle:
                head = handle.read(_SNIFF_CHARS)  # a bad byte is reported by its line later
        except OSError:
            return "episodes"  # read_episodes reports it as FILE:0
    first = next((line for line in head.splitlines() if line.strip()), "")
    try:
        doc = json.loads(first)
    except ValueError:  # a pretty-printed document, or a broken / truncated line
        return "otlp" if any(key in head for key in OTLP_KEYS) else "episodes"
    if isinstance(doc, dict) and ("resourceSpans" in doc or "resource_spans" in doc):
        return "otlp"
    return "episodes"


def _episode_lines(path: str, lines: Iterable[str]) -> Iterator[EpisodeRecord | Problem]:
    """Episode JSONL from lines already read (standard input), as ``read_episodes`` does."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield parse_episode_line(line)
        except EpisodeFormatError as exc:
            message = str(exc)
            if any(key in line[:200] for key in OTLP_KEYS):
                message = _OTLP_IN_EPISODES
            yield Problem(path, number, message)
