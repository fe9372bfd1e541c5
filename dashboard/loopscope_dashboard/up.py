"""``loopscope up``: the whole system on one machine, in one command.

Starts the collector (embedded DuckDB file), the dashboard and, with ``--demo``, a fleet of
scripted agents that send live traffic through the real SDK and real OTLP. Each part is its
own process; ``up`` waits until each answers before starting the next, prints the URLs, and
on Ctrl-C (or SIGTERM) stops them all: agents first, then the dashboard, then the collector,
which stores what is queued before it exits. Children are also asked by the kernel to exit if
``up`` itself is killed, so none is orphaned.

A part that dies while the others run is started again (``Backoff`` says when), the others
carrying on meanwhile: the agents' SDK and the dashboard each outlive a collector that is away
for a while. Each restart is printed, and written to the file the dashboard's banner reads
(``restarts.py``). A part that does not start at all, or keeps dying right after each start
(its port taken, say), stops ``up`` with its last output instead.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

from loopscope.environment_variables import DEFAULT_GRPC_PORT, DEFAULT_HTTP_PORT
from loopscope_collector.arguments import port_number
from loopscope_collector.environment_variables import DEFAULT_DB, default_db

from . import restarts
from .environment_variables import UP_STATUS_ENV


@dataclass(frozen=True, slots=True)
class Backoff:
    """When ``up`` starts a dead part again, and when it gives up.

    A part that ran ``stable_s`` or longer had started fine: it is started again after
    ``first_s``. A part that dies sooner after its start is dying right after it: each such
    death in a row doubles the pause (up to ``cap_s``), and the ``give_up_after``-th stops
    ``up``, so a part that cannot stay up (its port taken, its store unreadable) is reported
    instead of restarted forever.
    """

    first_s: float = 1.0
    cap_s: float = 30.0
    stable_s: float = 30.0
    give_up_after: int = 5

    def pause(self, quick_deaths: int) -> float | None:
        """Seconds to wait before the next start, after ``quick_deaths`` deaths in a row
        within ``stable_s`` of a start (0: the part had run stably); None: give up."""
        if quick_deaths >= self.give_up_after:
            return None
        return min(self.first_s * 2.0**quick_deaths, self.cap_s)


BACKOFF: Final = Backoff()

UP_HELP = f"""\
Bring up the collector, the dashboard and (with --demo) demo agents on this machine.

The collector receives OTLP on --http-port (HTTP) and --grpc-port (gRPC) and keeps its store
in --db; the dashboard reads it live. --demo adds scripted agents from the scenario library
(healthy runs, read spins, oscillation, parameter jitter, legitimate polling, write timeouts
with reconciles, budget stops) in observe, warn and enforce modes, sending real OTLP through
the loopscope SDK, so the dashboard fills with live traffic.

