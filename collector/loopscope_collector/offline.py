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

This module is the plug-in only (registration, the command, which reader each file gets). The
OTLP reading and grouping live in ``otlp_files``, the Episode-to-spans conversion in
``synthetic_spans`` and the ``--db`` store in ``offline_store``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from loopscope.analysis import Problem, analyze, as_json, as_text, read_episodes
from loopscope.detect.replay import Episode, EpisodeFormatError, parse_episode_line

from .offline_store import Store, StoreError
from .otlp_files import OTLP_KEYS, EpisodeGrouper, read_otlp_file
from .synthetic_spans import episode_spans

__all__ = ["read_inputs", "register"]

EXIT_OK, EXIT_BAD_INPUT, EXIT_USAGE = 0, 1, 2
FORMATS: Final = ("auto", "episodes", "otlp")
_SNIFF_CHARS: Final = 65_536
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
    grouper: EpisodeGrouper | None = None
    for path in paths:
        lines: list[str] | None = None
        kind = fmt
        if path == "-":
            lines = list(sys.stdin)
        if fmt == "auto":
            kind = _sniff(path, lines)
        if kind == "otlp":
            grouper = grouper or EpisodeGrouper()
            yield from read_otlp_file(path, lines, grouper, store, progress)
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


def _episode_lines(path: str, lines: Iterable[str]) -> Iterator[Episode | Problem]:
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
