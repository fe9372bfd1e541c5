"""``loopscope metrics``: the collector's four metrics from a store file or a running collector.

Registered through the ``loopscope.commands`` entry point. Nothing here imports duckdb at
import time (``loopscope --help`` works without the collector extra); the store and the
metric reads are imported when the command runs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopscope.detect.events import OUTCOMES
from loopscope.environment_variables import DEFAULT_ENDPOINT
from loopscope.exit_codes import EXIT_BAD_INPUT, EXIT_OK

from .. import environment_variables as env
from ..lake_options import add_lake_options, install_hint, lake_of

if TYPE_CHECKING:
    from .compute import Reader

METRICS_HELP = """\
Loop-detection rate, false-stop rate, UNKNOWN reconcile latency and cost per successful task.

Reads a loopscope DuckDB store read-only (a copy, or the file of a stopped collector), a
DuckLake that collectors write (--lake, --lake-data: the same SQL over the union of every
collector's rows), or a running collector through its read API (--collector), and prints the metrics with their n and
Wilson 95% intervals, then the breakdown by service, agent, model, tool and flag kind.
Definitions and worked examples: docs/metrics.md; the words: docs/glossary.md. Filters
combine; a run is in the time window when it started in it (--since/--last, --until; ISO times without a zone are UTC).

Example:
  loopscope metrics --db loopscope.duckdb
  loopscope metrics --db copy.duckdb --service checkout --last 24h --json
  loopscope metrics --lake 'ducklake:postgres:dbname=loopscope host=db' --lake-data /shared/lake
  loopscope metrics --collector http://127.0.0.1:4318 --tool search --since 2025-06-01T00:00
"""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``metrics`` to the ``loopscope`` command's subparsers."""
    p = sub.add_parser("metrics", help="detection, false-stop, reconcile and cost metrics",
                       description=METRICS_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    source = p.add_mutually_exclusive_group()
    source.add_argument("--db", metavar="FILE",
                        help=f"DuckDB store to read (read-only; default: ${env.DB_ENV} or "
                             f"./{env.DEFAULT_DB})")
    source.add_argument("--collector", metavar="URL",
                        help="read through a running collector's API, e.g. "
                             f"{DEFAULT_ENDPOINT}")
    add_lake_options(p, "instead of --db: read this DuckLake, every collector's rows")
    p.add_argument("--auth-token", default=os.environ.get(env.TOKEN_ENV),
                   help=f"bearer token for --collector (default: ${env.TOKEN_ENV})")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--service", help="only this service")
    p.add_argument("--agent", help="only this agent")
    p.add_argument("--model", help="only this model")
    p.add_argument("--tool", help="only episodes that called this tool (calls: its calls)")
    p.add_argument("--outcome", choices=OUTCOMES,
                   help="only episodes with this outcome")
    window = p.add_mutually_exclusive_group()
    window.add_argument("--since", metavar="ISO", help="episodes started at or after this time")
    window.add_argument("--last", metavar="DURATION",
                        help="episodes started in the last DURATION: 30m, 1h, 7d, 2w")
    p.add_argument("--until", metavar="ISO", help="episodes started before this time")
    p.set_defaults(func=cmd_metrics)


def parse_time_ns(text: str) -> int:
    """An ISO 8601 time (UTC when it has no zone) as Unix nanoseconds."""
    try:
        value = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not an ISO 8601 time: {text!r} (e.g. 2025-06-01T12:00:00Z)") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return int(value.timestamp() * 1_000_000_000)


def parse_duration_s(text: str) -> float:
    """``30m``, ``1h``, ``7d``… as seconds."""
    found = _DURATION.match(text)
    if not found:
        raise ValueError(f"not a duration: {text!r} (e.g. 30s, 15m, 1h, 7d, 2w)")
    return float(found.group(1)) * _UNIT_S[found.group(2)]


def _window(args: argparse.Namespace) -> tuple[int | None, int | None]:
    since = until = None
    if args.since:
        since = parse_time_ns(args.since)
    elif args.last:
        since = time.time_ns() - int(parse_duration_s(args.last) * 1_000_000_000)
    if args.until:
        until = parse_time_ns(args.until)
    return since, until


def _error(message: str) -> int:
    print(f"loopscope metrics: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _http_reader(base: str, token: str | None) -> Reader:
    base = base.rstrip("/")

    def read(name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        request = urllib.request.Request(f"{base}/v1/reads/{name}" + (f"?{query}" if query
                                                                      else ""))
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=30) as response:
            return list(json.loads(response.read())["rows"])

    return read


def cmd_metrics(args: argparse.Namespace) -> int:
    """Compute and print the metrics."""
    since_ns, until_ns = _window(args)  # a bad time is a ValueError: usage error upstream
    from ..reads.filters import Filters  # (the reads need the collector extra)

    filters = Filters(service=args.service, agent=args.agent, model=args.model,
                      tool=args.tool, outcome=args.outcome, since_ns=since_ns,
                      until_ns=until_ns).params()
    try:
        from .compute import collect, format_table
    except ImportError as exc:
        return _error(f"{exc.name or 'a dependency'} is missing. Install it with:  "
                      f"{install_hint(args)}")
    if args.collector:
        try:
            report = collect(_http_reader(args.collector, args.auth_token), filters)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            return _error(f"collector {args.collector} answered {exc.code}: {detail}")
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return _error(f"cannot reach the collector at {args.collector}: {reason}")
    elif not args.db and lake_of(args, "metrics") is not None:
        result = _from_lake(lake_of(args, "metrics"), filters, collect)
        if isinstance(result, int):
            return result
        report = result
    else:
        path = args.db or env.default_db()
        result = _from_file(path, filters, collect)
        if isinstance(result, int):
            return result
        report = result
    if args.json:
        print(json.dumps(report, ensure_ascii=False, allow_nan=False))
    else:
        print(format_table(report))
    return EXIT_OK


def _from_lake(
    lake: Any, filters: dict[str, Any], collect: Callable[[Reader, dict[str, Any]], dict[str, Any]]
) -> dict[str, Any] | int:
    """The metrics over a lake, with the reads' SQL (a reader beside running collectors)."""
    from ..reads import snapshot
    from ..storage import LakeError, SchemaError, open_lake
    from ..storage.errors import StoreError

    try:
        db = open_lake(lake, read_only=True)
    except (LakeError, SchemaError) as exc:
        return _error(str(exc))
    except StoreError as exc:
        return _error(f"cannot open the lake {lake}: {exc}")
    try:
        with snapshot(db) as read:
            return collect(read, filters)
    except StoreError as exc:
        return _error(f"the lake {lake}: cannot compute the metrics ({exc})")
    finally:
        db.close()


def _from_file(
    path: str, filters: dict[str, Any], collect: Callable[[Reader, dict[str, Any]], dict[str, Any]]
) -> dict[str, Any] | int:
    try:
        from ..reads import snapshot
        from ..storage import SchemaError, open_database
        from ..storage.errors import StoreError, StoreLocked
    except ImportError as exc:
        return _error(f"{exc.name or 'a dependency'} is missing. Install the collector with:  "
                      "pip install 'loopscope[collector]'")
    if not Path(path).is_file():
        return _error(f"no such store file: {path} (pass --db FILE, or --collector URL to "
                      "read from a running collector)")
    try:
        db = open_database(path, read_only=True)
    except SchemaError as exc:
        return _error(str(exc))
    except StoreLocked as exc:
        if exc.held:
            return _error(f"{path} is locked by another process (a running collector?). Read "
                          f"through it with --collector {DEFAULT_ENDPOINT}, or copy the "
                          "file and pass the copy")
        return _error(f"cannot open {path}: {exc}")
    except StoreError as exc:
        return _error(f"{path} is not a readable DuckDB file: {exc}")
    try:
        with snapshot(db) as read:
            return collect(read, filters)
    except StoreError as exc:
        return _error(f"{path}: cannot compute the metrics ({exc}); is it a loopscope store?")
    finally:
        db.close()
