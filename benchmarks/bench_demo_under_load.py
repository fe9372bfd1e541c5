"""The README's demo under load: are the spans the agents drop shown where the numbers are read?

Runs what ``loopscope up --demo`` runs (a collector on a fresh store and the demo agents,
``loopscope demo --forever --pace 0.05``) for ``--minutes`` (default 5) while CPU-bound
processes hold every core, then stops the agents and reports:

- what the agents' SDK counted (its last line: spans exported and dropped);
- what the store says was lost (the ``span_loss`` read, which the Overview page, ``loopscope
  metrics`` and ``/metrics`` show) and how many stored runs are incomplete;
- whether every drop is shown: SDK dropped − shown dropped (drops no later batch reported:
  only at exit, when no batch gets through after them).

Run: ``.venv/bin/python benchmarks/bench_demo_under_load.py [--minutes 5] [--hogs 2]``
(record the result in BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PYTHON = [sys.executable, "-m", "loopscope"]


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:
        return bytes(response.read())


def _wait_healthy(url: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the collector exited before it was ready")
        try:
            _get(url + "/healthz")
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the collector did not start within 60 s")


def _ctrl_c_stops() -> None:
    """In the demo's process: Ctrl-C (SIGINT) is KeyboardInterrupt, also when this benchmark
    runs in the background of a shell, whose children inherit SIGINT ignored (and Python then
    leaves it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def main() -> int:
    """Run the demo under load and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2,
                        help="CPU-bound processes (default: one per core)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="loopscope-load-"))
    port = _port()
    url = f"http://127.0.0.1:{port}"
    collector = subprocess.Popen(
        [*PYTHON, "collector", "--db", str(folder / "loopscope.duckdb"), "--http-port",
         str(port), "--grpc-port", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    hogs: list[subprocess.Popen[bytes]] = []
    demo: subprocess.Popen[str] | None = None
    try:
        _wait_healthy(url, collector)
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.hogs)]
        demo = subprocess.Popen([*PYTHON, "demo", "--endpoint", url, "--forever", "--pace",
                                 "0.05"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                                preexec_fn=_ctrl_c_stops)
        time.sleep(args.minutes * 60)
        demo.send_signal(signal.SIGINT)
        try:
            _, log = demo.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # say where it hangs (faulthandler), then go on
            demo.send_signal(signal.SIGABRT)
            _, log = demo.communicate(timeout=30)
            print("the demo did not stop within 60 s of Ctrl-C; where it was:\n"
                  + log[-3000:], file=sys.stderr)
        for hog in hogs:
            hog.kill()
            hog.wait()
        time.sleep(2)  # (the last batch's commit)
        loss = json.loads(_get(url + "/v1/reads/span_loss"))["rows"]
        report = json.loads(_get(url + "/v1/reads/metrics_breakdown"))["rows"]
        metrics = _get(url + "/metrics").decode()
    finally:
        for hog in hogs:
            hog.kill()
        if demo is not None and demo.poll() is None:
            demo.kill()
        collector.send_signal(signal.SIGINT)
        collector.wait(60)
    final = re.findall(r"demo: stopped after (\d+) runs, (\d+) spans exported, (\d+) dropped",
                       log)
    at_exit = sum(int(n) for n in re.findall(r"(\d+) spans were not sent within", log))
    if not final:  # (it hung: its last progress line, every 25 runs)
        final = re.findall(r"demo: (\d+) runs, (\d+) spans exported, (\d+) dropped", log)
    if not final:
        raise SystemExit("the demo printed no count; its log ends:\n" + log[-2000:])
    runs, exported, dropped = (int(x) for x in final[-1])
    dropped += at_exit
    total = next(r for r in loss if r["dimension"] == "all")
    everything = next((r for r in report if r["dimension"] == "all"), {})
    shown = int(total["dropped"])
    print(f"demo under {args.hogs} CPU hogs for {args.minutes:g} min: {runs} runs")
    print(f"  the agents' SDK: {exported} spans exported, {dropped} dropped "
          f"({at_exit} at exit)")
    reasons = {k: total[k] for k in ("unreachable", "throttled", "timed_out", "rejected",
                                     "queue_full", "at_exit") if total[k]}
    print(f"  shown (span_loss: Overview, loopscope metrics, /metrics): {shown} dropped "
          f"{reasons}; {total['incomplete_runs']} runs named incomplete by the SDK")
    print(f"  stored: {everything.get('episodes', 0)} runs, "
          f"{everything.get('incomplete_episodes', 0)} incomplete")
    print(f"  drops not shown: {dropped - shown}")
    refused = [line for line in metrics.splitlines()
               if line.startswith(("loopscope_requests_overloaded_total",
                                   "loopscope_requests_not_admitted_total",
                                   "loopscope_spans_received_total",
                                   "loopscope_spans_stored_total"))]
    print("  collector: " + "; ".join(refused))
    return 0


if __name__ == "__main__":
    sys.exit(main())
