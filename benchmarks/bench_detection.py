"""Detection throughput: steps per second through the core, over the real trajectories.

Replays every episode of ../shared/data (or the files given) through ``replay`` and, in the
same run, through the naive baseline (same tool + arguments 3 of the last 6 calls, which only
hashes arguments) and through plain ``json.loads`` of the lines (the floor: reading the data).
Reports steps/s and the ratios, which stay comparable when the machine's speed drifts. Times
are this process's CPU time (``time.process_time``), so other work on the machine slows the
numbers less than it would wall-clock time.

A round's runs share one memo of what was read (``readings.Readings``: facts, word sketch),
as ``analyze`` shares one across the runs it replays, so another run that gets the same answer
from the same backend is not read again; each round starts with nothing remembered.
``loopscope_cold`` gives each run a memo of its own: the speed when no two runs ever share an
answer. A core that keeps memos process-wide (functools caches) has them emptied at each
round's start too (``_forget_memos``): otherwise its later rounds would find what the first
one read, which no monitor-owned memo can.

With ``--against CHECKOUT`` (another checkout of loopscope, e.g. ``git worktree add --detach
/tmp/before <commit>``) that checkout's detection core is loaded beside this one under
another name and timed in the same rounds, the two taking turns by chunks of 20 episodes: a
before/after ratio that holds on a noisy machine.

Run:  .venv/bin/python benchmarks/bench_detection.py [FILE ...] [--repeat 5] [--against DIR]
"""

from __future__ import annotations

import argparse
import glob
import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from _against import load_package

from loopscope.detect.episode_records import EpisodeRecord, parse_episode_line
from loopscope.detect.readings import Readings
from loopscope.detect.replay import replay
from loopscope.offline.evaluation import naive_baseline

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def load_core(checkout: Path) -> ModuleType:
    """The ``replay`` module of another checkout's detection core (standard library only)."""
    load_package(checkout, "instrumentation/loopscope/detect", "loopscope_against_detect")
    return importlib.import_module("loopscope_against_detect.replay")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--against",
        type=Path,
        metavar="CHECKOUT",
        help="another checkout whose detection core is timed in the same rounds",
    )
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
        _forget_memos("loopscope.detect")
        readings = Readings()  # (each round starts with nothing read, shared by its runs)
        for episode in episodes:
            replay(episode, readings=readings)

    def core_cold() -> None:
        _forget_memos("loopscope.detect")
        for episode in episodes:
            replay(episode)  # no output read in another run is remembered

    passes = [("json_parse", parse_only), ("naive_baseline", naive), ("loopscope", core),
              ("loopscope_cold", core_cold)]
    if args.against is not None:
        other = load_core(args.against.resolve())
        records = (importlib.import_module("loopscope_against_detect.episode_records")
                   if (args.against / "instrumentation/loopscope/detect/episode_records.py").exists()
                   else other)  # (before the records moved out of replay.py)
        other_episodes = [records.parse_episode_line(line) for line in lines]
        other_round = _other_rounds(other)

    timings: dict[str, list[float]] = {name: [] for name, _ in passes}
    paired: list[float] = []
    for round_ in range(args.repeat):
        for name, fn in passes:
            start = time.process_time()
            fn()
            timings[name].append(time.process_time() - start)
        if args.against is not None:
            this, that = _paired_round(episodes, other_episodes, other_round(), round_)
            paired.append(that / this)
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
    if args.against is not None:
        print(
            f"loopscope steps/s / --against steps/s, paired by chunks of {CHUNK} episodes: "
            f"{statistics.median(paired):.2f}x (rounds: "
            f"{', '.join(f'{r:.2f}' for r in paired)}; above 1: this checkout is faster)"
        )


CHUNK = 20
"""Episodes timed in one go when two cores are compared: the two take turns chunk by chunk
(and which goes first alternates), so the machine's load drifting over a round weighs on
both alike."""


def _other_rounds(other: ModuleType) -> Callable[[], Callable[[Any], Any]]:
    """For each round, how the other core replays a run: sharing what it reads across the
    round's runs as this core does (a ``Readings`` of its own per round, or, for a core that
    kept its memo process-wide, that memo forgotten at the round's start)."""
    try:
        memo = importlib.import_module("loopscope_against_detect.readings").Readings
    except ModuleNotFoundError:
        forget = getattr(importlib.import_module("loopscope_against_detect.monitor"),
                         "forget_readings", lambda: None)

        def process_wide() -> Callable[[Any], Any]:
            forget()
            return cast(Callable[[Any], Any], other.replay)

        return process_wide

    def owned() -> Callable[[Any], Any]:
        readings = memo()
        return lambda episode: other.replay(episode, readings=readings)

    return owned


def _forget_memos(package: str) -> None:
    """Empty the functools caches of ``package``'s modules (a round starts with nothing
    remembered)."""
    for name, module in list(sys.modules.items()):
        if name == package or name.startswith(f"{package}."):
            for value in list(vars(module).values()):
                clear = getattr(value, "cache_clear", None)
                if callable(clear):
                    clear()


def _paired_round(
    episodes: list[EpisodeRecord], other_episodes: list[Any],
    other_replay: Callable[[Any], Any], round_: int,
) -> tuple[float, float]:
    """CPU seconds of this core and the other over all episodes, taking turns by chunk."""
    readings = Readings()  # (shared by this round's runs, as the other's memo is by its)
    _forget_memos("loopscope.detect")
    _forget_memos("loopscope_against_detect")
    this = that = 0.0
    for index, at in enumerate(range(0, len(episodes), CHUNK)):
        for which in ("this", "that") if (index + round_) % 2 else ("that", "this"):
            start = time.process_time()
            if which == "this":
                for episode in episodes[at:at + CHUNK]:
                    replay(episode, readings=readings)
                this += time.process_time() - start
            else:
                for episode in other_episodes[at:at + CHUNK]:
                    other_replay(episode)
                that += time.process_time() - start
    return this, that


if __name__ == "__main__":
    main()
