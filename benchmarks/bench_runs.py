"""How fast the Runs page lists, searches and pages over a store of 1,000,000 tool calls.

Builds the store with ``bench_metrics.build_store`` (50,000 episodes of 20 calls, flags,
guard decisions, labels, costs), then times the ``run_list`` read as the Runs page asks it:
the first page, a search by agent, a search by tool name, a verdict with another order, a
page deep in the list, and the Runs page itself rendered cold by ``AppTest`` (every read
runs). Baselines, in the same run: the tool calls counted per run (one grouped pass over the
table, the least a list of every run with its counts can cost) and the Import page, which
reads nothing (what Streamlit itself costs).

Run:  .venv/bin/python benchmarks/bench_runs.py [--calls 1000000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dashboard import render_seconds, timed_store
from bench_metrics import CALLS_PER_EPISODE, median_ms

CASES: dict[str, dict[str, Any]] = {
    "first page": {},
    "search by agent": {"search": "agent3"},
    "search by tool": {"search": "tool11"},
    "flagged, by cost": {"verdict": "flagged", "sort": "cost"},
}
PAGE: Final = 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    import duckdb

    from loopscope_collector.reads import run_read

    with tempfile.TemporaryDirectory() as tmp:
        store = timed_store(Path(tmp) / "runs.duckdb", args.calls)
        con = duckdb.connect(str(store), read_only=True)
        base, _ = median_ms(lambda: con.execute(
            "select episode_id, count(*) from tool_calls group by episode_id").fetchall(),
            args.runs)
        print(f"baseline, the tool calls counted per run: {base:.0f} ms")
        runs = args.calls // CALLS_PER_EPISODE
        deep = runs * 4 // 5 // PAGE * PAGE
        cases = {**CASES, f"page {deep // PAGE + 1:,} of {-(-runs // PAGE):,}": {"offset": deep}}
        for name, params in cases.items():
            ms, rows = median_ms(lambda p=params: run_read(con.cursor(), "run_list",
                                                            {"limit": PAGE, **p}), args.runs)
            total = rows[0]["total"] if rows else 0
            print(f"run_list, {name}: {ms:.0f} ms for {len(rows)} of {total:,} runs "
                  f"({ms / base:.1f}x the baseline)")
        con.close()
        os.environ["LOOPSCOPE_DB_SNAPSHOT"] = str(store)
        page = render_seconds("views/runs.py", args.runs)
        empty = render_seconds("views/importer.py", args.runs)
    p, e = statistics.median(page), statistics.median(empty)
    print(f"Runs page, cold, median of {args.runs}: {p:.2f} s; a page that reads nothing: "
          f"{e:.2f} s; Runs / baseline: {p / e:.1f}x")


if __name__ == "__main__":
    main()
