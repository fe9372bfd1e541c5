"""What one pipeline batch costs: a fixed part per batch and a part per span.

A Pipeline (not started: its batches are stored on this thread) stores batches of
``--sizes`` spans (requests of 200 spans, or one request of a size under 200, from
``bench_collector``'s load: 20 calls per episode, a third spinning) into a real DuckDB
file, a fresh one per size, after ``--warm`` batches; each batch is timed from ``begin`` to
``commit`` and the after-commit check. Reported per size: the median batch time and spans per second, and the line fitted
through (size, time): its intercept is the fixed cost of a batch. The process collects its
garbage as ``loopscope collector``'s does (the checkout's own thresholds, printed, with the
time its collections took in a batch).

With ``--against CHECKOUT`` that checkout is measured in the same run, round by round, the
order alternating (each in a process of its own, on its own code): the ratios hold where
absolute times do not. Wall and CPU time are both reported: on a machine shared with other
work the process's CPU time (DuckDB's threads included) is the steadier measure of cost.

With ``--split`` (this checkout only) every statement, Arrow registration and fetch on the
pipeline's cursor is timed by its SQL, the rest of the batch (detection, building rows) by
function (cProfile): where a batch's time goes.

Run:  .venv/bin/python benchmarks/bench_batch_cost.py [--sizes 200 1000 5000]
          [--against /tmp/base --rounds 3] [--split]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from bench_collector import build_requests, checkout_env  # noqa: E402

PER_REQUEST = 200


def _batches(size: int, count: int, seed: int) -> list[list[Any]]:
    """``count`` batches of ``size`` spans, as lists of jobs (one per 200-span request)."""
    from loopscope_collector.pipeline.jobs import Job
    from loopscope_collector.receive.decode import decode_request

    per_request = min(size, PER_REQUEST)  # (``--sizes`` are multiples of it: ``_size``)
    bodies = build_requests(size * count, per_request, seed=seed)
    requests = [decode_request(body, content_type="application/x-protobuf",
                               content_encoding=None, max_bytes=1 << 30) for body in bodies]
    per_batch = size // per_request
    return [[Job(list(spans)) for spans in requests[i:i + per_batch]]
            for i in range(0, len(requests), per_batch)]


class _TimedCursor:
    """The pipeline's cursor, its statements, registrations and fetches timed by their SQL."""

    def __init__(self, cur: Any, times: dict[str, list[float]]) -> None:
        self._cur = cur
        self._times = times

    def _timed(self, name: str, fn: Any, *args: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self._times[name].append(time.perf_counter() - start)

    def execute(self, sql: str, *params: Any) -> _TimedCursor:
        key = " ".join(sql.split())[:90]
        self._timed(f"execute: {key}", self._cur.execute, sql, *params)
        return self

    def fetchall(self) -> Any:
        return self._timed("fetchall", self._cur.fetchall)

    def register(self, name: str, table: Any) -> Any:
        return self._timed(f"register {name}", self._cur.register, name, table)

    def unregister(self, name: str) -> Any:
        return self._timed(f"unregister {name}", self._cur.unregister, name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


def _as_in_the_collector() -> list[int]:
    """Python's collection thresholds as ``loopscope collector`` sets them in its process
    (from the checkout measured: its ``fewer_collections``, or an earlier name for it); the
    thresholds now in effect."""
    from loopscope_collector import cli

    for name in ("fewer_collections", "_fewer_full_collections"):
        if hasattr(cli, name):
            getattr(cli, name)()
            break
    return list(gc.get_threshold())


def measure(sizes: list[int], batches: int, warm: int, split: bool) -> dict[str, Any]:
    """Per size: the seconds each measured batch took (and with ``split``, where they went),
    under the collector process's collection thresholds (``gc``)."""
    out: dict[str, Any] = {"gc": _as_in_the_collector()}
    for size in sizes:
        count = max(2, batches * 1000 // size) if size < 1000 else batches
        out[str(size)] = _measure_size(_batches(size, warm + count, seed=size), warm, split)
    return out


def unstarted_pipeline(db: Any, cur: Any = None, **settings: Any) -> Any:
    """A Pipeline of ``db`` that is not started: its batches are stored on the calling thread
    (``pipeline._store(jobs)``), on ``cur`` (default: a new cursor of ``db``)."""
    from loopscope_collector.pipeline.thread import Pipeline

    pipeline = Pipeline(db, **settings)
    pipeline._cur = cur if cur is not None else db.cursor()
    pipeline.detector.load = lambda ids: pipeline._load_steps(pipeline._cur, ids)
    return pipeline


def _measure_size(work: list[list[Any]], warm: int, split: bool) -> dict[str, Any]:
    """Store the batches ``work`` into a new file; time all but the first ``warm``."""
    from loopscope_collector.storage import open_database

    times: dict[str, list[float]] = defaultdict(list)
    profile = cProfile.Profile()
    took, cpu, collecting = [], [], []
    collected = [0.0, 0.0]  # (seconds collecting garbage so far, when the running one began)

    def timed_collection(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            collected[1] = time.perf_counter()
        else:
            collected[0] += time.perf_counter() - collected[1]

    gc.callbacks.append(timed_collection)
    with tempfile.TemporaryDirectory() as tmp:
        db = open_database(Path(tmp) / "batch.duckdb")
        pipeline = unstarted_pipeline(db, _TimedCursor(db.cursor(), times) if split else None)
        for i, jobs in enumerate(work):
            measured = i >= warm
            if measured and split:
                if i == warm:
                    times.clear()
                profile.enable()
            start, start_cpu, start_gc = time.perf_counter(), time.process_time(), collected[0]
            pipeline._store(jobs)
            if measured:
                took.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
                collecting.append(collected[0] - start_gc)
                if split:
                    profile.disable()
            assert all(job.error is None for job in jobs), [job.error for job in jobs]
        db.close()
    gc.callbacks.remove(timed_collection)
    found: dict[str, Any] = {"seconds": took, "cpu": cpu, "collecting": collecting}
    if split:
        found["split"] = {k: sum(v) / len(took) for k, v in times.items()}
        found["calls"] = {k: len(v) / len(took) for k, v in times.items()}
        stats = pstats.Stats(profile)
        found["profile"] = sorted(
            ((f"{Path(f).name}:{line}:{fn}", tt / len(took), ct / len(took))
             for (f, line, fn), (_, _, tt, ct, _) in stats.stats.items()),
            key=lambda r: -r[2])[:40]
    return found


def _run(checkout: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--sizes",
           *map(str, args.sizes), "--batches", str(args.batches), "--warm", str(args.warm)]
    env = checkout_env(checkout) or dict(os.environ)
    done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _size(text: str) -> int:
    """A ``--sizes`` value: spans per batch, whole requests of ``PER_REQUEST`` (or one smaller
    request): a batch of 300 would otherwise be measured as one of 200."""
    size = int(text)
    if size <= 0 or (size > PER_REQUEST and size % PER_REQUEST):
        raise argparse.ArgumentTypeError(
            f"{size}: a batch size is up to {PER_REQUEST} spans or a multiple of {PER_REQUEST}")
    return size


def _fit(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """Least squares through (spans, seconds): (fixed seconds, seconds per span); None with
    fewer than two sizes."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def _summary(name: str, rounds: list[dict[str, Any]], sizes: list[int],
             clock: str) -> dict[int, float]:
    """Print one checkout's batch times on ``clock`` ("seconds": wall, "cpu": the process's
    CPU time, DuckDB's threads included); returns the median per size."""
    medians = {s: statistics.median(t for r in rounds for t in r[str(s)][clock])
               for s in sizes}
    fit = _fit([(s, t) for r in rounds for s in sizes for t in r[str(s)][clock]])
    print(f"{name}, {'wall' if clock == 'seconds' else 'CPU'} time: "
          + (f"fixed {fit[0] * 1e3:.0f} ms per batch, {fit[1] * 1e6:.0f} µs per span "
             if fit else "(the fixed part needs two --sizes) ")
          + f"(collection thresholds {rounds[0].get('gc', '?')})")
    for s in sizes:
        collecting = [t for r in rounds for t in r[str(s)].get("collecting", ())]
        print(f"  {s:>6} spans: {medians[s] * 1e3:8.1f} ms per batch, "
              f"{s / medians[s]:8,.0f} spans/s"
              + (f"; collecting garbage {statistics.fmean(collecting) * 1e3:.1f} ms a batch "
                 "(mean)" if collecting and clock == "cpu" else ""))
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=_size, nargs="+", default=[200, 1000, 5000],
                        help=f"spans per batch: up to {PER_REQUEST}, or multiples of it")
    parser.add_argument("--batches", type=int, default=8,
                        help="batches measured per size (more for sizes under 1,000)")
    parser.add_argument("--warm", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--against", type=Path)
    parser.add_argument("--split", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.sizes, args.batches, args.warm, split=False)))
        return
    if args.split:
        found = measure(args.sizes, args.batches, args.warm, split=True)
        for size in args.sizes:
            data = found[str(size)]
            batch = statistics.fmean(data["seconds"])
            print(f"\n{size} spans: {batch * 1e3:.1f} ms per batch (mean); per batch:")
            for key, s in sorted(data["split"].items(), key=lambda kv: -kv[1]):
                print(f"  {s * 1e3:8.2f} ms  x{data['calls'][key]:<5.1f} {key}")
            print("  by function (own ms, cumulative ms):")
            for fn, tt, ct in data["profile"]:
                print(f"  {tt * 1e3:8.2f} {ct * 1e3:8.2f}  {fn}")
        return
    checkouts: list[tuple[str, Path | None]] = [("this", None)]
    if args.against is not None:
        checkouts.append((f"against {args.against}", args.against.resolve()))
    rounds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for i in range(args.rounds):
        for name, checkout in checkouts[::1 if i % 2 == 0 else -1]:
            rounds[name].append(_run(checkout, args))
    for clock in ("seconds", "cpu"):
        medians = {name: _summary(name, rounds[name], args.sizes, clock)
                   for name, _ in checkouts}
        if args.against is not None:
            this, other = medians["this"], medians[checkouts[1][0]]
            print(f"this / against ({'wall' if clock == 'seconds' else 'CPU'} time):")
            for s in args.sizes:
                print(f"  {s:>6} spans: batch time {this[s] / other[s]:.2f}x, "
                      f"spans/s {other[s] / this[s]:.2f}x")


if __name__ == "__main__":
    main()
