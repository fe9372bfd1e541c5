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
the same over the file, median of 5 interleaved.

With ``--day COMMITS``: reads after a day of ingest (issue 17, point 6). One lake collector
takes COMMITS small requests one at a time (each its own lake commit: ``--day-spans`` tool
spans from episodes that are still running, so episodes are updated across commits as in live
traffic); then ``compute_metrics`` and the dashboard's named reads are timed over that lake as
the commits left it, over the same rows copied into a fresh lake (one commit per table: the
compact layout), and over the first lake after the collector's own housekeeping
(``ducklake.imports.maintain``, what ``--lake-maintain-every`` runs) — medians, and the ratios to
the fresh lake.

Run:  .venv/bin/python benchmarks/bench_lake.py [--spans 60000] [--rounds 1] [--calls 1000000]
      .venv/bin/python benchmarks/bench_lake.py --only metrics [--calls 1000000]
      .venv/bin/python benchmarks/bench_lake.py --only day [--day 3000 --day-spans 100]
"""

from __future__ import annotations

import argparse
import json
import os
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


def _cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system, all threads) the live processes ``pids`` have used."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _postgres_pids() -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/comm"):
        try:
            if stat.read_text().strip() == "postgres":
                pids.append(int(stat.parent.name))
        except OSError:
            continue
    return pids


def _machine_busy() -> tuple[float, float]:
    """(busy, all) jiffies of every core since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


CPU: list[dict[str, float]] = []
"""Per ``run_collectors``: the cores its collectors, PostgreSQL and the whole machine (this
benchmark's load generator and anything else running) kept busy while it ran."""


def run_collectors(store_args: list[list[str]], shards: list[list[bytes]], total: int,
                   connections: int, *, per_collector: bool = False) -> float:
    """Start one collector per ``store_args``, send each its shard, and return the queryable
    spans/s (every tool call in the ``summary`` read); appends the cores used to ``CPU``.
    ``connections`` are split between the collectors, or with ``per_collector`` each has
    that many (as the load_balancing exporter's own sending queue per backend)."""
    ports = [free_port() for _ in store_args]
    procs = [subprocess.Popen([sys.executable, "-m", "loopscope", "collector", *args,
                               "--http-port", str(port), "--grpc-port", "0",
                               "--instance", f"bench-{i}"],
                              stdout=subprocess.DEVNULL)
             for i, (args, port) in enumerate(zip(store_args, ports, strict=True))]
    try:
        for port in ports:
            wait_http(f"http://127.0.0.1:{port}/healthz")
        each = connections if per_collector else max(1, connections // len(ports))
        pids = [proc.pid for proc in procs]
        postgres = _postgres_pids()
        cpu_before = (_cpu_s(pids), _cpu_s(postgres), _machine_busy())
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
        took = time.perf_counter() - start
        busy, every = _machine_busy()
        CPU.append({
            "collectors_cores": round((_cpu_s(pids) - cpu_before[0]) / took, 2),
            "postgres_cores": round((_cpu_s(postgres) - cpu_before[1]) / took, 2),
            "machine_busy_cores": round(os.cpu_count() * (busy - cpu_before[2][0])  # type: ignore[operator]
                                        / max(1, every - cpu_before[2][1]), 2)})
        return total / took
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)


def metrics_over_a_lake(postgres, tmp: Path, calls: int) -> dict[str, float]:
    from bench_metrics import build_store

    from loopscope_collector.metrics.compute import compute_metrics
    from loopscope_collector.storage import open_database, open_lake
    from loopscope_collector.storage.ducklake import Lake
    from loopscope_collector.storage.ducklake.imports import import_file

    path = tmp / "million.duckdb"
    build_store(path, calls)
    lake = Lake.parse(postgres.catalog(postgres.new_database()), str(tmp / "million-lake"))
    started = time.perf_counter()
    writer = open_lake(lake)
    import_file(writer, path)
    writer.close()
    imported_s = time.perf_counter() - started
    dbs = {"file": open_database(path, read_only=True), "lake": open_lake(lake, read_only=True)}
    runs: dict[str, list[float]] = {"file": [], "lake": []}
    try:
        for _ in range(5):  # interleaved: a load spike on this shared machine hits both alike
            for name, db in dbs.items():
                t = time.perf_counter()
                compute_metrics(db)
                runs[name].append(time.perf_counter() - t)
    finally:
        for db in dbs.values():
            db.close()
    times = {name: statistics.median(v) for name, v in runs.items()}
    return {"import_s": imported_s, "file_s": times["file"], "lake_s": times["lake"],
            "lake_over_file": times["lake"] / times["file"]}


DAY_READS = (("summary", {}), ("filter_options", {}), ("episode_list", {}), ("run_list", {}),
             ("no_progress_rate", {}), ("loops_by_tool", {}), ("looping_signatures", {}),
             ("recent_detections", {}), ("metrics_unknown_latency", {}))
