"""The collector's subcommands of ``loopscope``: registered through the
``loopscope.commands`` entry point, so the agent-side package never imports this one.

Nothing here imports duckdb or grpc at import time; a missing extra is reported with the
install command instead of a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final

from loopscope.environment_variables import DEFAULT_GRPC_PORT, DEFAULT_HTTP_PORT
from loopscope.exit_codes import EXIT_OK, EXIT_USAGE

from . import environment_variables as env
from . import export_command
from .alerts.options import add_alert_options, alert_settings
from .arguments import byte_count, is_loopback, memory_size, port_number
from .lake_options import (
    MIN_KEEP,
    add_lake_options,
    check_keep,
    every,
    install_hint,
    interval,
    lake_of,
)
from .receive import limits as lim
from .store_settings import CHECKPOINT_BYTES

if TYPE_CHECKING:
    from .app import Collector

MIB: Final = 1024 * 1024
STORE_MEMORY: Final = "512MB"
"""DuckDB's memory for its cache and a batch's work (``--store-memory``)."""
COLLECTOR_HELP = """\
Receive OTLP from agents, store it in DuckDB, detect loops as spans arrive.

Listens for OTLP/HTTP (POST /v1/traces) and OTLP/gRPC (TraceService) on loopback, stores
spans and tool calls in one DuckDB file (the collector is its only writer), runs the
detection core per episode, and serves named reads (GET /v1/reads/NAME) and Prometheus
metrics (GET /metrics) on the HTTP port. A 200 means the spans are durably stored; a 400 names
the field the store cannot hold; a 503 with Retry-After is for what a retry can fix (limits
reached, a store that cannot be written now). GET /healthz (and the gRPC health service) says
whether the store can be written; the collector recovers by itself when it can again.
Ctrl-C or SIGTERM stops it after storing what is queued; a second Ctrl-C during that stop ends
it at once, as a kill would (what was acknowledged waits in the spool for the next start).

Alerts: per service, the rate of tool calls that made no progress over a rolling window
(span time) fires an alert when it reaches --alert-threshold, or --alert-factor times its
own slow baseline (and at least 20%), with at least --alert-min-volume calls in the window
and --alert-cooldown between firings; it resolves when the rate falls back. Alerts go to
the log, to each --webhook (a JSON POST with a Slack-compatible "text"), to /metrics
(loopscope_alerts_total) and to the alerts table (GET /v1/reads/alerts).

Listening on a non-loopback address needs --auth-token (or $LOOPSCOPE_AUTH_TOKEN), or
--insecure-remote to accept unauthenticated traffic from the network on purpose.

