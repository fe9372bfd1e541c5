"""Sustained ingest: spans per second stored, detected and queryable, against the ceiling.

Three receivers get the same load from the same generator, one after the other:
- loopscope's collector (``loopscope collector``, a real DuckDB file): the clock stops when a
  named read shows every tool call stored and the last episode's flags present;
- the decode-and-drop receiver (the same HTTP server and decoder, nothing stored): the ceiling;
- optionally Arize Phoenix (``--phoenix PATH_TO_phoenix``), what users run today: the clock
  stops when its REST API returns every span.
The generator runs in separate processes with persistent connections, sending pre-built OTLP
protobuf requests (GenAI ``execute_tool`` spans with content, 20 calls per episode, a third
of the episodes spinning). Also timed in this process: the detection core alone over the same
calls (no decoding, storing or HTTP); twice its rate bounds any collector running the core on
two cores. Reported: spans/s for each, the ratios, the collector's
memory per active episode, and its per-request acknowledgement latency (a 200 is sent once the
request's spans are stored and their flags written, so this bounds how long a flag takes to be
in the store after its span reaches the collector).

With ``--against CHECKOUT`` (another checkout, e.g. ``git worktree add --detach /tmp/base
main``), this checkout's collector and that one's take the same load round by round in one
run (``--rounds``, order alternating), each on a fresh store: medians and their ratio.

Run:  .venv/bin/python benchmarks/bench_collector.py [--spans 200000] [--connections 4]
          [--against /tmp/base --rounds 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "tests" / "collector"))

from otlp_requests import request, tool_span  # noqa: E402

CALLS_PER_EPISODE = 20


def build_requests(total: int, per_request: int, seed: int) -> list[bytes]:
    """Pre-serialised export requests holding ``total`` tool spans."""
    rng = __import__("random").Random(seed)
    bodies, spans = [], []
    start = 1_700_000_000_000_000_000
    episode = 0
    while episode * CALLS_PER_EPISODE < total:
        trace_id = rng.randbytes(16)
        spinning = episode % 3 == 0
        for i in range(CALLS_PER_EPISODE):
            query = "same" if spinning and i >= 5 else f"e{episode}q{i}"
            spans.append(tool_span(trace_id, rng.randbytes(8), tool="search",
                                   args=f'{{"q": "{query}", "limit": 10}}',
                                   result=f"results for {query}: " + "x" * 80,
                                   start_ns=start + i * 1_000_000))
            if len(spans) == per_request:
                bodies.append(request(spans).SerializeToString())
                spans = []
        episode += 1
    if spans:
        bodies.append(request(spans).SerializeToString())
    return bodies


def _send(port: int, bodies: list[bytes], path: str, out: multiprocessing.Queue) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    failures = 0
    latencies = []
    for body in bodies:
        while True:
            start = time.perf_counter()
            conn.request("POST", path, body, {"Content-Type": "application/x-protobuf"})
            response = conn.getresponse()
            response.read()
            if response.status == 200:
                latencies.append(time.perf_counter() - start)
                break
            failures += 1
            time.sleep(float(response.getheader("Retry-After") or 1))
    out.put((failures, latencies))


LAST_LATENCIES: list[float] = []
"""Seconds from sending each request to its 200 of the last ``run_load``: for loopscope, the
spans are stored and their flags written (same transaction) when the 200 is sent."""


def run_load(port: int, bodies: list[bytes], connections: int, path: str = "/v1/traces") -> int:
    """Send every body over ``connections`` processes; returns the number of retried requests."""
    out: multiprocessing.Queue = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=_send, args=(port, bodies[i::connections], path, out))
             for i in range(connections)]
    for proc in procs:
        proc.start()
    results = [out.get() for _ in procs]
    for proc in procs:
        proc.join()
    LAST_LATENCIES[:] = sorted(t for _, latencies in results for t in latencies)
    return sum(failures for failures, _ in results)


def latency_summary() -> dict:
    """p50 / p95 / max of the last load's request latencies, in seconds."""
    done = LAST_LATENCIES
    if not done:
        return {}
    return {"p50_s": round(done[len(done) // 2], 4),
            "p95_s": round(done[min(len(done) - 1, int(len(done) * 0.95))], 4),
            "max_s": round(done[-1], 4)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def checkout_env(checkout: Path | None) -> dict[str, str] | None:
    """The environment that runs ``checkout``'s loopscope (None: this checkout's)."""
    if checkout is None:
        return None
    paths = [str(checkout / part) for part in ("instrumentation", "collector", "dashboard")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def bench_loopscope(bodies: list[bytes], total: int, connections: int, tmp: Path,
                    checkout: Path | None = None) -> dict:
    port = free_port()
    store = tmp / f"bench-{port}.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "loopscope", "collector", "--db",
                             str(store), "--http-port", str(port),
                             "--grpc-port", "0"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=checkout_env(checkout))
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/healthz")
        rss_before = rss_mb(proc.pid)
        start = time.perf_counter()
        retries = run_load(port, bodies, connections)
        acked = time.perf_counter()
        while True:  # queryable: every call stored and detected
            summary = json.load(urllib.request.urlopen(base + "/v1/reads/summary"))["rows"][0]
            if summary["tool_calls"] >= total:
                break
            time.sleep(0.01)
        done = time.perf_counter()
        metrics = urllib.request.urlopen(base + "/metrics").read().decode()
        active = next(float(line.split()[-1]) for line in metrics.splitlines()  # (an older
                      if line.startswith(("loopscope_detection_active_runs",  # checkout's name)
                                          "loopscope_detection_active_episodes")))
        rss_after = rss_mb(proc.pid)
        return {"seconds": done - start, "ack_seconds": acked - start,
                "spans_per_s": total / (done - start), "retried_requests": retries,
                "ack_latency_per_request": latency_summary(),
                "flagged_episodes": summary["flagged_episodes"], "active_episodes": active,
                "rss_mb": rss_after,
                "kb_per_active_episode": (rss_after - rss_before) * 1024 / max(active, 1)}
    finally:
        proc.terminate()
        proc.wait(30)


def bench_drop(bodies: list[bytes], total: int, connections: int,
               checkout: Path | None = None) -> dict:
    port = free_port()
    receiver = (checkout / "benchmarks" if checkout else ROOT) / "_drop_receiver.py"
    proc = subprocess.Popen([sys.executable, str(receiver), str(port)],
                            env=checkout_env(checkout))
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        start = time.perf_counter()
        run_load(port, bodies, connections)
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "spans_per_s": total / seconds}
    finally:
        proc.terminate()
        proc.wait(30)


def bench_phoenix(phoenix: str, bodies: list[bytes], total: int, connections: int,
                  tmp: Path) -> dict:
    port = free_port()
    env = {**os.environ, "PHOENIX_PORT": str(port), "PHOENIX_WORKING_DIR": str(tmp / "phoenix"),
           "PHOENIX_GRPC_PORT": str(free_port())}
    proc = subprocess.Popen([phoenix, "serve"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/healthz", timeout=180)
        start = time.perf_counter()
        run_load(port, bodies, connections)
        acked = time.perf_counter()
        url = base + "/v1/projects/default/spans?limit=1000"
        while True:
            seen, cursor = 0, None
            while True:
                page = json.load(urllib.request.urlopen(url + (f"&cursor={cursor}" if cursor
                                                               else ""), timeout=120))
                seen += len(page.get("data", []))
                cursor = page.get("next_cursor")
                if not cursor:
                    break
            if seen >= total:
                break
            time.sleep(1)
        done = time.perf_counter()
        return {"seconds": done - start, "ack_seconds": acked - start,
                "spans_per_s": total / (done - start),
                "ack_spans_per_s": total / (acked - start), "rss_mb": rss_mb(proc.pid)}
    finally:
        proc.terminate()
        proc.wait(60)


def bench_detection_alone(bodies: list[bytes], total: int) -> dict:
    """The detection core alone over the same tool calls, in this process on one core:
    decoding and normalising happen before the clock starts, nothing is stored. With both
    cores of the machine doing nothing else, twice this is an upper bound on what any
    collector that runs this core on every span can make queryable."""
    from loopscope_collector.normalize.dispatch import normalize_span
    from loopscope_collector.pipeline.detection import StreamingDetector
    from loopscope_collector.receive.decode import decode_request

    by_episode: dict[str, list] = {}
    for body in bodies:
        for span in decode_request(body, content_type="application/x-protobuf",
                                   content_encoding=None, max_bytes=1 << 30):
            row = normalize_span(span).tool_call
            if row is not None:
                by_episode.setdefault(row.episode_id or row.trace_id, []).append(row)
    detector = StreamingDetector()
    start = time.perf_counter()
    for episode_id, rows in by_episode.items():
        detector.add(episode_id, rows, stored=())
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "spans_per_s": total / seconds}


def against(args: argparse.Namespace, bodies: list[bytes], tmp: Path) -> dict:
    """This checkout's collector and ``--against``'s, on the same load, round by round
    (the order alternating), each on a fresh store: medians and their ratio, which holds on
    a noisy machine where two separate runs would not compare."""
    import statistics

    runs: dict[str, list[dict]] = {"this": [], "against": []}
    drops: dict[str, list[float]] = {"this": [], "against": []}
    for n in range(args.rounds):
        order = [("this", None), ("against", args.against)]
        for name, checkout in order if n % 2 == 0 else order[::-1]:
            drops[name].append(bench_drop(bodies, args.spans, args.connections,
                                          checkout)["spans_per_s"])
            runs[name].append(bench_loopscope(bodies, args.spans, args.connections, tmp,
                                              checkout))
    result: dict = {"spans": args.spans, "per_request": args.per_request,
                    "connections": args.connections, "rounds": args.rounds,
                    "against_checkout": str(args.against)}
    for name in runs:
        rates = [r["spans_per_s"] for r in runs[name]]
        result[name] = {
            "spans_per_s_median": statistics.median(rates),
            "spans_per_s_rounds": [round(r) for r in rates],
            "decode_and_drop_spans_per_s_median": statistics.median(drops[name]),
            "ack_p50_s_median": statistics.median(
                r["ack_latency_per_request"]["p50_s"] for r in runs[name]),
            "ack_p95_s_median": statistics.median(
                r["ack_latency_per_request"]["p95_s"] for r in runs[name]),
            "retried_requests": sum(r["retried_requests"] for r in runs[name]),
            "rss_mb_max": max(r["rss_mb"] for r in runs[name]),
        }
    result["ingest_this_vs_against"] = (result["this"]["spans_per_s_median"]
                                        / result["against"]["spans_per_s_median"])
    result["decode_and_drop_this_vs_against"] = (
        result["this"]["decode_and_drop_spans_per_s_median"]
        / result["against"]["decode_and_drop_spans_per_s_median"])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--per-request", type=int, default=500)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--phoenix", help="path to the `phoenix` command of an arize-phoenix "
                                          "install (its own venv); omitted: not measured")
    parser.add_argument("--phoenix-spans", type=int, default=20_000,
                        help="spans sent to Phoenix (it is slow; default 20000)")
    parser.add_argument("--against", type=Path,
                        help="another checkout of loopscope (e.g. git worktree add --detach "
                             "/tmp/base main): its collector and decode-and-drop receiver are "
                             "measured in the same run, round by round, beside this one's")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of each with --against (default 3)")
    args = parser.parse_args()
    bodies = build_requests(args.spans, args.per_request, seed=1)
    tmp = Path(tempfile.mkdtemp(prefix="loopscope-bench-"))
    if args.against is not None:
        try:
            print(json.dumps(against(args, bodies, tmp), indent=2))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    try:
        drop = bench_drop(bodies, args.spans, args.connections)
        ours = bench_loopscope(bodies, args.spans, args.connections, tmp)
        alone = bench_detection_alone(bodies, args.spans)
        result = {"spans": args.spans, "per_request": args.per_request,
                  "connections": args.connections, "decode_and_drop": drop, "loopscope": ours,
                  "detection_alone_one_core": alone,
                  "loopscope_vs_ceiling": ours["spans_per_s"] / drop["spans_per_s"],
                  "detection_alone_two_cores_vs_ceiling":
                      2 * alone["spans_per_s"] / drop["spans_per_s"]}
        if args.phoenix:
            small = build_requests(args.phoenix_spans, args.per_request, seed=2)
            phoenix = bench_phoenix(args.phoenix, small, args.phoenix_spans, args.connections,
                                    tmp)
            result["phoenix"] = phoenix
            result["loopscope_vs_phoenix"] = ours["spans_per_s"] / phoenix["spans_per_s"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
