"""How long the core takes to gather one model turn of many calls: ``feed_run`` over N calls
stamped at one instant, each returning after the last one started (a record's artefact: an
importer or a clock that stamps a whole batch at once), so all are one turn of parallel
calls; with their arguments, and with a signature only (content not captured). Each
checkout runs in a process of its own, in the same run (``--against``).

Run:  .venv/bin/python benchmarks/bench_parallel_turn.py [--calls 1000 4000 10000]
          [--against /tmp/base]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from bench_collector import checkout_env  # noqa: E402


def measure(counts: list[int]) -> dict[str, float]:
    from loopscope.detect import EpisodeMonitor, ToolResult
    from loopscope.detect.steps import ToolStep, feed_run, recorded_call

    seconds = {}
    for n in counts:
        for kind, call in (("arguments", lambda i: recorded_call(
                                "search", args={"q": f"x{i}"}, t=1.0 + i * 1e-9)),
                           ("signatures only", lambda i: recorded_call(
                                "search", signature=f"sig{i}", t=1.0 + i * 1e-9))):
            steps = [ToolStep(call(i), ToolResult("r" * 50), end=1.001 + i * 1e-9)
                     for i in range(n)]
            start = time.perf_counter()
            fed = list(feed_run(EpisodeMonitor(), steps))
            seconds[f"{n} calls with {kind}"] = time.perf_counter() - start
            assert len(fed) == n
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[1000, 4000, 10000])
    parser.add_argument("--against", type=Path)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.calls)))
        return
    found = {}
    for name, checkout in [("this", None), ("against", args.against)]:
        if name == "against" and checkout is None:
            continue
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--worker", "--calls",
             *map(str, args.calls)], env=checkout_env(checkout and checkout.resolve()),
            check=True, capture_output=True, text=True)
        found[name] = json.loads(done.stdout)
    for case, this in found["this"].items():
        line = f"{case:>30} at one instant: this {this:6.2f} s"
        if "against" in found:
            other = found["against"][case]
            line += f", against {other:6.2f} s ({other / this:.1f}x faster)"
        print(line)


if __name__ == "__main__":
    main()