Example:
  loopscope collector
  loopscope collector --db runs.duckdb --http-port 4318 --grpc-port 4317
  loopscope collector --webhook https://hooks.slack.com/services/T000/B000/XXXX
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python my_agent.py
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``collector`` to the ``loopscope`` command's subparsers."""
    p = sub.add_parser("collector", help="receive OTLP, store in DuckDB, detect loops live",
                       description=COLLECTOR_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback)")
    p.add_argument("--http-port", type=port_number, default=DEFAULT_HTTP_PORT,
                   help=f"OTLP/HTTP and reads (default {DEFAULT_HTTP_PORT})")
    p.add_argument("--grpc-port", type=port_number, default=DEFAULT_GRPC_PORT,
                   help=f"OTLP/gRPC (default {DEFAULT_GRPC_PORT}; 0 disables it)")
    p.add_argument("--db", default=env.default_db(),
                   help=f"DuckDB file (default: ./{env.DEFAULT_DB} or ${env.DB_ENV})")
    add_lake_options(p, "instead of --db: write into this DuckLake (one of N collectors)")
    p.add_argument("--spool", metavar="DIR",
                   help="folder of the write-ahead spool: an export is answered 200 once "
                        "written there, before its batch is stored, and replayed after a "
                        "crash (default: DB.spool beside a --db file; none for :memory:, "
                        "or for a lake unless given; '' for none: 200 once stored)")
    p.add_argument("--checkpoint-bytes", metavar="BYTES", type=byte_count,
                   default=CHECKPOINT_BYTES,
                   help="checkpoint the store's write-ahead log into the file once the log "
                        f"is past this size (default {CHECKPOINT_BYTES // MIB} MiB): larger "
                        "makes checkpoints rarer (each takes the store's time, up to seconds "
                        "on a big store) but a crash's restart replays more and the log takes "
                        "that much disk")
    p.add_argument("--instance", metavar="NAME", default=os.environ.get(env.INSTANCE_ENV),
                   help="this collector's name among those writing one lake, stored with each "
                        "call to tell an episode sent to two of them (default: "
                        f"${env.INSTANCE_ENV}, else HOSTNAME:HTTP_PORT; keep it across restarts)")
    p.add_argument("--lake-maintain-every", metavar="DURATION", type=every, default="5m",
                   help="with --lake: run DuckLake's housekeeping (merge small files, rewrite "
                        "deleted ones, expire snapshots older than --lake-keep) this often, "
                        "between two batches: 30s, 5m, 1h; 0 never (default 5m; "
                        "docs/deploy.md)")
    p.add_argument("--lake-keep", metavar="DURATION", type=interval, default="1d",
                   help="with --lake: snapshots and unused files younger than this are kept "
                        "by the housekeeping, so that a read or a batch still scanning a "
                        f"replaced file finishes: at least {MIN_KEEP} (default 1d)")
    p.add_argument("--unsafe-lake-keep", action="store_true",
                   help=f"allow a --lake-keep under {MIN_KEEP}: only when no read or write on "
                        "the lake lasts that long (docs/deploy.md, \"Housekeeping\")")
    p.add_argument("--auth-token", default=os.environ.get(env.TOKEN_ENV),
                   help=f"require 'Authorization: Bearer TOKEN' (default: ${env.TOKEN_ENV})")
    p.add_argument("--insecure-remote", action="store_true",
                   help="allow a non-loopback --host without an auth token")
    p.add_argument("--policy", metavar="FILE", help="JSON policy for detection (see analyze)")
    limits = p.add_argument_group("limits (past them a client gets 503 + Retry-After, 413 "
                                  "over --max-request-bytes, or is disconnected when it is "
                                  "too slow)")
    limits.add_argument("--max-request-bytes", type=int, default=lim.MAX_BODY_BYTES,
                        help="largest OTLP request, HTTP or gRPC, after decompression "
                             f"(default: {lim.MAX_BODY_BYTES // MIB} MiB); a request under it "
                             "is never refused for what it takes once decoded")
    limits.add_argument("--max-inflight-bytes", type=int, default=lim.MAX_INFLIGHT_BYTES,
                        help="memory requests hold at once: bodies as they arrive, then their "
                             "decoded spans until stored; bounds memory (default: "
                             f"{lim.MAX_INFLIGHT_BYTES // MIB} MiB, at "
                             "least --max-request-bytes). It admits any request under "
                             "--max-request-bytes: one that alone decodes to more waits (503) "
                             "until no other is in flight, then is admitted alone")
    limits.add_argument("--store-memory", type=memory_size, default=STORE_MEMORY,
                        help="memory DuckDB may use for its cache and a batch's work, such as "
                             f"512MB or 2GB (default {STORE_MEMORY})")
    limits.add_argument("--max-connections", type=int, default=lim.MAX_CONNECTIONS,
                        help=f"open HTTP connections (default {lim.MAX_CONNECTIONS})")
    limits.add_argument("--header-timeout", metavar="SECONDS", type=float,
                        default=lim.HEADER_TIMEOUT_S,
                        help="time to send a request's headers "
                             f"(default {lim.HEADER_TIMEOUT_S:g})")
    limits.add_argument("--body-timeout", metavar="SECONDS", type=float,
                        default=lim.BODY_TIMEOUT_S,
                        help=f"time to send a request's body (default {lim.BODY_TIMEOUT_S:g})")
    limits.add_argument("--idle-timeout", metavar="SECONDS", type=float,
                        default=lim.IDLE_TIMEOUT_S,
                        help="time a kept-alive connection may wait for its next request "
                             f"(default {lim.IDLE_TIMEOUT_S:g})")
    a = p.add_argument_group("no-progress spike alerts")
    a.add_argument("--webhook", metavar="URL", action="append", default=[],
                   help="POST alerts here as JSON with a Slack-compatible 'text' "
                        "(repeatable; alerts always go to the log and /metrics)")
    add_alert_options(a)
    p.set_defaults(func=cmd_collector)
    register_export(sub)


