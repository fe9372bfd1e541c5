"""What the write-ahead log's checkpoints cost the pipeline, at two ``--checkpoint-bytes``.

A Pipeline (not started: its batches are stored on this thread, as in ``bench_batch_cost``)
stores ``--batches`` batches of 2,500 spans (``bench_collector``'s load) into a fresh DuckDB
file, or into a copy of ``--store`` (a big store: a checkpoint's time grows with the store),
once with each threshold, the order alternating round by round. Reported per threshold: spans
per second over the whole run, how many checkpoints ran and the seconds they took; and the
ratio of the two rates.

Run:  .venv/bin/python benchmarks/bench_checkpoints.py [--mib 16 64] [--batches 80]
          [--store /tmp/stores/calls-1000000-spans.duckdb] [--rounds 2]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from bench_batch_cost import _batches, unstarted_pipeline  # noqa: E402

MIB = 1024 * 1024


def measure(mib: int, work: list[list[Any]], store: Path | None) -> dict[str, Any]:
    """Store ``work`` with the log checkpointed past ``mib`` MiB; the rate and checkpoints."""
    from loopscope_collector.storage import open_database
    from loopscope_collector.storage.database import Database

    took: list[float] = []
    checkpoint = Database.checkpoint

    def timed(self: Database) -> None:
        start = time.perf_counter()
        checkpoint(self)
        took.append(time.perf_counter() - start)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store.duckdb"
        if store is not None:
            shutil.copyfile(store, path)
        db = open_database(path)
        pipeline = unstarted_pipeline(db, checkpoint_bytes=mib * MIB)
        Database.checkpoint = timed  # type: ignore[method-assign]
        try:
            start = time.perf_counter()
            for jobs in work:
                pipeline._store(jobs)
                assert all(job.error is None for job in jobs), [job.error for job in jobs]
            seconds = time.perf_counter() - start
        finally:
            Database.checkpoint = checkpoint  # type: ignore[method-assign]
            db.close()
    spans = sum(len(job.spans) for jobs in work for job in jobs)
    return {"spans_per_s": spans / seconds, "checkpoints": len(took),
            "checkpoint_s": sum(took), "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, nargs=2, default=[16, 64], metavar=("A", "B"))
    parser.add_argument("--batches", type=int, default=80)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--store", type=Path, help="a store to copy and add to (default: new)")
    args = parser.parse_args()
    runs: dict[int, list[dict[str, Any]]] = {mib: [] for mib in args.mib}
    for round_ in range(args.rounds):
        work = _batches(2500, args.batches, seed=7 + round_)
        for mib in args.mib if round_ % 2 == 0 else args.mib[::-1]:
            found = measure(mib, work, args.store)
            runs[mib].append(found)
            print(f"round {round_ + 1}, {mib} MiB: {found['spans_per_s']:,.0f} spans/s, "
                  f"{found['checkpoints']} checkpoints, {found['checkpoint_s']:.2f} s of "
                  f"{found['seconds']:.1f} s", flush=True)
    a, b = (statistics.median(r["spans_per_s"] for r in runs[mib]) for mib in args.mib)
    print(f"{args.mib[1]} MiB / {args.mib[0]} MiB, spans/s (medians): {b / a:.3f}x")


if __name__ == "__main__":
    main()
