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

from loopscope_collector.arguments import is_loopback, port_number
from loopscope_collector.lake_options import add_lake_options, lake_of

from .environment_variables import (
    COLLECTOR_URL_ENV,
    DEFAULT_COLLECTOR_URL,
    LAKE_DATA_ENV,
    LAKE_ENV,
    SNAPSHOT_ENV,
)

HELP = """\
Open the loopscope dashboard: which agents are stuck, why, and what it cost.

Live, it reads a running collector's named reads (--collector, default
http://127.0.0.1:4318, or $LOOPSCOPE_COLLECTOR_URL); labels and sending imported runs need
this. After the fact, --db opens a loopscope DuckDB file read-only (a copy, or the file of a
stopped collector; written by `loopscope analyze FILE --db FILE` too). Beside N collectors
writing one DuckLake, --lake and --lake-data read it (every collector's rows, read-only).

Example:
  loopscope dashboard
  loopscope dashboard --collector http://127.0.0.1:4318 --port 8501
  loopscope dashboard --db runs.duckdb
  loopscope dashboard --lake 'ducklake:postgres:dbname=loopscope host=db' --lake-data /shared/lake
"""


def app_path() -> Path:
    """The Streamlit entrypoint shipped in this package."""
    return Path(__file__).resolve().parent / "app.py"


def command(args: argparse.Namespace) -> list[str]:
    """The ``streamlit run`` command line for ``args``, through ``server`` (the pages'
    modules imported while the server starts)."""
    return [sys.executable, "-m", "loopscope_dashboard.server", "run", str(app_path()),
            "--server.port", str(args.port), "--server.address", args.host,
            "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--client.toolbarMode", "viewer",  # no Deploy button: this app is not deployable
            # Nothing here is edited while it runs: no watching of every imported module's
            # file (its bookkeeping after each run) and no full gc.collect() after each run
            # and fragment rerun. Together 0.3-0.4 s of the server's CPU per page opened,
            # on 2 cores shared with the browser (BENCHMARKS.md, "Streamlit's file watcher").
            "--server.fileWatcherType", "none", "--runner.postScriptGC", "false"]


def environment(args: argparse.Namespace) -> dict[str, str]:
    """The environment the app runs with: the source it should read."""
    env = dict(os.environ)
    lake = None if args.db or args.collector else lake_of(args, "dashboard")
    env.pop(LAKE_ENV, None)
    env.pop(LAKE_DATA_ENV, None)
    if args.db:
        env[SNAPSHOT_ENV] = str(Path(args.db).resolve())
    elif lake is not None:
        env.pop(SNAPSHOT_ENV, None)
        env[LAKE_ENV], env[LAKE_DATA_ENV] = lake.catalog, lake.data_path
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
    env = environment(args)  # a malformed --lake exits here, naming what is wrong
    where = (f"file {args.db}" if args.db else f"lake {env[LAKE_ENV]} (data "
             f"{env[LAKE_DATA_ENV]})" if LAKE_ENV in env
             else f"collector {env[COLLECTOR_URL_ENV]}")
    print(f"loopscope dashboard on http://{args.host}:{args.port} reading {where}",
          file=sys.stderr, flush=True)
    # Become Streamlit (same process): signals reach it directly, and a parent that stops
    # this process stops the server, with no grandchild left behind.
    os.execve(sys.executable, command(args), env)  # does not return


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
    add_lake_options(parser, "instead of --collector or --db: read this DuckLake, every "
                             "collector's rows (read-only)")
    parser.add_argument("--port", type=port_number, default=8501,
                        help="port to serve on (default: 8501)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--insecure-remote", action="store_true",
                        help="allow a non-loopback --host (anyone who reaches it can read and "
                             "label)")
    parser.set_defaults(func=run)
