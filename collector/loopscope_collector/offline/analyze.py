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
  report re-judges it under ``--policy``). OTLP spans are stored as they are; an Episode
  JSONL run becomes synthetic spans shaped like loopscope's own ``invoke_agent`` /
  ``execute_tool`` spans, with trace and span ids derived from the episode id and step
  index, so re-running stores nothing twice. A store locked by a running collector is
  refused with a clear message.

Nothing heavy is imported at import time: the plain ``analyze`` keeps working over Episode
JSONL when the collector extra (duckdb, protobuf) is not installed.

This module is the command alone (its options, help and output). What it runs is the
collector's library stage ``runs``: the files read and judged in ``runs.inputs``, the OTLP
reading and grouping in ``runs.otlp_files``, the Episode-to-spans conversion in
``runs.synthetic_spans`` and the ``--db`` store in ``runs.store``; the dashboard's Import
calls the same.
"""

from __future__ import annotations

import argparse
import sys
from typing import Final

from loopscope.exit_codes import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE
from loopscope.offline.analysis import AnalyzeInputs, as_json, as_text

from ..runs.inputs import analyze_inputs
from ..runs.store import Store, StoreError

__all__ = ["ANALYZE"]

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
