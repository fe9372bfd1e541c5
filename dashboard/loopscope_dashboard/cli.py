"""``loopscope dashboard``: start the Streamlit app against a collector or a DuckDB file.

Registered through the ``loopscope.commands`` entry point, so the agent-side ``loopscope``
command never imports Streamlit. The app file is found beside this module (the package is
installed, so pages import ``loopscope_dashboard`` by its absolute name).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from loopscope_collector.cli import is_loopback, port_number

from .environment_variables import COLLECTOR_URL_ENV, DEFAULT_COLLECTOR_URL, SNAPSHOT_ENV

HELP = """\
Open the loopscope dashboard: which agents are stuck, why, and what it cost.

Live, it reads a running collector's named reads (--collector, default
http://127.0.0.1:4318, or $LOOPSCOPE_COLLECTOR_URL); labels and sending imported runs need
this. After the fact, --db opens a loopscope DuckDB file read-only (a copy, or the file of a
stopped collector; written by `loopscope analyze FILE --db FILE` too).

Example:
  loopscope dashboard
  loopscope dashboard --collector http://127.0.0.1:4318 --port 8501
  loopscope dashboard --db runs.duckdb
"""


def app_path() -> Path:
    """The Streamlit entrypoint shipped in this package."""
    return Path(__file__).resolve().parent / "app.py"


def command(args: argparse.Namespace) -> list[str]:
    """The ``streamlit run`` command line for ``args``."""
    return [sys.executable, "-m", "streamlit", "run", str(app_path()),
            "--server.port", str(args.port), "--server.address", args.host,
            "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--client.toolbarMode", "viewer"]  # no Deploy button: this app is not deployable


def environment(args: argparse.Namespace) -> dict[str, str]:
    """The environment the app runs with: the source it should read."""
    env = dict(os.environ)
    if args.db:
        env[SNAPSHOT_ENV] = str(Path(args.db).resolve())
    else:
        env.pop(SNAPSHOT_ENV, None)
        env[COLLECTOR_URL_ENV] = args.collector or env.get(COLLECTOR_URL_ENV,
                                                           DEFAULT_COLLECTOR_URL)
    return env


def run(args: argparse.Namespace) -> int:
    """Run Streamlit in the foreground until it exits (Ctrl-C stops it)."""
    if not is_loopback(args.host) and not args.insecure_remote:
        print(f"loopscope dashboard: error: refusing to listen on {args.host}: the dashboard "
              "has no authentication and can write labels; pass --insecure-remote to do it "
              "anyway", file=sys.stderr)
        return 2
    if args.db and not Path(args.db).exists():
        print(f"loopscope dashboard: error: no such DuckDB file: {args.db}", file=sys.stderr)
        return 2
    where = f"file {args.db}" if args.db else f"collector {environment(args)[COLLECTOR_URL_ENV]}"
    print(f"loopscope dashboard on http://{args.host}:{args.port} reading {where}",
          file=sys.stderr, flush=True)
    # Become Streamlit (same process): signals reach it directly, and a parent that stops
    # this process stops the server, with no grandchild left behind.
    os.execve(sys.executable, command(args), environment(args))  # does not return


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``loopscope dashboard`` to the ``loopscope`` command's subparsers."""
    parser = sub.add_parser("dashboard", help="open the Streamlit dashboard", description=HELP,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--collector", metavar="URL",
                        help=f"collector base URL (default: ${COLLECTOR_URL_ENV} or "
                             f"{DEFAULT_COLLECTOR_URL})")
    source.add_argument("--db", metavar="FILE",
                        help="read this loopscope DuckDB file instead (read-only)")
    parser.add_argument("--port", type=port_number, default=8501,
                        help="port to serve on (default: 8501)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--insecure-remote", action="store_true",
                        help="allow a non-loopback --host (anyone who reaches it can read and "
                             "label)")
    parser.set_defaults(func=run)