def register_export(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``loopscope export``: a store's tables (``export_command``) and, with
    ``--prometheus-rules``, the spike alert as Prometheus rules (``alerts.prometheus_rules``)."""
    p = export_command.register(sub)
    rules = p.add_argument_group("Prometheus alerting rules")
    rules.add_argument("--prometheus-rules", metavar="FILE",
                       help="write the no-progress spike alert as Prometheus alerting rules "
                            "over the collector's /metrics ('-' for standard output)")
    rules.add_argument("--prometheus-selector", metavar="LABELS", default="",
                       help="label matchers for the collector's series when a Prometheus "
                            "scrapes several, e.g. 'job=\"loopscope\"'")
    add_alert_options(rules)
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    """``loopscope export``: tables (``--db``), rules (``--prometheus-rules``), or both."""
    if not args.db and not args.lake and not args.prometheus_rules:
        print("loopscope export: error: give --db FILE or --lake CATALOG (a store's tables) or "
              "--prometheus-rules FILE (the spike alert for Prometheus)", file=sys.stderr)
        return EXIT_USAGE
    if args.prometheus_rules:
        from .alerts.prometheus_rules import rules_yaml

        try:
            text = rules_yaml(alert_settings(args), selector=args.prometheus_selector)
        except ValueError as exc:
            print(f"loopscope export: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if args.prometheus_rules == "-":
            sys.stdout.write(text)
        else:
            Path(args.prometheus_rules).write_text(text, encoding="utf-8")
            print(f"prometheus rules  {args.prometheus_rules}  (check: promtool check rules "
                  f"{args.prometheus_rules})")
    return export_command.cmd_export(args) if args.db or args.lake else EXIT_OK


def _instance(args: argparse.Namespace) -> str:
    import socket

    return args.instance or f"{socket.gethostname()}:{args.http_port}"


def _port_taken(host: str, port: int) -> bool:
    """Whether something already listens on ``host:port`` (checked before gRPC tries, whose
    own failure is a raw log line from its C core)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def _remove_store(path: str) -> None:
    """Remove a store this start created, so a failed start leaves nothing behind."""
    for name in (path, f"{path}.wal"):
        Path(name).unlink(missing_ok=True)


GC_THRESHOLDS: Final = (50_000, 50, 100)
"""Python's collection thresholds in the collector process (its defaults: 700, 10, 10): see
``fewer_collections``."""


def fewer_collections() -> None:
    """Make Python's garbage collections rarer in the collector process.

    Python (3.11) collects its youngest objects once allocations outnumber deallocations by
    the first threshold, the middle generation after that many young collections (the
    second), and considers a full collection, which walks every object the process holds
    (the detection state of every active episode, the caches, the libraries), after that
    many middle ones (the third), once what survived them exceeds a quarter of the
    long-lived objects. A batch's spans, rows and records live until the batch commits:
    tens of thousands of objects that survive collection after collection and are walked
    each time. With the defaults, full collections ran every few batches (about a quarter
    of the pipeline thread's CPU time: BENCHMARKS.md, "Collector ingest"); with full ones
    ten times rarer (700, 10, 100), the young and middle collections still took 7-10% of a
    batch of 2,500-4,000 spans; at these thresholds 2-3% (BENCHMARKS.md, "Fewer
    collections"; end to end no change showed above the noise).
    Garbage without reference cycles is freed at once either way; only cycles wait longer.
    """
    import gc

    gc.set_threshold(*GC_THRESHOLDS)


MMAP_THRESHOLD = 256 * 1024
"""Allocations from this size up get pages of their own, returned when freed."""


def _return_freed_memory() -> None:
    """Make the C allocator give large blocks back to the system once they are freed.

    The collector's large allocations are requests: a body, its parsed protobuf message,
    JSON text. glibc's allocator raises its threshold for pages of their own to the size of
    the largest block freed (up to 32 MiB), after which such blocks come from its heaps and
    stay with the process when freed: eight large requests in a row left the collector at
    the sum of their peaks, though the bytes in flight were bounded (BENCHMARKS.md,
    "Collector memory"). A fixed threshold keeps each large block in pages of its own.
    Nothing happens where the C library is not glibc.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name or sys.platform != "linux":
        return
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD (fixed from now on)
    except (OSError, AttributeError):
        return


def cmd_collector(args: argparse.Namespace) -> int:
    """Run the collector until SIGINT or SIGTERM."""
    if not is_loopback(args.host) and not args.auth_token and not args.insecure_remote:
        print(f"loopscope collector: error: refusing to listen on {args.host} without "
              "--auth-token (or $LOOPSCOPE_AUTH_TOKEN); pass --insecure-remote to do it anyway",
              file=sys.stderr)
        return 2
    try:
        from .app import Collector
    except ImportError as exc:
        print(f"loopscope collector: error: {exc.name or 'a dependency'} is missing. Install "
              f"it with:  {install_hint(args)}", file=sys.stderr)
        return 2
    from loopscope.policy_file import load_policy

    from .receive.connections import ConnectionWatch

    policy = load_policy(args.policy) if args.policy else None
    settings = alert_settings(args)
    from .storage import LakeError, SchemaError
    from .storage.errors import StoreError, StoreLocked

    lake = lake_of(args, "collector")
    check_keep(args.lake_keep, option="--lake-keep", unsafe=args.unsafe_lake_keep,
               override="--unsafe-lake-keep", command="collector")
    if args.grpc_port and _port_taken(args.host, args.grpc_port):
        print(f"loopscope collector: error: cannot listen for OTLP/gRPC on {args.host}:"
              f"{args.grpc_port} (the port is taken); pass another --grpc-port (0 turns gRPC "
              "off).", file=sys.stderr)
        return 1
    new_store = lake is None and args.db != ":memory:" and not Path(args.db).exists()
    try:
        collector = Collector(db_path=args.db, host=args.host, http_port=args.http_port,
                              grpc_port=args.grpc_port, auth_token=args.auth_token,
                              policy=policy, max_request_bytes=args.max_request_bytes,
                              alert_settings=settings, webhooks=args.webhook,
                              max_inflight_bytes=args.max_inflight_bytes,
                              store_memory=args.store_memory, lake=lake,
                              instance=_instance(args) if lake is not None else "",
                              lake_maintain_every_s=args.lake_maintain_every,
                              lake_keep=args.lake_keep, spool=args.spool,
                              checkpoint_bytes=args.checkpoint_bytes,
                              watch=ConnectionWatch(
                                  max_connections=args.max_connections,
                                  header_timeout_s=args.header_timeout,
                                  body_timeout_s=args.body_timeout,
                                  idle_timeout_s=args.idle_timeout))
    except StoreError as exc:
        if lake is not None:
            print(f"loopscope collector: error: cannot open the lake {lake}: {exc}",
                  file=sys.stderr)
            return 1
        if not isinstance(exc, StoreLocked):
            raise
        hint = (" Another collector probably owns it (one writer per file): stop it, or pass "
                "another --db." if exc.held else "")
        print(f"loopscope collector: error: cannot open the store {args.db}: {exc}.{hint}",
              file=sys.stderr)
        return 1
    except (SchemaError, LakeError) as exc:
        print(f"loopscope collector: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        if new_store:
            _remove_store(args.db)
        print(f"loopscope collector: error: cannot listen on {args.host}:{args.http_port} "
              f"({exc.strerror or exc}); pass another --http-port.", file=sys.stderr)
        return 1
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    fewer_collections()
    _return_freed_memory()
    try:
        collector.start()
    except OSError as exc:  # the gRPC port is taken
        print(f"loopscope collector: error: {exc}; pass another --grpc-port (0 turns gRPC off).",
              file=sys.stderr)
        collector.stop()
        if new_store:
            _remove_store(args.db)
        return 1
    print(f"loopscope collector: OTLP/HTTP on {collector.http_url}/v1/traces"
          + (f", OTLP/gRPC on {args.host}:{collector.grpc_port}" if collector.grpc_port else "")
          + f"; store {collector.db.path}"
          + (f"; spool {collector.spool.path} ({collector.replayed[0]} request(s), "
             f"{collector.replayed[1]} span(s) replayed)" if collector.spool else "")
          + f"; reads {collector.http_url}/v1/reads; metrics {collector.http_url}/metrics",
          flush=True)
    stop.wait()
    print("loopscope collector: stopping (finishing queued spans; a second Ctrl-C stops at "
          "once)…", file=sys.stderr, flush=True)
    _stop_unless_told_again(collector)
    return 0


def _stop_unless_told_again(collector: Collector) -> None:
    """``collector.stop()``, on a thread of its own so that a second Ctrl-C (SIGINT) during
    it (a stop held up by a hung disk or a webhook that does not answer) ends the process at
    once, as a kill would: what was acknowledged and not stored yet is in the spool, stored
    at the next start, and the store opens after it (DuckDB replays its log). Exits 130 then.
    A SIGTERM meanwhile changes nothing: it is how a supervisor stops its children (``loopscope
    up`` after the terminal's Ctrl-C reached the whole process group), not a person insisting.
    """
    told = threading.Event()

    def second(signum: int, _frame: object) -> None:
        if signum == signal.SIGINT:
            told.set()

    failed: list[BaseException] = []

    def stop() -> None:
        try:
            collector.stop()
        except BaseException as exc:  # raised again on the main thread, as before
            failed.append(exc)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, second)
    stopping = threading.Thread(target=stop, name="loopscope-stop", daemon=True)
    stopping.start()
    while stopping.is_alive():
        if told.wait(0.1):
            kept = (f"; acknowledged spans not stored yet are in the spool "
                    f"{collector.spool.path}, stored at the next start"
                    if collector.spool is not None else "")
            print(f"loopscope collector: stopped at once (a second signal){kept}",
                  file=sys.stderr, flush=True)
            os._exit(128 + signal.SIGINT)
    if failed:
        raise failed[0]