A part that dies is started again after a pause: {BACKOFF.first_s:g} s, doubled (up to \
{BACKOFF.cap_s:g} s) for each
death in a row within {BACKOFF.stable_s:g} s of its start; the {BACKOFF.give_up_after}th such \
death stops everything. Each
restart is printed and shown on the dashboard's banner. Ctrl-C stops everything.

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
    """One child process of ``up``, and what ``up`` knows of its deaths."""

    name: str
    args: list[str]
    ready_url: str | None
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    log: list[str] = field(default_factory=list)
    started_at: float = 0.0
    quick_deaths: int = 0
    """Deaths in a row, each within ``Backoff.stable_s`` of its start."""
    restart_at: float | None = None
    """When a dead part is started again (monotonic); None while it runs."""
    restarts: int = 0
    last_exit: int = 0
    last_restart_at: float = 0.0

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        self.started_at = time.monotonic()
        assert self.proc.stdout is not None
        threading.Thread(target=self._pump, args=(self.proc.stdout,), name=f"up-{self.name}",
                         daemon=True).start()

    def _pump(self, output: IO[bytes]) -> None:
        for raw in output:
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

    def died(self, backoff: Backoff) -> bool:
        """Note that the process ended and schedule its restart; False: give up on it."""
        assert self.proc is not None and self.proc.returncode is not None
        self.last_exit = self.proc.returncode
        ran_s = time.monotonic() - self.started_at
        self.quick_deaths = 0 if ran_s >= backoff.stable_s else self.quick_deaths + 1
        pause = backoff.pause(self.quick_deaths)
        ended = restarts.how_it_ended(self.last_exit)
        if pause is None:
            print(f"loopscope up: {self.name} exited ({ended}) {ran_s:.0f} s after it started, "
                  f"{self.quick_deaths} times in a row within {backoff.stable_s:g} s of a start; "
                  "giving up. Its last output:\n  " + "\n  ".join(self.log[-15:]),
                  file=sys.stderr, flush=True)
            return False
        self.restart_at = time.monotonic() + pause
        print(f"loopscope up: {self.name} exited ({ended}) after {ran_s:.0f} s; starting it "
              f"again in {pause:g} s", file=sys.stderr, flush=True)
        return True

    def restart(self) -> None:
        """Start the process again, now that its pause is over."""
        self.restart_at = None
        self.restarts += 1
        self.last_restart_at = time.time()
        self.start()
        print(f"loopscope up: {self.name} started again (restart {self.restarts})",
              file=sys.stderr, flush=True)

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


def plan(args: argparse.Namespace, status: Path) -> list[Part]:
    """The processes ``up`` starts, in order; the dashboard reads restarts from ``status``."""
    python = [sys.executable, "-m", "loopscope"]
    host = args.host if args.host not in ("0.0.0.0", "::") else "127.0.0.1"
    collector_url = f"http://{host}:{args.http_port}"
    parts = [
        Part("collector", [*python, "collector", "--db", args.db, "--host", args.host,
                           "--http-port", str(args.http_port),
                           "--grpc-port", str(args.grpc_port)], collector_url + "/healthz"),
        Part("dashboard", [*python, "dashboard", "--collector", collector_url,
                           "--host", args.host, "--port", str(args.dashboard_port)],
             f"http://{host}:{args.dashboard_port}/_stcore/health",
             env={**os.environ, UP_STATUS_ENV: str(status)}),
    ]
    if args.demo:
        parts.append(Part("demo", [*python, "demo", "--endpoint", collector_url, "--forever",
                                   "--pace", str(args.demo_pace)], None))
    return parts


def run(parts: Sequence[Part], urls: Sequence[str], *, status: Path,
        backoff: Backoff = BACKOFF) -> int:
    """Start the parts in order, print the URLs, restart a part that dies (noting it in
    ``status``) until a signal comes or a part cannot stay up; stop all."""
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
            if not _tend(started, backoff, status):
                code = 1
                break
    finally:
        print("loopscope up: stopping…", file=sys.stderr, flush=True)
        for part in reversed(started):
            part.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code


def _tend(parts: Sequence[Part], backoff: Backoff, status: Path) -> bool:
    """Notice the parts that died and restart those whose pause is over; False: give up."""
    for part in parts:
        if part.restart_at is None and not part.alive() and not part.died(backoff):
            return False
        if part.restart_at is not None and time.monotonic() >= part.restart_at:
            part.restart()
            restarts.write(status, [
                restarts.Restarts(p.name, p.restarts, p.last_exit, p.last_restart_at)
                for p in parts if p.restarts])
    return True


def cmd_up(args: argparse.Namespace) -> int:
    """``loopscope up``."""
    host = args.host if args.host not in ("0.0.0.0", "::") else "127.0.0.1"
    urls = [f"dashboard: http://{host}:{args.dashboard_port}",
            f"OTLP/HTTP: http://{host}:{args.http_port}/v1/traces"]
    if args.grpc_port:
        urls.append(f"OTLP/gRPC: {host}:{args.grpc_port}")
    with tempfile.TemporaryDirectory(prefix="loopscope-up-") as scratch:
        status = Path(scratch) / "restarts.json"
        return run(plan(args, status), urls, status=status)
