"""Peak memory of a collector under eight concurrent 30 MiB requests.

Starts ``loopscope collector`` on a fresh store, sends eight OTLP/HTTP protobuf requests of
about 30 MiB each (28,000 GenAI tool spans with ~900 bytes of content) at the same time, each
client retrying after ``Retry-After`` on a 503 as OTLP exporters do, until all eight are
acknowledged. Reports the collector's peak RSS (``VmHWM``), its RSS once idle again, the 503s
answered and how long until every request was stored. ``--no-limits`` lifts the cap on bytes
in flight, to see what it bounds.

``--minimal`` sends the smallest spans OTLP allows instead (29 MiB is 570,000 of them): a
request that decodes to more than the collector holds at once is answered 413.

Run:  .venv/bin/python benchmarks/bench_memory.py [--requests 8] [--spans 28000] [--no-limits]
          [--minimal --spans 570000] [--collector-arg=--max-inflight-bytes=41943040 ...]
"""

from __future__ import annotations

import argparse
import http.client
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "tests" / "collector"))

from collector_process import free_port  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import Span  # noqa: E402
from otlp_requests import request, tool_span  # noqa: E402


def build(spans: int, minimal: bool = False) -> bytes:
    trace = os.urandom(16)
    if minimal:  # the smallest span OTLP allows: ids, a name, two times
        return request([Span(trace_id=trace, span_id=os.urandom(8), name="s",
                             start_time_unix_nano=1, end_time_unix_nano=2)
                        for _ in range(spans)]).SerializeToString()
    return request([
        tool_span(trace, os.urandom(8), tool="search", args='{"q": "%s"}' % ("x" * 400),
                  result="y" * 500, start_ns=1_700_000_000_000_000_000 + i * 1000)
        for i in range(spans)
    ]).SerializeToString()


def status(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmHWM", "VmRSS"):
            fields[name] = int(value.split()[0]) // 1024
    return fields


def send(port: int, body: bytes, refused: list[int], too_large: list[int]) -> None:
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        answer = conn.getresponse()
        answer.read()
        conn.close()
        if answer.status == 200:
            return
        if answer.status == 413:  # decodes to more than the collector holds: not retried
            too_large.append(1)
            return
        assert answer.status == 503, answer.status
        refused.append(1)
        time.sleep(float(answer.getheader("Retry-After") or 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--spans", type=int, default=28_000)
    parser.add_argument("--no-limits", action="store_true")
    parser.add_argument("--minimal", action="store_true",
                        help="minimal spans (ids, name, times: about 51 bytes each on the "
                             "wire, 10x that decoded) instead of tool spans with content")
    parser.add_argument("--collector-arg", action="append", default=[],
                        help="an argument for the collector, such as --store-memory=1GB")
    args = parser.parse_args()
    bodies = [build(args.spans, args.minimal) for _ in range(args.requests)]
    print(f"{args.requests} requests of {len(bodies[0]) / 2**20:.1f} MiB "
          f"({args.spans} spans each)")
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        extra = ["--max-inflight-bytes", str(2**40)] if args.no_limits else []
        extra += args.collector_arg
        proc = subprocess.Popen(
            [sys.executable, "-m", "loopscope", "collector", "--db", f"{tmp}/bench.duckdb",
             "--http-port", str(port), "--grpc-port", "0", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            idle = status(proc.pid)["VmRSS"]
            refused: list[int] = []
            too_large: list[int] = []
            start = time.perf_counter()
            threads = [threading.Thread(target=send, args=(port, body, refused, too_large))
                       for body in bodies]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - start
            time.sleep(2)
            after = status(proc.pid)
        finally:
            proc.terminate()
            proc.wait(60)
    print(f"RSS idle before: {idle} MiB; peak (VmHWM): {after['VmHWM']} MiB; "
          f"after: {after['VmRSS']} MiB; 503 answers: {len(refused)}; "
          f"413 answers: {len(too_large)}; all answered in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
