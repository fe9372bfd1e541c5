"""``loopscope up``: the whole system on one machine, in one command.

Starts the collector (embedded DuckDB file), the dashboard and, with ``--demo``, a fleet of
scripted agents that send live traffic through the real SDK and real OTLP. Each part is its
own process; ``up`` waits until each answers before starting the next, prints the URLs, and
on Ctrl-C (or SIGTERM, or a part dying) stops them all: agents first, then the dashboard,
then the collector, which stores what is queued before it exits. Children are also asked by
the kernel to exit if ``up`` itself is killed, so none is orphaned.
"""

from __future__ import annotations

import argparse
import ctypes
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field

from loopscope.environment_variables import DEFAULT_GRPC_PORT, DEFAULT_HTTP_PORT
from loopscope_collector.cli import port_number
from loopscope_collector.environment_variables import DEFAULT_DB, default_db

UP_HELP = """\
Bring up the collector, the dashboard and (with --demo) demo agents on this machine.

The collector receives OTLP on --http-port (HTTP) and --grpc-port (gRPC) and keeps its store
in --db; the dashboard reads it live. --demo adds scripted agents from the scenario library
(healthy runs, read spins, oscillation, parameter jitter, legitimate polling, write timeouts
with reconciles, budget stops) in observe, warn and enforce modes, sending real OTLP through
the loopscope SDK, so the dashboard fills with live traffic. Ctrl-C stops everything.

Example:
  loopscope up --demo
  loopscope up --db runs.duckdb --http-port 4318 --dashboard-port 8501
"""

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``up`` to the ``loopscope`` command."""
    p = sub.add_parser("up", help="run collector + dashboard (+ demo agents) together",
                       description=UP_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", default=default_db(),
                   help=f"DuckDB file of the collector (default: ./{DEFAULT_DB})")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default: loopback)")
    p.add_argument("--http-port", type=port_number, default=DEFAULT_HTTP_PORT,
                   help=f"OTLP/HTTP and reads ({DEFAULT_HTTP_PORT})")
    p.add_argument("--grpc-port", type=port_number, default=DEFAULT_GRPC_PORT,
                   help=f"OTLP/gRPC ({DEFAULT_GRPC_PORT}; 0: off)")
    p.add_argument("--dashboard-port", type=port_number, default=8501, help="dashboard (8501)")
    p.add_argument("--demo", action="store_true", help="also run scripted demo agents")
    p.add_argument("--demo-pace", type=float, default=0.05, metavar="SECONDS",
                   help="pause before each demo tool call (default: 0.05)")
    p.set_defaults(func=cmd_up)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Ask Linux to send SIGTERM to this child when ``up`` dies, however it dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class Part:
    """One child process of ``up``."""

    name: str
    args: list[str]
    ready_url: str | None
    proc: subprocess.Popen[bytes] | None = None
    log: list[str] = field(default_factory=list)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        threading.Thread(target=self._pump, name=f"up-{self.name}", daemon=True).start()

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.log = [*self.log[-49:], line]
            print(f"[{self.name}] {line}", file=sys.stderr, flush=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, deadline: float) -> bool:
        while time.monotonic() < deadline:
            if not self.alive():
                return False
            if self.ready_url is None:
                return True
            try:
                urllib.request.urlopen(self.ready_url, timeout=2).read()
                return True
            except OSError:
                time.sleep(0.2)
        return False

    def stop(self) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT if self.name == "demo" else signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def plan(args: argparse.Namespace) -> list[Part]:
    """The processes ``up`` starts, in order."""
    python = [sys.executable, "-m", "loopscope"]
    host = args.host if args.host not in ("0.0.0.0", "::") else "127.0.0.1"
    collector_url = f"http://{host}:{args.http_port}"
    parts = [
        Part("collector", [*python, "collector", "--db", args.db, "--host", args.host,
                           "--http-port", str(args.http_port),
                           "--grpc-port", str(args.grpc_port)], collector_url + "/healthz"),
        Part("dashboard", [*python, "dashboard", "--collector", collector_url,
                           "--host", args.host, "--port", str(args.dashboard_port)],
             f"http://{host}:{args.dashboard_port}/_stcore/health"),
    ]
    if args.demo:
        parts.append(Part("demo", [*python, "demo", "--endpoint", collector_url, "--forever",
                                   "--pace", str(args.demo_pace)], None))
    return parts


def run(parts: Sequence[Part], urls: Sequence[str]) -> int:
    """Start the parts in order, print the URLs, wait for a signal or a death, stop all."""
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT,
                                                                     signal.SIGTERM)}
    started: list[Part] = []
    code = 0
    try:
        for part in parts:
            part.start()
            started.append(part)
            if not part.wait_ready(time.monotonic() + READY_TIMEOUT_S):
                print(f"loopscope up: {part.name} did not start; its last output:\n  "
                      + "\n  ".join(part.log[-15:]), file=sys.stderr)
                return 1
        print("loopscope up: running. " + "  ".join(urls) + "  (Ctrl-C stops everything)",
              flush=True)
        while not stop.wait(0.5):
            dead = next((p for p in started if not p.alive()), None)
            if dead is not None:
                print(f"loopscope up: {dead.name} exited ({dead.proc.returncode if dead.proc else '?'}"
                      f"); stopping the rest", file=sys.stderr)
                code = 1
                break
    finally:
        print("loopscope up: stopping…", file=sys.stderr, flush=True)
        for part in reversed(started):
            part.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code


def cmd_up(args: argparse.Namespace) -> int:
    """``loopscope up``."""
    parts = plan(args)
    host = args.host if args.host not in ("0.0.0.0", "::") else "127.0.0.1"
    urls = [f"dashboard: http://{host}:{args.dashboard_port}",
            f"OTLP/HTTP: http://{host}:{args.http_port}/v1/traces"]
    if args.grpc_port:
        urls.append(f"OTLP/gRPC: {host}:{args.grpc_port}")
    return run(parts, urls)
