"""Detection throughput: steps per second through the core, over the real trajectories.

Replays every episode of ../shared/data (or the files given) through ``replay`` and, in the
same run, through the naive baseline (same tool + arguments 3 of the last 6 calls, which only
hashes arguments) and through plain ``json.loads`` of the lines (the floor: reading the data).
Reports steps/s and the ratios, which stay comparable when the machine's speed drifts.

Run:  .venv/bin/python benchmarks/bench_detection.py [FILE ...] [--repeat 5]
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import time
from pathlib import Path

from loopscope.detect.replay import parse_episode_line, replay
from loopscope.evaluation import naive_baseline

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    files = args.files or sorted(glob.glob(str(DATA / "*.jsonl")))
    if not files:
        raise SystemExit(f"no Episode JSONL files given and none in {DATA}")
    lines = [
        line
        for f in files
        for line in Path(f).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    episodes = [parse_episode_line(line) for line in lines]
    steps = sum(len(e.steps) for e in episodes)
    tool_steps = sum(1 for e in episodes for s in e.steps if s.get("type") == "tool")

    def parse_only() -> None:
        for line in lines:
            json.loads(line)

    def naive() -> None:
        for episode in episodes:
            naive_baseline(episode)

    def core() -> None:
        for episode in episodes:
            replay(episode)

    timings: dict[str, list[float]] = {"json_parse": [], "naive_baseline": [], "loopscope": []}
    for _ in range(args.repeat):
        for name, fn in (
            ("json_parse", parse_only),
            ("naive_baseline", naive),
            ("loopscope", core),
        ):
            start = time.perf_counter()
            fn()
            timings[name].append(time.perf_counter() - start)
    median = {k: statistics.median(v) for k, v in timings.items()}
    print(
        f"{len(episodes)} episodes, {steps} steps ({tool_steps} tool calls), "
        f"median of {args.repeat} runs:"
    )
    for name, seconds in median.items():
        print(f"  {name:<15} {steps / seconds:>12,.0f} steps/s  ({seconds * 1000:.0f} ms)")
    print(
        f"loopscope / naive baseline time: {median['loopscope'] / median['naive_baseline']:.2f}x;"
        f" loopscope / JSON parsing time: {median['loopscope'] / median['json_parse']:.2f}x"
    )


if __name__ == "__main__":
    main()
