"""N collectors into one DuckLake, against one collector, in one run (issue 17).

Starts a PostgreSQL for the lake's catalog (Debian's server, as the lake tests do) and a local
data directory, then, round by round with the same pre-built OTLP requests
(``bench_collector.build_requests``' episodes: 20 calls each, a third spinning):
- one collector on a DuckDB file (the embedded default);
- one collector on a lake;
- two collectors on one lake, the load generator partitioning episodes by trace id as the
  OpenTelemetry Collector's load_balancing exporter would (half the connections each).
The clock stops when the ``summary`` read (over the whole lake) shows every tool call: the
queryable spans/s. Reported: each, and the ratios two-lake / one-lake, two-lake / file and
one-lake / file. Then ``loopscope metrics``' computation over 1,000,000 tool calls in a lake
(``bench_metrics.build_store`` into a file, moved in with ``loopscope lake import``) against
the same over the file, median of 3.

Run:  .venv/bin/python benchmarks/bench_lake.py [--spans 60000] [--rounds 1] [--calls 1000000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "tests" / "lake"))

from bench_collector import (  # noqa: E402
    CALLS_PER_EPISODE,
    free_port,
    request,
    run_load,
    tool_span,
    wait_http,
)
from lake_place import running_postgres  # noqa: E402


def sharded_requests(total: int, per_request: int, shards: int, seed: int = 1) -> list[list[bytes]]:
    """``bench_collector.build_requests``' episodes, each shard's requests holding only the
    episodes whose trace id hashes to it."""
    import random

    rng = random.Random(seed)
    start = 1_700_000_000_000_000_000
    pending: list[list] = [[] for _ in range(shards)]
    bodies: list[list[bytes]] = [[] for _ in range(shards)]
    episode = 0
    while episode * CALLS_PER_EPISODE < total:
        trace_id = rng.randbytes(16)
        shard = zlib.crc32(trace_id) % shards
        spinning = episode % 3 == 0
        for i in range(CALLS_PER_EPISODE):
            query = "same" if spinning and i >= 5 else f"e{episode}q{i}"
            pending[shard].append(tool_span(
                trace_id, rng.randbytes(8), tool="search",
                args=f'{{"q": "{query}", "limit": 10}}',
                result=f"results for {query}: " + "x" * 80, start_ns=start + i * 1_000_000))
            if len(pending[shard]) == per_request:
                bodies[shard].append(request(pending[shard]).SerializeToString())
                pending[shard] = []
        episode += 1
    for shard, spans in enumerate(pending):
        if spans:
            bodies[shard].append(request(spans).SerializeToString())
    return bodies


def run_collectors(store_args: list[list[str]], shards: list[list[bytes]], total: int,
                   connections: int) -> float:
    """Start one collector per ``store_args``, send each its shard, and return the queryable
    spans/s (every tool call in the ``summary`` read)."""
    ports = [free_port() for _ in store_args]
    procs = [subprocess.Popen([sys.executable, "-m", "loopscope", "collector", *args,
                               "--http-port", str(port), "--grpc-port", "0",
                               "--instance", f"bench-{i}"],
                              stdout=subprocess.DEVNULL)
             for i, (args, port) in enumerate(zip(store_args, ports, strict=True))]
    try:
        for port in ports:
            wait_http(f"http://127.0.0.1:{port}/healthz")
        each = max(1, connections // len(ports))
        start = time.perf_counter()
        loads = [threading.Thread(target=run_load, args=(port, bodies, each))
                 for port, bodies in zip(ports, shards, strict=True)]
        for load in loads:
            load.start()
        for load in loads:
            load.join()
        summary_url = f"http://127.0.0.1:{ports[0]}/v1/reads/summary"
        while json.load(urllib.request.urlopen(summary_url))["rows"][0]["tool_calls"] < total:
            time.sleep(0.05)
        return total / (time.perf_counter() - start)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)


def metrics_over_a_lake(postgres, tmp: Path, calls: int) -> dict[str, float]:
    from bench_metrics import build_store

    from loopscope_collector.metrics.compute import compute_metrics
    from loopscope_collector.storage import open_database, open_lake
    from loopscope_collector.storage.lake import Lake
    from loopscope_collector.storage.lake_import import import_file

    path = tmp / "million.duckdb"
    build_store(path, calls)
    lake = Lake.parse(postgres.catalog(postgres.new_database()), str(tmp / "million-lake"))
    started = time.perf_counter()
    writer = open_lake(lake)
    import_file(writer, path)
    writer.close()
    imported_s = time.perf_counter() - started
    times = {}
    for name, opener in (("file", lambda: open_database(path, read_only=True)),
                         ("lake", lambda: open_lake(lake, read_only=True))):
        db = opener()
        try:
            runs = []
            for _ in range(3):
                t = time.perf_counter()
                compute_metrics(db)
                runs.append(time.perf_counter() - t)
            times[name] = statistics.median(runs)
        finally:
            db.close()
    return {"import_s": imported_s, "file_s": times["file"], "lake_s": times["lake"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=60_000)
    parser.add_argument("--per-request", type=int, default=500)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--calls", type=int, default=1_000_000,
                        help="tool calls for the metrics-over-a-lake timing (0 skips it)")
    args = parser.parse_args()
    total = (args.spans // CALLS_PER_EPISODE) * CALLS_PER_EPISODE
    one = sharded_requests(total, args.per_request, 1)
    two = sharded_requests(total, args.per_request, 2)
    results: dict[str, list[float]] = {"file": [], "lake-1": [], "lake-2": []}
    with running_postgres() as postgres, tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for n in range(args.rounds):
            results["file"].append(run_collectors(
                [["--db", str(tmp / f"file-{n}.duckdb")]], one, total, args.connections))
            lake = ["--lake", postgres.catalog(postgres.new_database()),
                    "--lake-data", str(tmp / f"lake1-{n}")]
            results["lake-1"].append(run_collectors([lake], one, total, args.connections))
            lake = ["--lake", postgres.catalog(postgres.new_database()),
                    "--lake-data", str(tmp / f"lake2-{n}")]
            results["lake-2"].append(run_collectors([lake, lake], two, total,
                                                    args.connections))
            print(json.dumps({k: round(v[-1]) for k, v in results.items()}), flush=True)
        medians = {k: statistics.median(v) for k, v in results.items()}
        report = {"spans": total, "rounds": args.rounds,
                  "queryable_spans_per_s": {k: round(v) for k, v in medians.items()},
                  "two_lake_over_one_lake": round(medians["lake-2"] / medians["lake-1"], 2),
                  "two_lake_over_file": round(medians["lake-2"] / medians["file"], 2),
                  "one_lake_over_file": round(medians["lake-1"] / medians["file"], 2)}
        if args.calls:
            report["metrics_over_calls"] = args.calls
            report.update({k: round(v, 3) for k, v in
                           metrics_over_a_lake(postgres, tmp, args.calls).items()})
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
