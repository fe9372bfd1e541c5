"""Policy page replay: 10,000 stored runs of 20 tool calls through a policy, end to end.

Builds a store the way the collector does (rows in ``tool_calls`` and ``episodes``: a mix of
read spins, oscillations and healthy lookups, each 20 calls), then times what the Policy page
does when you press "Replay": the two named reads, grouping the rows by run
(``replays.stored_runs``), and turning them into the core's steps (the collector's one
adapter, ``normalize.steps``) and replaying each through the core (``replays.replay_all``:
from 2,000 runs both happen in worker processes). In the same run it times the floor:
``loopscope.detect.replay.replay`` alone over the same runs as ``Episode`` records, built
beforehand, in one process.
The target is under 10 s for the whole replay; the ratio to the floor says how much the page
adds to the core and stays comparable when the machine's speed drifts.

Run:  .venv/bin/python benchmarks/bench_policy_replay.py [--runs 10000] [--calls 20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa

from loopscope.detect import Policy
from loopscope.detect.replay import replay
from loopscope_collector.reads import read
from loopscope_collector.storage import open_database
from loopscope_dashboard import replays

S = 1_000_000_000


def _calls(index: int, calls: int) -> list[tuple[str, str, str]]:
    """(tool, arguments, output) per call: a read spin, an oscillation or a healthy run."""
    shape = index % 3
    if shape == 0:  # healthy: every call new
        return [("search", json.dumps({"q": f"r{index}-{i}"}), f"result {index} {i} new")
                for i in range(calls)]
    if shape == 1:  # spin from the middle
        return [("search", json.dumps({"q": f"r{index}-{min(i, calls // 2)}"}),
                 f"result {index} {min(i, calls // 2)} same") for i in range(calls)]
    return [("flip" if i % 2 else "flop", json.dumps({"id": index}), f"state {i % 2}")
            for i in range(calls)]


def build_store(path: Path, runs: int, calls: int) -> None:
    db = open_database(path)
    episodes, rows = [], []
    for index in range(runs):
        eid = f"bench-{index}"
        start = index * calls * S
        episodes.append({"episode_id": eid, "service": "bench", "task_type": "lookup",
                         "outcome": "failure" if index % 3 else "success", "start_ns": start,
                         "end_ns": start + calls * S, "trace_id": eid,
                         "scenario_loop": bool(index % 3),
                         "scenario_first_loop_step": calls // 2 if index % 3 else None})
        for i, (tool, args, output) in enumerate(_calls(index, calls)):
            rows.append({"trace_id": eid, "span_id": f"{eid}-{i}", "episode_id": eid,
                         "service": "bench", "tool": tool, "start_ns": start + i * S,
                         "end_ns": start + i * S + 1, "convention": "loopscope", "kind": "read",
                         "step": i + 1, "args_text": args, "output_text": output,
                         "content_captured": True})
    con = db.con
    for table, data in (("episodes", episodes), ("tool_calls", rows)):
        con.register("incoming", pa.Table.from_pylist(data))
        con.execute(f"insert into {table} by name select * from incoming")
        con.unregister("incoming")
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.duckdb"
        build_store(path, args.runs, args.calls)
        db = open_database(path, read_only=True)
        t0 = time.perf_counter()
        episodes = pd.DataFrame(read(db, "replay_episodes", {"limit": args.runs}))
        calls = read(db, "replay_calls", {"limit": args.runs})
        t1 = time.perf_counter()
        runs = replays.stored_runs(episodes, calls)
        t2 = time.perf_counter()
        verdicts = replays.replay_all(runs, Policy())
        t3 = time.perf_counter()
        replays.build_episodes(runs)  # in this process, for the floor and for reference
        t3b = time.perf_counter()
        episodes_built = [run.episode for run in runs]
        t3c = time.perf_counter()
        for episode in episodes_built:
            replay(episode, Policy(), mode="enforce")
        t4 = time.perf_counter()
        db.close()
    card = replays.score(verdicts)
    total = t3 - t0
    steps = sum(len(r.episode.steps) for r in runs)
    print(f"{len(runs):,} runs, {steps:,} tool calls; stopped {card.stopped:,}, "
          f"caught {card.caught:,} of {card.labelled_loops:,} labelled loops")
    print(f"  reads          {t1 - t0:6.2f} s")
    print(f"  rows→runs      {t2 - t1:6.2f} s   (rows grouped by run, labels read)")
    print(f"  replay+score   {t3 - t2:6.2f} s   (steps built in the workers, replayed, "
          "scored)")
    print(f"  total          {total:6.2f} s   (target: under 10 s)")
    floor = t4 - t3c
    print(f"  floor: core replay alone {floor:6.2f} s; page total / floor = "
          f"{total / floor:.2f}x")
    print(f"  for reference: rows→episodes in one process {t3b - t3:6.2f} s")


if __name__ == "__main__":
    main()
