"""Answer time under overload: how long every export request waits for its answer.

A collector that cannot take a request now must say so at once (503 with Retry-After), not
keep the client waiting until its exporter gives up (issue 29). Measured per checkout, on a
fresh store each, with the same pre-built load as ``bench_collector.py``:

1. capacity: the spans per second the collector acknowledges under a closed loop (each of
   ``--connections`` clients sends its next request when the last is answered);
2. overload: an open loop at ``--overload`` times that capacity for ``--seconds``: requests
   of ``--per-request`` spans are sent on a schedule, whatever the answers, from two client
   processes with many connections each, and each answer's time is counted from the moment
   its request was due (so a client that had to wait for a free connection counts against
   the collector). Throttled requests are not retried (the load is the schedule).

Reported: the answer time of every request (p50, p99, max; a request not answered within
``--timeout`` counts as not answered), the answers by status, the collector's ingest
while overloaded (``loopscope_spans_stored_total`` read before the overload and once it
ends, over the time from the overload's start to the commit that count includes: the last
growth of the store's write-ahead log before it was read, watched every 20 ms; so a
collector storing large batches is not measured by where the window happened to cut them),
the spans acknowledged
within OpenTelemetry's default export timeout (10 s: what an exporter saw delivered; past it
the exporter gave up and retries or drops, whatever was stored), and how long spans
waited from being queued to their commit (``loopscope_store_wait_seconds``, where the
checkout has it: what a flag takes to reach the store once received). With ``--against
CHECKOUT`` (``git worktree add --detach /tmp/base BASE``) that checkout is measured in the
same run, round by round, the order alternating, at the same offered load (``--overload``
times the mean of both capacities): the ingest ratio holds where absolute rates do not.

Run:  .venv/bin/python benchmarks/bench_answer_time.py [--against /tmp/base] [--rounds 2]
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_collector import build_requests, checkout_env, free_port, run_load, wait_http

CLIENT_PROCESSES = 2
EXPORT_TIMEOUT_S = 10.0
"""OpenTelemetry's default export timeout: an exporter that waited longer gave up on the
request (it retries or drops it), whatever the collector stored."""
THREADS_PER_CLIENT = 48


def _open_loop(port: int, bodies: list[bytes], rate: float, offset: float, start: float,
               give_up_at: float, timeout: float, out: multiprocessing.Queue) -> None:
    """Send ``bodies`` at ``rate`` requests/s from ``start + offset``; put each request's
    (status, seconds from due to answer) on ``out``; 0 for no answer in time."""
    local = threading.local()
    results: list[tuple[int, float]] = []
    lock = threading.Lock()

    def send(body: bytes, due: float) -> None:
        if time.time() > give_up_at:
            with lock:
                results.append((0, math.inf))
            return
        try:
            conn = getattr(local, "conn", None) or http.client.HTTPConnection(
                "127.0.0.1", port, timeout=timeout)
            local.conn = conn
            conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
            response = conn.getresponse()
            response.read()
            status = response.status
            if response.getheader("Connection", "").lower() == "close":
                conn.close()
                local.conn = None
        except OSError:
            local.conn = None
            status = 0
        waited = time.time() - due
        with lock:
            results.append((status, waited if status else math.inf))

    with ThreadPoolExecutor(THREADS_PER_CLIENT) as pool:
        for k, body in enumerate(bodies):
            due = start + offset + k / rate
            pause = due - time.time()
            if pause > 0:
                time.sleep(pause)
            pool.submit(send, body, due)
    out.put(results)


COMMIT_POLL_S = 0.02


def _watch_commits(wal: Path, stop: threading.Event, grew: list[float]) -> None:
    """Append to ``grew`` the moments (``time.time()``) the write-ahead log ``wal`` was seen
    longer than at the last look (a commit; a checkpoint shortens it), until ``stop``."""
    def size() -> int:
        try:
            return wal.stat().st_size
        except OSError:  # (no log yet)
            return 0

    last = size()
    while not stop.wait(COMMIT_POLL_S):
        now = size()
        if now > last:
            grew.append(time.time())
        last = now


def _stored(base: str) -> int:
    text = urllib.request.urlopen(base + "/metrics", timeout=60).read().decode()
    return int(next(float(line.split()[-1]) for line in text.splitlines()
                    if line.startswith("loopscope_spans_stored_total ")))


def _store_waits(base: str) -> tuple[dict[str, float], float, float] | None:
    """``loopscope_store_wait_seconds`` now (a checkout without it: None): the cumulative
    buckets by ``le``, the sum and the count."""
    text = urllib.request.urlopen(base + "/metrics", timeout=60).read().decode()
    buckets: dict[str, float] = {}
    total = count = 0.0
    for line in text.splitlines():
        if line.startswith("loopscope_store_wait_seconds_bucket{"):
            buckets[line.split('le="')[1].split('"')[0]] = float(line.split()[-1])
        elif line.startswith("loopscope_store_wait_seconds_sum"):
            total = float(line.split()[-1])
        elif line.startswith("loopscope_store_wait_seconds_count"):
            count = float(line.split()[-1])
    return (buckets, total, count) if buckets else None


def _store_wait(before: tuple[dict[str, float], float, float] | None,
                after: tuple[dict[str, float], float, float] | None) -> dict[str, object] | None:
    """The time from queued to stored over the window: its mean, and the bucket bound under
    which 99% of the requests were stored."""
    if before is None or after is None or after[2] <= before[2]:
        return None
    count = after[2] - before[2]
    p99 = next(le for le, n in after[0].items() if n - before[0].get(le, 0.0) >= 0.99 * count)
    return {"mean_s": round((after[1] - before[1]) / count, 3), "p99_under_s": p99}


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def measure(checkout: Path | None, capacity_bodies: list[bytes], capacity_spans: int,
            overload_bodies: list[bytes] | None, rate: float, per_request: int, seconds: float,
            timeout: float, connections: int, tmp: Path) -> dict:
    """One collector: its closed-loop capacity, then (with ``overload_bodies``) the open
    loop at ``rate`` requests/s."""
    port = free_port()
    store = tmp / f"answer-{port}.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "loopscope", "collector", "--db",
                             str(store), "--http-port", str(port),
                             "--grpc-port", "0"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=checkout_env(checkout))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz")
        started = time.perf_counter()
        run_load(port, capacity_bodies, connections)
        capacity = capacity_spans / (time.perf_counter() - started)
        result: dict = {"capacity_spans_per_s": round(capacity)}
        if overload_bodies is None:
            return result
        out: multiprocessing.Queue = multiprocessing.Queue()
        before = _stored(base)
        waits_before = _store_waits(base)
        start = time.time() + 1.0
        give_up_at = start + seconds + timeout
        stop_watching, commits = threading.Event(), []
        watcher = threading.Thread(target=_watch_commits, args=(
            store.with_name(store.name + ".wal"), stop_watching, commits), daemon=True)
        watcher.start()
        procs = [multiprocessing.Process(target=_open_loop, args=(
            port, overload_bodies[i::CLIENT_PROCESSES], rate / CLIENT_PROCESSES,
            i / rate, start, give_up_at, timeout, out)) for i in range(CLIENT_PROCESSES)]
        for p in procs:
            p.start()
        time.sleep(max(0.0, start + seconds - time.time()))
        stored = _stored(base) - before
        read_at = time.time()
        stop_watching.set()
        watcher.join()
        # the count read includes the commits up to the last one seen before it was read
        last_commit = max((t for t in commits if start < t <= read_at), default=None)
        window = last_commit - start if last_commit is not None else seconds
        waits = _store_wait(waits_before, _store_waits(base))
        answers = [a for _ in procs for a in out.get()]
        for p in procs:
            p.join()
        times = sorted(t for _, t in answers)
        statuses: dict[str, int] = {}
        for status, _ in answers:
            key = str(status) if status else "no answer"
            statuses[key] = statuses.get(key, 0) + 1
        ok = sorted(t for s, t in answers if s == 200)
        result.update({
            "offered_spans_per_s": round(rate * per_request),
            "requests": len(answers), "answers": statuses,
            "answer_p50_s": round(_percentile(times, 0.5), 3),
            "answer_p99_s": round(_percentile(times, 0.99), 3),
            "answer_max_s": round(times[-1], 3),
            "stored_answer_p99_s": round(_percentile(ok, 0.99), 3) if ok else None,
            "ingest_spans_per_s": round(stored / window),
            "ingest_window_s": round(window, 2),
            # what an exporter with OpenTelemetry's default timeout saw acknowledged
            "acked_in_time_spans_per_s": round(
                sum(t <= EXPORT_TIMEOUT_S for t in ok) * per_request / seconds),
            "store_wait": waits,
        })
        return result
    finally:
        proc.terminate()
        proc.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout of loopscope, "
                        "measured in the same run at the same offered load")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--per-request", type=int, default=200)
    parser.add_argument("--capacity-spans", type=int, default=20_000)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--overload", type=float, default=4.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=40.0,
                        help="a request not answered this long after it was due counts as "
                             "not answered (default 40 s: past the old 30 s acknowledgement)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="loopscope-answer-"))
    checkouts: list[tuple[str, Path | None]] = [("this", None)]
    if args.against is not None:
        checkouts.append(("against", args.against.resolve()))
    capacity_bodies = build_requests(args.capacity_spans, args.per_request, seed=1)
    try:
        capacities = [measure(path, capacity_bodies, args.capacity_spans, None, 0,
                              args.per_request, 0, 0, args.connections, tmp)
                      ["capacity_spans_per_s"] for _, path in checkouts]
        offered = args.overload * statistics.mean(capacities)
        rate = offered / args.per_request
        total = int(rate * args.seconds) * args.per_request
        runs: dict[str, list[dict]] = {name: [] for name, _ in checkouts}
        for round_ in range(args.rounds):
            overload_bodies = build_requests(total, args.per_request, seed=10 + round_)
            order = checkouts if round_ % 2 == 0 else checkouts[::-1]
            for name, path in order:
                runs[name].append(measure(path, capacity_bodies, args.capacity_spans,
                                          overload_bodies, rate, args.per_request,
                                          args.seconds, args.timeout, args.connections, tmp))
        result: dict = {"capacities_spans_per_s": dict(zip(runs, capacities, strict=True)),
                        "offered_spans_per_s": round(offered), "per_request": args.per_request,
                        "seconds": args.seconds, "runs": runs}
        if args.against is not None:
            result["ingest_this_vs_against"] = round(
                statistics.median(r["ingest_spans_per_s"] for r in runs["this"])
                / statistics.median(r["ingest_spans_per_s"] for r in runs["against"]), 3)
            result["acked_in_time_this_vs_against"] = round(
                statistics.median(r["acked_in_time_spans_per_s"] for r in runs["this"])
                / max(statistics.median(r["acked_in_time_spans_per_s"]
                                        for r in runs["against"]), 1), 3)
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
