"""What the key's conflict check costs a batch: two Pipelines in one process, one inserting
the spans and tool calls it found new without the check (``on_conflict="new"``, the
default), one with it (``Pipeline._new_rows`` "ignore", as after a store broke the
look-up's word), each into its own DuckDB file, fed the same batches (``bench_batch_cost``'s
load) alternately, the order swapped every batch: the machine's drift falls on both alike.
Reported per size: the median CPU and wall time of a batch each way, their ratio, and
whether the two stores ended up holding the same rows (time stamps aside).

Run:  .venv/bin/python benchmarks/bench_key_checks.py [--sizes 400 1200] [--batches 12]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from bench_batch_cost import _as_in_the_collector, _batches, unstarted_pipeline  # noqa: E402

TABLES = ("spans", "tool_calls", "detections", "episodes", "messages", "guard_decisions")


def _contents(cur: Any) -> list[tuple[str, int, str]]:
    """Each table's row count and a digest of its rows, its ``*_at`` time stamps aside."""
    found = []
    for table in TABLES:
        columns = [row[0] for row in cur.execute(f"describe {table}").fetchall()
                   if not row[0].endswith("_at")]
        rows = cur.execute(f"select {', '.join(columns)} from {table} order by all").fetchall()
        found.append((table, len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()[:12]))
    return found


def measure(size: int, batches: int, warm: int) -> None:
    from loopscope_collector.pipeline.jobs import Job
    from loopscope_collector.storage import open_database

    work = _batches(size, warm + batches, seed=size)
    times: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {way: open_database(Path(tmp) / f"{way}.duckdb") for way in times}
        pipelines = {way: unstarted_pipeline(db) for way, db in stores.items()}
        pipelines["with"]._new_rows = "ignore"
        for i, jobs in enumerate(work):
            for way in (("without", "with") if i % 2 == 0 else ("with", "without")):
                copies = [Job(list(job.spans)) for job in jobs]
                cpu, wall = time.process_time(), time.perf_counter()
                pipelines[way]._store(copies)
                if i >= warm:
                    times[way].append((time.process_time() - cpu, time.perf_counter() - wall))
                assert all(job.error is None for job in copies), [j.error for j in copies]
        same = _contents(stores["without"].cursor()) == _contents(stores["with"].cursor())
        for db in stores.values():
            db.close()
    cpu = {way: statistics.median(c for c, _ in t) for way, t in times.items()}
    wall = {way: statistics.median(w for _, w in t) for way, t in times.items()}
    print(f"{size:>6} spans: CPU {cpu['without'] * 1e3:7.1f} ms without the check, "
          f"{cpu['with'] * 1e3:7.1f} ms with it ({cpu['without'] / cpu['with']:.2f}x); wall "
          f"{wall['without'] * 1e3:7.1f} / {wall['with'] * 1e3:7.1f} ms "
          f"({wall['without'] / wall['with']:.2f}x); stores hold the same rows: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[400, 1200])
    parser.add_argument("--batches", type=int, default=12, help="batches measured per size")
    parser.add_argument("--warm", type=int, default=2)
    args = parser.parse_args()
    print(f"collection thresholds {_as_in_the_collector()}")
    for size in args.sizes:
        measure(size, args.batches, args.warm)


if __name__ == "__main__":
    main()