"""The dashboard's reads timed after a day (besides ``compute_metrics``)."""


def day_requests(commits: int, per_commit: int, seed: int = 2) -> list[bytes]:
    """``commits`` requests of ``per_commit`` tool spans: episodes of ``CALLS_PER_EPISODE``
    calls (a third spinning) that run across five requests each, four calls per request."""
    import random

    rng = random.Random(seed)
    per_episode_per_request = CALLS_PER_EPISODE // 5
    cohort = max(1, per_commit // per_episode_per_request)
    start = 1_700_000_000_000_000_000
    bodies: list[bytes] = []
    episode = 0
    while len(bodies) < commits:
        traces = [rng.randbytes(16) for _ in range(cohort)]
        for wave in range(5):
            spans = []
            for n, trace_id in enumerate(traces):
                e = episode + n
                for j in range(per_episode_per_request):
                    i = wave * per_episode_per_request + j
                    query = "same" if e % 3 == 0 and i >= 5 else f"e{e}q{i}"
                    spans.append(tool_span(
                        trace_id, rng.randbytes(8), tool=f"tool{e % 6}",
                        args=f'{{"q": "{query}", "limit": 10}}',
                        result=f"results for {query}: " + "x" * 80,
                        start_ns=start + e * 60_000_000_000 + i * 1_000_000_000))
            bodies.append(request(spans).SerializeToString())
            if len(bodies) == commits:
                break
        episode += cohort
    return bodies


def send_in_order(port: int, bodies: list[bytes]) -> list[float]:
    """POST each body in turn on one connection; returns each one's seconds to its 200."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    latencies = []
    for body in bodies:
        started = time.perf_counter()
        while True:
            conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
            response = conn.getresponse()
            response.read()
            if response.status == 200:
                break
            time.sleep(float(response.getheader("Retry-After") or 1))
        latencies.append(time.perf_counter() - started)
    conn.close()
    return latencies


def time_reads(db, rounds: int = 3) -> dict[str, float]:
    """Median seconds of ``compute_metrics`` and of each of ``DAY_READS`` over ``db``."""
    from loopscope_collector.metrics.compute import compute_metrics
    from loopscope_collector.reads import read

    jobs = [("compute_metrics", lambda: compute_metrics(db))]
    jobs += [(name, lambda name=name, params=params: read(db, name, params))
             for name, params in DAY_READS]
    times: dict[str, list[float]] = {name: [] for name, _ in jobs}
    for _ in range(rounds):  # interleaved: a load spike hits every read alike
        for name, job in jobs:
            t = time.perf_counter()
            job()
            times[name].append(time.perf_counter() - t)
    out = {name: statistics.median(v) for name, v in times.items()}
    out["dashboard_reads"] = sum(out[name] for name, _ in DAY_READS)
    return out


def lake_files(db) -> dict[str, int]:
    """The lake's live data files and delete files, and its snapshots."""
    cur = db.cursor()
    try:
        return {
            "data_files": cur.execute("select count(*) from ducklake_list_files("
                                      "'loopscope_lake', 'tool_calls')").fetchall()[0][0],
            "snapshots": cur.execute("select count(*) from "
                                     "ducklake_snapshots('loopscope_lake')").fetchall()[0][0],
        }
    finally:
        cur.close()


def copy_lake(source, target) -> None:
    """Every table of the lake ``source`` (open) into the fresh lake ``target`` (a ``Lake``),
    one commit per table: the same rows, laid out as a bulk load lays them."""
    from loopscope_collector.storage import open_lake
    from loopscope_collector.storage.ducklake.imports import ORDER

    open_lake(target).close()  # loopscope's tables
    cur = source.cursor()
    try:
        cur.execute(f"attach 'ducklake:{target.catalog.removeprefix('ducklake:')}' as fresh "
                    f"(data_path '{target.data_path}')")
        for table in ORDER:
            cur.execute(f"insert into fresh.main.{table} by name select * from {table}")
        cur.execute("detach fresh")
    finally:
        cur.close()


def a_day_of_ingest(postgres, tmp: Path, commits: int, per_commit: int,
                    housekeeping_every: str) -> dict:
    from loopscope_collector.storage import open_lake
    from loopscope_collector.storage.ducklake import Lake
    from loopscope_collector.storage.ducklake.housekeeping import MERGE_BELOW_BYTES
    from loopscope_collector.storage.ducklake.imports import maintain

    bodies = day_requests(commits, per_commit)
    ingest = {}
    lakes = {}
    for name, every in (("no_housekeeping", "0"), ("housekeeping", housekeeping_every)):
        catalog = postgres.catalog(postgres.new_database())
        lakes[name] = Lake.parse(catalog, str(tmp / f"day-{name}"))
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "loopscope", "collector",
                                 "--lake", catalog, "--lake-data", lakes[name].data_path,
                                 "--lake-maintain-every", every, "--http-port", str(port),
                                 "--grpc-port", "0", "--instance", "day"],
                                stdout=subprocess.DEVNULL)
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz")
            started = time.perf_counter()
            latencies = send_in_order(port, bodies)  # one at a time: a commit per request
            took = time.perf_counter() - started
            tenth = max(1, len(latencies) // 10)
            ingest[name] = {
                "seconds": round(took, 1),
                "first_tenth_commit_ms": round(1000 * statistics.median(latencies[:tenth]), 1),
                "last_tenth_commit_ms": round(1000 * statistics.median(latencies[-tenth:]), 1)}
        finally:
            proc.terminate()
            proc.wait(60)
    lake = lakes["no_housekeeping"]
    fresh = Lake.parse(postgres.catalog(postgres.new_database()), str(tmp / "day-fresh"))
    db = open_lake(lake)
    try:
        copy_lake(db, fresh)
        layout = {"before": lake_files(db)}
        stages = {"before": time_reads(db)}
        t = time.perf_counter()
        maintain(db, "1 days", merge_below=MERGE_BELOW_BYTES)  # as a collector runs it
        maintain_s = time.perf_counter() - t
        layout["after_housekeeping"] = lake_files(db)
        stages["after_housekeeping"] = time_reads(db)
    finally:
        db.close()
    db = open_lake(fresh, read_only=True)
    try:
        layout["fresh"] = lake_files(db)
        stages["fresh"] = time_reads(db)
    finally:
        db.close()
    report = {"commits": commits, "spans_per_commit": per_commit,
              "collector_housekeeping_every": housekeeping_every, "ingest": ingest,
              "housekeeping_s": round(maintain_s, 2), "layout": layout,
              "seconds": {stage: {k: round(v, 4) for k, v in times.items()}
                          for stage, times in stages.items()}}
    for stage in ("before", "after_housekeeping"):
        report[f"{stage}_over_fresh"] = {
            k: round(stages[stage][k] / stages["fresh"][k], 2)
            for k in ("compute_metrics", "dashboard_reads")}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=60_000)
    parser.add_argument("--per-request", type=int, default=500)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--per-collector", action="store_true",
                        help="each of the two lake collectors gets --connections (as the "
                             "load_balancing exporter has a sending queue per backend), "
                             "instead of half of them each")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--calls", type=int, default=1_000_000,
                        help="tool calls for the metrics-over-a-lake timing (0 skips it)")
    parser.add_argument("--only", choices=("collectors", "metrics", "day"),
                        help="run one part: the collectors' spans/s, the metrics over --calls, "
                             "or the reads after a day of --day commits")
    parser.add_argument("--day", type=int, default=3000, metavar="COMMITS",
                        help="commits of the day-of-ingest measurement (with --only day)")
    parser.add_argument("--day-housekeeping", default="30s", metavar="DURATION",
                        help="--lake-maintain-every of the day's second collector (its first "
                             "runs none)")
    parser.add_argument("--day-spans", type=int, default=100,
                        help="tool spans per commit of the day-of-ingest measurement")
    args = parser.parse_args()
    if args.only == "metrics" or args.only == "day":
        with running_postgres() as postgres, tempfile.TemporaryDirectory() as folder:
            if args.only == "metrics":
                report = {"metrics_over_calls": args.calls, **{
                    k: round(v, 3) for k, v in
                    metrics_over_a_lake(postgres, Path(folder), args.calls).items()}}
            else:
                report = a_day_of_ingest(postgres, Path(folder), args.day, args.day_spans,
                                         args.day_housekeeping)
        report["load_average"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(report, indent=2))
        return
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
                                                    args.connections,
                                                    per_collector=args.per_collector))
            print(json.dumps({k: round(v[-1]) for k, v in results.items()}), flush=True)
            print(json.dumps({"cpu": dict(zip(results, CPU[-3:], strict=True))}), flush=True)
        medians = {k: statistics.median(v) for k, v in results.items()}
        report = {"spans": total, "rounds": args.rounds, "connections": args.connections,
                  "per_collector": args.per_collector,
                  "queryable_spans_per_s": {k: round(v) for k, v in medians.items()},
                  "two_lake_over_one_lake": round(medians["lake-2"] / medians["lake-1"], 2),
                  "two_lake_over_file": round(medians["lake-2"] / medians["file"], 2),
                  "one_lake_over_file": round(medians["lake-1"] / medians["file"], 2)}
        report["cpu_last_round"] = dict(zip(results, CPU[-3:], strict=True))
        if args.calls and args.only != "collectors":
            report["metrics_over_calls"] = args.calls
            report.update({k: round(v, 3) for k, v in
                           metrics_over_a_lake(postgres, tmp, args.calls).items()})
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
